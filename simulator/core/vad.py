"""Voice activity: which frames hold speech, and where speech starts and ends.

Detection runs on fixed frames (webrtcvad at 16 kHz, or plain energy). A voiced run is speech only
once it lasts ``min_speech_ms`` and its frame levels have spread by ``min_spread_db``: webrtcvad
flags the first tens of milliseconds of steady noise while it adapts, and steady noise is level
where speech rises and falls. A run goes on over up to ``max_gap_ms`` of unvoiced frames: webrtcvad
drops loud frames of speech (one to four at a time in an Opus-coded voice), and a run that began on
a syllable's quiet rise would otherwise be dropped there, before its levels had spread, and speech
would start after the gap, tens of milliseconds late. Once a run counts, its onset goes back over
the soft onset and the short bursts before it that stand above the stream's own noise floor
(``onsets``). Streaming and whole-clip detection share that rule (``SpeechRuns``), so a session
and a re-measurement of its recording decide alike. Edges are then refined to the sample with an
amplitude threshold (above the noise floor where that is higher), because timing metrics need
better than a frame's resolution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import soxr
import webrtcvad
from numpy.typing import NDArray

from duplexsim.core.onsets import OnsetRule, floor_peak, onset_spans

__all__ = [
    "BEFORE_RUN_RULE",
    "VAD_RATE",
    "Segment",
    "SpeechRuns",
    "StreamingVad",
    "VadConfig",
    "frame_flags",
    "refine_bounds",
    "segments",
    "speech_bounds",
    "speech_onset",
]

VAD_RATE = 16000
# settings recorded before a rule lack its fields: re-measured as they were measured (the run
# rule: steady noise, then gaps; then the onset rule: what a run's onset goes back over)
BEFORE_RUN_RULE = {
    "min_spread_db": 0.0,
    "spread_skip_ms": 0,
    "max_gap_ms": 0,
    "onset_floor_db": 0.0,
    "edge_above_floor": False,
}
FloatArray = NDArray[np.float32]
BoolArray = NDArray[np.bool_]


@dataclass(frozen=True)
class VadConfig:
    kind: Literal["webrtc", "energy"] = "webrtc"
    frame_ms: int = 10  # webrtcvad accepts 10, 20 or 30
    aggressiveness: int = 2  # webrtcvad mode 0..3
    energy_dbfs: float = -45.0  # frames below this RMS are never speech
    edge_dbfs: float = -40.0  # amplitude that marks a refined speech edge
    min_speech_ms: int = 30  # shorter voiced runs are clicks, not speech
    min_spread_db: float = 6.0  # a voiced run whose frame levels stay within this is steady noise
    spread_skip_ms: int = 30  # a run's first frames (a codec's fade-in) do not count in its spread
    max_gap_ms: int = 50  # a voiced run goes on over this much of unvoiced frames (whole ones)
    # the onset rule (``onsets``; 0: off): frames this far above the noise floor before a run
    # that counts are its onset, and so are bursts before a pause, as loud as the run
    onset_floor_db: float = 6.0
    floor_ms: int = 500  # the levels before a run that show the floor
    burst_gap_ms: int = 300  # a pause at most this long between a burst and what follows
    burst_db: float = 15.0  # a burst's loudest frame is at most this far below the run's
    edge_above_floor: bool = True  # a refined edge is above the noise floor's loudest sample

    def __post_init__(self) -> None:
        if self.frame_ms not in (10, 20, 30):
            raise ValueError(f"vad frame_ms must be 10, 20 or 30, not {self.frame_ms}")
        for name in ("max_gap_ms", "floor_ms", "burst_gap_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"vad {name} must not be negative, not {getattr(self, name)}")
        if not 0 <= self.aggressiveness <= 3:
            raise ValueError(f"vad aggressiveness must be 0..3, not {self.aggressiveness}")
        if self.kind not in ("webrtc", "energy"):
            raise ValueError(f"vad kind must be 'webrtc' or 'energy', not {self.kind!r}")

    @property
    def frame_s(self) -> float:
        return self.frame_ms / 1000.0

    @property
    def frame_len(self) -> int:
        return VAD_RATE * self.frame_ms // 1000

    @property
    def onset_rule(self) -> OnsetRule | None:
        """The onset rule in frames; None: a run starts at its first voiced frame."""
        if self.onset_floor_db <= 0:
            return None
        return OnsetRule(
            floor_frames=self.floor_ms // self.frame_ms,
            soft_db=self.onset_floor_db,
            energy_db=self.energy_dbfs,
            max_gap=self.max_gap_ms // self.frame_ms,
            burst_gap=self.burst_gap_ms // self.frame_ms,
            burst_db=self.burst_db,
        )


@dataclass(frozen=True)
class Segment:
    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


def _to_vad_rate(samples: FloatArray, rate: int) -> FloatArray:
    x = np.asarray(samples, dtype=np.float32)
    if rate == VAD_RATE or x.size == 0:
        return x
    return np.asarray(soxr.resample(x, rate, VAD_RATE, "HQ"), dtype=np.float32)


def _classify(
    frames: FloatArray, cfg: VadConfig, vad: webrtcvad.Vad | None
) -> tuple[BoolArray, NDArray[np.float64]]:
    """Raw speech flags and levels (dBFS) of complete frames at VAD_RATE, shape (n, frame_len)."""
    # This runs for every 20 ms of every stream (a session's replies, a fake's input): few
    # calls into numpy, and none of its Python-level wrappers (np.any, np.mean, np.clip), whose
    # checks cost more than the work on two frames. The results are those of the plain forms.
    n = frames.shape[0]
    if n == 0 or not np.count_nonzero(frames):  # digital silence: the common case, made cheap
        return np.zeros(n, dtype=bool), np.full(n, -200.0)
    squares = np.square(frames, dtype=np.float64)
    rms = np.sqrt(np.add.reduce(squares, axis=1) / frames.shape[1])  # np.mean's own sum
    level = 20.0 * np.log10(np.maximum(rms, 1e-10))
    loud = level > cfg.energy_dbfs
    if cfg.kind == "energy" or vad is None:
        return np.asarray(loud, dtype=bool), level
    flags = np.zeros(n, dtype=bool)
    hits = np.flatnonzero(loud)
    if hits.size:  # only loud frames go to the VAD, so only they are converted
        scaled = frames[hits] * 32768.0
        np.rint(scaled, out=scaled)
        np.minimum(scaled, 32767.0, out=scaled)
        np.maximum(scaled, -32768.0, out=scaled)
        pcm = scaled.astype("<i2")
        for k, i in enumerate(hits):
            flags[i] = vad.is_speech(pcm[k].tobytes(), VAD_RATE)
    return flags, level


class SpeechRuns:
    """Raw frame flags -> speech frames, as they stream in: a voiced run counts from its first
    frame once it has ``min_speech_ms`` of voiced frames and its levels after its first
    ``spread_skip_ms`` have spread by ``min_spread_db``; a run that ends before both is dropped.
    Up to ``max_gap_ms`` of unvoiced frames do not end a run; once it counts they are speech.
    When it counts, its onset goes back over what belongs to it (``onsets``): those spans come
    first, in order."""

    def __init__(self, cfg: VadConfig) -> None:
        self.min_frames = max(1, -(-cfg.min_speech_ms // cfg.frame_ms))
        self.min_spread_db = cfg.min_spread_db
        self.skip = cfg.spread_skip_ms // cfg.frame_ms
        self.max_gap = cfg.max_gap_ms // cfg.frame_ms
        self.onsets = cfg.onset_rule
        self.frames_done = 0
        self._start: int | None = None  # first frame of the current raw run
        self._last = -1  # its last voiced frame
        self._voiced = 0  # its voiced frames
        self._lo = self._hi = self._peak = 0.0
        self._confirmed = False
        self._history = _History(self.onsets)
        self._spoken = 0  # frames before this were speech (or were passed over)

    @property
    def decided(self) -> int:
        """Frames whose decision is final: all but a run not yet found to be speech, or the gap
        a run that counts may still go on over."""
        if self._start is None:
            return self.frames_done
        if not self._confirmed:
            return self._start
        return min(self.frames_done, self._last + 1)

    def decided_through_silence(self, until: int) -> int:
        """Frames decided if the stream is silent from here up to frame ``until``: a run whose
        last voiced frame (or a partial frame not yet classified) lies more than ``max_gap``
        before ``until`` is over."""
        if self._start is None or until > max(self._last, self.frames_done) + self.max_gap + 1:
            return max(until, self.decided)
        return self.decided

    def push(self, flags: BoolArray, levels: NDArray[np.float64]) -> list[tuple[int, int]]:
        """Spans [first, end) of frames found to be speech by these frames (in order)."""
        spans: list[tuple[int, int]] = []
        self._history.add(flags, levels)
        if self._start is None and not flags.any():  # silence between runs: nothing to follow
            self.frames_done += flags.size
            self._history.keep_from(self.frames_done)
            return spans
        for i in range(flags.size):
            k = self.frames_done + i
            if not flags[i]:
                if self._start is not None and k - self._last > self.max_gap:
                    self._start = None
                continue
            for span in self._voiced_frame(k, float(levels[i])):
                if spans and spans[-1][1] == span[0]:
                    spans[-1] = (spans[-1][0], span[1])
                else:
                    spans.append(span)
        self.frames_done += flags.size
        self._history.keep_from(self.frames_done if self._start is None else self._start)
        return spans

    def _voiced_frame(self, k: int, level: float) -> list[tuple[int, int]]:
        """Voiced frame ``k``: the spans it makes speech, if any."""
        if self._start is None:
            self._start, self._last, self._voiced = k, k - 1, 0
            self._lo, self._hi, self._peak = math.inf, -math.inf, -math.inf
            self._confirmed = False
        self._voiced += 1
        self._peak = max(self._peak, level)
        if k - self._start >= self.skip or self.min_spread_db <= 0:
            self._lo, self._hi = min(self._lo, level), max(self._hi, level)
        spans: list[tuple[int, int]] = []
        if self._confirmed:
            spans = [(self._last + 1, k + 1)]  # the gap it went on over is speech too
        elif self._voiced >= self.min_frames and (
            self.min_spread_db <= 0 or self._hi - self._lo >= self.min_spread_db
        ):
            self._confirmed = True
            spans = self._onset(self._start)
            spans[-1] = (spans[-1][0], k + 1)
        self._last = k
        if spans:
            self._spoken = k + 1
        return spans

    def _onset(self, start: int) -> list[tuple[int, int]]:
        """The spans a run that counts from ``start`` begins with (its onset rule's)."""
        if self.onsets is None:
            return [(start, start + 1)]
        first = max(self._spoken, start - self._history.span)
        levels, flags = self._history.frames(first, start)
        spans = onset_spans(levels, flags, start - first, self._peak, self.onsets)
        return [(lo + first, hi + first) for lo, hi in spans]


class _History:
    """The frames before a run (levels and raw flags) that its onset rule looks back over."""

    def __init__(self, rule: OnsetRule | None) -> None:
        self.span = 0 if rule is None else 2 * (rule.floor_frames + rule.burst_gap)
        self._first = 0  # the frame _levels[0] is
        self._levels = np.zeros(0)
        self._flags = np.zeros(0, dtype=bool)

    def add(self, flags: BoolArray, levels: NDArray[np.float64]) -> None:
        if self.span:
            self._levels = np.concatenate((self._levels, levels))
            self._flags = np.concatenate((self._flags, flags))

    def keep_from(self, frame: int) -> None:
        """Forget the frames no run from ``frame`` on can look back to."""
        drop = frame - self.span - self._first
        if self.span and drop > 0:
            self._levels, self._flags = self._levels[drop:], self._flags[drop:]
            self._first += drop

    def frames(self, lo: int, hi: int) -> tuple[NDArray[np.float64], BoolArray]:
        a, b = max(lo, self._first) - self._first, hi - self._first
        return self._levels[a:b], self._flags[a:b]


def _runs(flags: BoolArray) -> list[tuple[int, int]]:
    padded = np.concatenate(([False], flags, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def frame_flags(samples: FloatArray, rate: int, cfg: VadConfig | None = None) -> BoolArray:
    """Speech flag per frame of ``cfg.frame_ms`` from sample 0; a partial last frame is dropped."""
    cfg = cfg or VadConfig()
    x = _to_vad_rate(samples, rate)
    n = x.size // cfg.frame_len
    frames = x[: n * cfg.frame_len].reshape(n, cfg.frame_len)
    vad = webrtcvad.Vad(cfg.aggressiveness) if cfg.kind == "webrtc" else None
    out = np.zeros(n, dtype=bool)
    for lo, hi in SpeechRuns(cfg).push(*_classify(frames, cfg, vad)):
        out[lo:hi] = True
    return out


def segments(flags: BoolArray, frame_s: float, *, min_gap_s: float = 0.0) -> list[Segment]:
    """Voiced runs as time segments; gaps shorter than ``min_gap_s`` are bridged."""
    merged: list[Segment] = []
    for start, end in _runs(flags):
        seg = Segment(start * frame_s, end * frame_s)
        if merged and seg.start_s - merged[-1].end_s < min_gap_s:
            merged[-1] = Segment(merged[-1].start_s, seg.end_s)
        else:
            merged.append(seg)
    return merged


def speech_bounds(
    samples: FloatArray, rate: int, cfg: VadConfig | None = None
) -> tuple[float, float] | None:
    """(onset_s, offset_s) of all speech in ``samples``, refined to the sample; None if no speech."""
    cfg = cfg or VadConfig()
    x = np.asarray(samples, dtype=np.float32)
    flags = frame_flags(x, rate, cfg)
    voiced = np.flatnonzero(flags)
    if voiced.size == 0:
        return None
    return refine_bounds(x, rate, int(voiced[0]), int(voiced[-1]) + 1, cfg)


def speech_onset(samples: FloatArray, rate: int, cfg: VadConfig | None = None) -> float | None:
    """``speech_bounds(samples, rate, cfg)[0]``, reading ``samples`` only as far as its first
    speech is found (a fake model cutting its reply from the user's words finds its onset in a
    few frames instead of classifying seconds of them as the reply starts)."""
    cfg = cfg or VadConfig()
    x = np.asarray(samples, dtype=np.float32)
    if rate != VAD_RATE:  # a streaming resampler's output is not the one-shot one's
        bounds = speech_bounds(x, rate, cfg)
        return None if bounds is None else bounds[0]
    vad = StreamingVad(rate, cfg)
    spans: list[tuple[int, int]] = []
    step = _ONSET_STEP_FRAMES * cfg.frame_len
    for lo in range(0, x.size, step):
        spans = vad.speech(x[lo : lo + step])
        if spans:
            break
    if not spans:
        return None  # what frame_flags finds too: no run that counts, whole frames only
    first, end = spans[0][0], spans[-1][1]
    frame = cfg.frame_len
    # the first sample at the edge level from a frame before ``first``: the whole clip's search
    # finds the same one where it lies before the speech found so far
    hi = (end if cfg.edge_above_floor else first + 1) * frame
    onset = _first_at_edge(x, max(0, (first - 1) * frame), hi, edge_level(x, rate, first, cfg), -1)
    if onset < 0:
        bounds = speech_bounds(x, rate, cfg)
        return None if bounds is None else bounds[0]
    return onset / rate


_ONSET_STEP_FRAMES = 8  # frames classified per step while looking for the first speech


def refine_bounds(
    x: FloatArray, rate: int, first: int, end: int, cfg: VadConfig
) -> tuple[float, float]:
    """(onset_s, offset_s) of speech in VAD frames [first, end) of ``x``, refined to the sample:
    the first and last samples at the edge level within a frame of the frames' edges."""
    frame = rate * cfg.frame_ms // 1000
    last = end - 1
    edge = edge_level(x, rate, first, cfg)
    # over the whole speech where the edge follows the floor (a soft onset reaches it late)
    inner = (end, first) if cfg.edge_above_floor else (first + 1, last)
    lo, hi = max(0, (first - 1) * frame), inner[0] * frame
    onset = _first_at_edge(x, lo, hi, edge, first * frame)
    lo, hi = inner[1] * frame, (last + 2) * frame
    offset = _last_at_edge(x, lo, hi, edge, (last + 1) * frame)
    return onset / rate, offset / rate


def edge_level(x: FloatArray, rate: int, first: int, cfg: VadConfig) -> float:
    """The amplitude that marks a speech edge: ``edge_dbfs``, or the loudest sample of the noise
    floor before VAD frame ``first`` where that is higher (noise that reaches the edge level is
    not speech; a sample louder than 500 ms of it is, but for one chance in tens)."""
    edge = 10.0 ** (cfg.edge_dbfs / 20.0)
    if cfg.edge_above_floor:
        frame = rate * cfg.frame_ms // 1000
        edge = max(edge, floor_peak(x, frame, first - 1, cfg.floor_ms // cfg.frame_ms))
    return float(edge)


# an edge is searched block by block from the side it is on: it is near that side, and a whole
# reply's samples (seconds of them) need not be read to find it
_EDGE_BLOCK = 2048


def _first_at_edge(x: FloatArray, lo: int, hi: int, edge: float, default: int) -> int:
    """The first sample in [lo, hi) at least ``edge`` loud; ``default`` where none is."""
    hi = min(hi, x.size)
    for start in range(lo, hi, _EDGE_BLOCK):
        hits = np.flatnonzero(np.abs(x[start : min(start + _EDGE_BLOCK, hi)]) >= edge)
        if hits.size:
            return start + int(hits[0])
    return default


def _last_at_edge(x: FloatArray, lo: int, hi: int, edge: float, default: int) -> int:
    """One past the last sample in [lo, hi) at least ``edge`` loud; ``default`` where none is."""
    hi = min(hi, x.size)
    for end in range(hi, lo, -_EDGE_BLOCK):
        start = max(lo, end - _EDGE_BLOCK)
        hits = np.flatnonzero(np.abs(x[start:end]) >= edge)
        if hits.size:
            return start + int(hits[-1]) + 1
    return default


class StreamingVad:
    """Incremental frame flags for audio that arrives in chunks of any size and rate."""

    def __init__(self, rate: int, cfg: VadConfig | None = None) -> None:
        self.cfg = cfg or VadConfig()
        self._resampler = None if rate == VAD_RATE else soxr.ResampleStream(rate, VAD_RATE, 1)
        self._pending = np.zeros(0, dtype=np.float32)
        self._vad = webrtcvad.Vad(self.cfg.aggressiveness) if self.cfg.kind == "webrtc" else None
        self._runs = SpeechRuns(self.cfg)
        self.frames_done = 0

    @property
    def decided_frames(self) -> int:
        """Frames from the stream's start whose speech decision is final."""
        return self._runs.decided

    def decided_through_silence(self, until: int) -> int:
        """Frames decided if the stream is silent from what it has had up to frame ``until``."""
        return self._runs.decided_through_silence(until)

    def speech(self, samples: FloatArray) -> list[tuple[int, int]]:
        """Spans [first, end) of frames (from the stream's start) found to be speech by this
        chunk: what ``frame_flags`` says of the whole stream, decided as it arrives."""
        flags, levels = self._frames(samples)
        return self._runs.push(flags, levels)

    def push(self, samples: FloatArray) -> BoolArray:
        """Raw flags of the frames completed by this chunk (before the run rule)."""
        return self._frames(samples)[0]

    def finish(self) -> list[tuple[int, int]]:
        """Spans found once the stream is over: the audio the resampler still holds (about
        21 ms from 24 kHz) and a last partial frame, completed with the silence that follows
        the stream (as a listener hears it, and as ``frame_flags`` sees a recording padded past
        its end). Nothing may be pushed after it."""
        if self._resampler is not None:
            tail = self._resampler.resample_chunk(np.zeros(0, np.float32), last=True)
            self._resampler = None
            self._pending = np.concatenate((self._pending, np.asarray(tail, np.float32)))
        short = -self._pending.size % self.cfg.frame_len
        return self.speech(np.zeros(short, dtype=np.float32))

    def _frames(self, samples: FloatArray) -> tuple[BoolArray, NDArray[np.float64]]:
        x = np.asarray(samples, dtype=np.float32)
        if self._resampler is not None:
            x = np.asarray(self._resampler.resample_chunk(x), dtype=np.float32)
        self._pending = np.concatenate((self._pending, x))
        n = self._pending.size // self.cfg.frame_len
        frames = self._pending[: n * self.cfg.frame_len].reshape(n, self.cfg.frame_len)
        self._pending = self._pending[n * self.cfg.frame_len :]
        self.frames_done += n
        return _classify(frames, self.cfg, self._vad)
