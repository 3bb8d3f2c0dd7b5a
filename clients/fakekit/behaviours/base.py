"""The Behaviour base class: media-time turn tracking and reply rendering, shared by every kind.

Turns are tracked with webrtcvad: speech starts after ``min_speech_ms`` of voiced frames; the turn
ends after ``hangover_s`` without speech. E, the turn's end, is the refined end of its last voiced
frame (``speech_bounds``), exact to the sample. Every audio window handed to ``speech_bounds`` is
bounded by VAD frame edges, never by chunk edges, so results do not depend on how input is chunked.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.vad import (
    VAD_RATE,
    StreamingVad,
    VadConfig,
    refine_bounds,
    speech_bounds,
    speech_onset,
)

__all__ = ["Behaviour", "FloatArray", "Step", "UserTurn"]

FloatArray = NDArray[np.float32]
PREROLL_S = 0.3  # audio kept before a turn's first voiced frame, so its onset can be refined


@dataclass(frozen=True)
class Step:
    audio: FloatArray  # the model's output for the same media interval as the input chunk
    speech_started: bool = False  # the user's speech began (was detected) in this interval
    speech_stopped: bool = False  # the user's turn end was decided in this interval
    reply_started: bool = False
    reply_done: bool = False  # the reply's last sample is in this interval (end of turn)
    silent: bool = False  # nothing is playing: ``audio`` is all zeros


@dataclass(frozen=True)
class UserTurn:
    """One user turn, in samples from the start of the input."""

    rate: int
    onset: int  # refined first voiced sample
    end: int  # E: refined end of the last voiced frame (exclusive)
    decided: int  # where the turn end was decided (end of the hangover)

    @property
    def end_s(self) -> float:
        return self.end / self.rate


class _History:
    """The recent input, addressed by absolute sample index, trimmed from the front. One
    contiguous buffer: a turn's window is a slice of it, not a join of every chunk it spans."""

    def __init__(self) -> None:
        self._buf = np.zeros(1 << 16, dtype=np.float32)
        self._first = 0  # absolute index of _buf[0]
        self._end = 0  # absolute index one past the last sample held

    def append(self, start: int, x: FloatArray) -> None:
        if not x.size:
            return
        if start != self._end:  # a gap (never in practice: the input is contiguous)
            self._first = self._end = start
        n = self._end - self._first
        if n + x.size > self._buf.size:
            grown = np.zeros(max(2 * self._buf.size, n + x.size), dtype=np.float32)
            grown[:n] = self._buf[:n]
            self._buf = grown
        self._buf[n : n + x.size] = x
        self._end += x.size

    def slice(self, lo: int, hi: int) -> FloatArray:
        lo, hi = max(lo, self._first), min(hi, self._end)
        if hi <= lo:
            return np.zeros(0, dtype=np.float32)
        return self._buf[lo - self._first : hi - self._first].copy()

    def discard_before(self, index: int) -> None:
        drop = min(index, self._end) - self._first
        # moved down only once half the buffer is behind: a copy per 32k+ samples, not per chunk
        if drop > 0 and drop >= self._buf.size // 2:
            n = self._end - self._first - drop
            self._buf[:n] = self._buf[drop : drop + n]
            self._first += drop


@dataclass(frozen=True)
class _Edge:
    started: bool  # True: speech began; False: the turn ended
    frame: int  # first voiced frame of the run (start) or last voiced frame (end)
    at_frame: int  # the frame in which this was decided


class _TurnTracker:
    """Turn edges from streaming VAD frames; the same input gives the same edges however chunked."""

    def __init__(self, rate: int, cfg: VadConfig, hangover_s: float) -> None:
        self._vad = StreamingVad(rate, cfg)
        self._min_run = max(1, -(-cfg.min_speech_ms // cfg.frame_ms))
        self._hangover = max(1, math.ceil(hangover_s / cfg.frame_s - 1e-9))
        self._run = 0
        self._last = -1
        self.speaking = False

    def push(self, x: FloatArray) -> list[_Edge]:
        first = self._vad.frames_done
        flags = self._vad.push(x)
        edges = (self._step(k, bool(v)) for k, v in enumerate(flags, start=first))
        return [e for e in edges if e is not None]

    def _step(self, k: int, voiced: bool) -> _Edge | None:
        if voiced:
            self._run += 1
            self._last = k
            if not self.speaking and self._run >= self._min_run:
                self.speaking = True
                return _Edge(True, k - self._run + 1, k)
            return None
        self._run = 0
        if self.speaking and k - self._last >= self._hangover:
            self.speaking = False
            return _Edge(False, self._last, k)
        return None


class _TurnVad:
    """``frame_flags`` over a window that starts at sample ``lo``, decided as the window's
    audio comes: the same fresh VAD and run rule, fed the same frames in the same order, so its
    first and last speech frames are the ones a pass over the whole window finds."""

    def __init__(self, rate: int, cfg: VadConfig, lo: int) -> None:
        self.lo = self.fed = lo
        self.batch = rate // 10  # fed 100 ms at a time: the cost of a call is mostly its own
        self._vad = StreamingVad(rate, cfg)
        self.first: int | None = None  # first speech frame of the window
        self.end = 0  # one past its last speech frame

    def feed(self, history: _History, upto: int) -> None:
        """The window's audio up to sample ``upto`` (whole frames: ``upto`` is a frame edge,
        or the rest waits in the VAD for the next call)."""
        if upto <= self.fed:
            return
        for first, end in self._vad.speech(history.slice(self.fed, upto)):
            self.first = first if self.first is None else min(self.first, first)
            self.end = max(self.end, end)
        self.fed = upto


class Behaviour(ABC):
    """Input audio in, output audio for the same media interval out; subclasses decide replies."""

    name: ClassVar[str]

    def __init__(
        self, sample_rate: int, *, hangover_s: float = 0.6, vad: VadConfig | None = None
    ) -> None:
        if sample_rate <= 0 or hangover_s <= 0:
            raise ValueError("sample_rate and hangover_s must be positive")
        self.rate = sample_rate
        self.hangover_s = hangover_s
        # the user's turns come from clean input: edges found on a window as short as the
        # preroll, which the steady-noise rule (it waits for a run's levels to spread) would miss
        self._cfg = vad or VadConfig(min_spread_db=0.0)
        self._tracker = _TurnTracker(sample_rate, self._cfg, hangover_s)
        self._history = _History()
        self._pos = 0
        self._turn_begin = 0  # first sample of the current turn's audio window
        self._floor_frame = 0  # a turn's window never reaches back into the previous turn
        self._onset = 0
        self._turn_vad: _TurnVad | None = None  # the turn's VAD, kept up as its audio comes
        self._reply: tuple[int, FloatArray] | None = None
        self.turns: list[UserTurn] = []

    @property
    def scheduled_reply(self) -> tuple[int, FloatArray] | None:
        """The reply being played: (first input sample, audio), or None."""
        return self._reply

    @property
    def replying(self) -> bool:
        return self._reply is not None

    def interrupt(self) -> None:
        """The server stopped the reply (the user talked over it, or the client cancelled it):
        the model is silent again, so the turn under way gets a reply of its own."""
        self._reply = None

    def push(self, samples: NDArray[Any]) -> Step:
        x = np.array(samples, dtype=np.float32).reshape(-1)  # a copy: callers may reuse buffers
        c0, self._pos = self._pos, self._pos + x.size
        self._history.append(c0, x)
        started = stopped = False
        for edge in self._tracker.push(x):
            now = max(self._sample(edge.at_frame + 1), c0)  # the earliest a reply can start
            if edge.started:
                started = True
                self._speech_started(edge, now)
            else:
                stopped = True
                self._turn_ended(edge, now)
        vad = self._turn_vad
        if vad is not None and self._tracker.speaking and self._pos - vad.fed >= vad.batch:
            vad.feed(self._history, self._pos)
        self._history.discard_before(self._keep_from())
        return self._render(c0, x.size, started, stopped)

    def _on_speech_started(self, onset: int, now: int) -> None:  # noqa: B027 - optional hook
        """The user's speech began at sample ``onset``; detected at ``now``."""

    def _on_talked_over(self, onset: int, now: int) -> None:  # noqa: B027 - optional hook
        """The user began to speak at ``onset`` while the model replies; detected at ``now``
        (by default the model talks on)."""

    def _cut_at(self, index: int) -> None:
        """The reply being played stops at input sample ``index`` (nothing of it after)."""
        if self._reply is not None:
            at, audio = self._reply
            self._reply = (at, audio[: max(0, index - at)]) if index > at else None

    @abstractmethod
    def _on_turn_end(self, turn: UserTurn, now: int) -> None:
        """The user's turn ended while the model is not replying."""

    def _schedule(self, audio: FloatArray, at: int) -> None:
        if audio.size:
            self._reply = (at, np.asarray(audio, dtype=np.float32))

    def _audio(self, lo: int, hi: int) -> FloatArray:
        return self._history.slice(lo, hi)

    def _sample(self, frame: int) -> int:
        return frame * self._cfg.frame_ms * self.rate // 1000

    def _speech_started(self, edge: _Edge, now: int) -> None:
        preroll = round(PREROLL_S / self._cfg.frame_s)
        self._turn_begin = self._sample(max(edge.frame - preroll, self._floor_frame))
        hi = self._sample(edge.at_frame + 1)  # not ``now``: windows must not depend on chunking
        first = self._sample(edge.frame)
        self._onset = self._speech_onset(self._turn_begin, hi, default=first)
        self._turn_vad = self._new_turn_vad(self._turn_begin)
        if not self.replying:
            self._on_speech_started(self._onset, now)
        else:
            self._on_talked_over(self._onset, now)

    def _turn_ended(self, edge: _Edge, now: int) -> None:
        self._floor_frame = edge.at_frame + 1
        lo, hi = self._turn_begin, self._sample(edge.at_frame + 1)
        bounds = self._turn_bounds(lo, hi)
        end = self._sample(edge.frame + 1) if bounds is None else lo + round(bounds[1] * self.rate)
        onset = self._onset if bounds is None else lo + round(bounds[0] * self.rate)
        turn = UserTurn(self.rate, onset, end, hi)
        self.turns.append(turn)
        if not self.replying:
            self._on_turn_end(turn, now)

    def _new_turn_vad(self, lo: int) -> _TurnVad | None:
        """The VAD over the turn's window from ``lo``, fed as the turn's audio comes; None where
        only a pass over the whole window decides as ``speech_bounds`` does (another rate: a
        streaming resampler's output is not the one-shot one's, sample for sample)."""
        return _TurnVad(self.rate, self._cfg, lo) if self.rate == VAD_RATE else None

    def _turn_bounds(self, lo: int, hi: int) -> tuple[float, float] | None:
        """``speech_bounds`` of the turn's window [lo, hi): both edges in one decision. The
        frames were classified as they came (``_TurnVad``); at the turn's end only the edges are
        refined, so the reply it starts does not wait for a pass over the whole turn (a fake's
        work at a turn end stalls every connection it serves, the replying one first)."""
        window = self._audio(lo, hi)
        vad, self._turn_vad = self._turn_vad, None
        if vad is None or vad.lo != lo:
            return speech_bounds(window, self.rate, self._cfg)
        vad.feed(self._history, hi)
        if vad.first is None:
            return None
        return refine_bounds(window, self.rate, vad.first, vad.end, self._cfg)

    def _speech_onset(self, lo: int, hi: int, *, default: int) -> int:
        """The first sample of speech in [lo, hi) (``speech_bounds``' onset), else ``default``."""
        onset = speech_onset(self._audio(lo, hi), self.rate, self._cfg)
        return default if onset is None else lo + round(onset * self.rate)

    def _keep_from(self) -> int:
        if self._tracker.speaking:
            return self._turn_begin
        return self._pos - round((PREROLL_S + 0.2) * self.rate)  # slack for resampler delay

    def _render(self, c0: int, n: int, started: bool, stopped: bool) -> Step:
        out = np.zeros(n, dtype=np.float32)
        if self._reply is None:
            return Step(out, started, stopped, silent=True)
        at, audio = self._reply
        end = at + audio.size
        lo, hi = max(at, c0), min(end, c0 + n)
        if lo < hi:
            out[lo - c0 : hi - c0] = audio[lo - at : hi - at]
        done = end <= c0 + n
        if done:
            self._reply = None
        return Step(out, started, stopped, c0 <= at < c0 + n, done)
