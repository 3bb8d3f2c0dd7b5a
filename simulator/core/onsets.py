"""Where speech begins, once a voiced run has been found to be speech (pure).

A run is confirmed as speech part way in (``vad.SpeechRuns``: it has lasted and its levels have
spread, which steady noise never does). Real speech often begins before that run: a soft onset
webrtcvad does not flag (an "h", the burst of a "g", a vowel's quiet rise), or a short level
syllable ("hi", "so", "m") and then a pause; the run rule alone drops those and the onset moves
to the next run, tens to hundreds of milliseconds late. So, once a run is confirmed, its onset
goes back over what belongs to it, judged against the noise floor the stream itself shows:

- the floor is a low percentile of the levels of the frames outside speech in the ``floor_ms``
  before the run: those webrtcvad did not voice, but for digital silence (a stream that sends
  nothing shows no floor; a codec's or a room's does);
- frames just before the run that stand ``onset_floor_db`` above the floor (and above the VAD's
  ``energy_dbfs``), over gaps of at most ``max_gap_ms``, are its soft onset;
- a burst before a pause of at most ``burst_gap_ms`` belongs too if webrtcvad voiced some of it
  and its loudest frame is within ``burst_db`` of the run's: a word's first syllable is about as
  loud as the rest, a breath tens of dB softer; and so on back, burst by burst.

Steady noise is the floor itself: nothing in it stands above it, so it never joins a reply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "DIGITAL_SILENCE_DB",
    "OnsetRule",
    "floor_peak",
    "frame_levels",
    "noise_floor_db",
    "onset_spans",
]

DIGITAL_SILENCE_DB = -90.0  # frames below this show no floor (PCM16's own noise is -101 dBFS)
FLOOR_PERCENTILE = 20.0  # of the levels outside speech: speech bursts in the window stay above it
FLOOR_BAND_DB = 3.0  # frames this close to the floor are the floor's (the rest: bursts, speech)

Levels = NDArray[np.float64]
Flags = NDArray[np.bool_]


@dataclass(frozen=True)
class OnsetRule:
    """The onset rule in frames (from ``VadConfig``: ``vad.onset_rule``)."""

    floor_frames: int  # the window before a run whose levels show the floor
    soft_db: float  # a frame this far above the floor is audible (0: the rule is off)
    energy_db: float  # and never below this
    max_gap: int  # audible frames go on over this many that are not
    burst_gap: int  # a burst at most this many frames before the onset may belong to it
    burst_db: float  # if its loudest frame is within this of the run's


def frame_levels(x: NDArray[np.float32], frame: int) -> Levels:
    """RMS level (dBFS) of each whole frame of ``frame`` samples of ``x``."""
    n = x.size // frame
    if n == 0:
        return np.zeros(0)
    frames = x[: n * frame].reshape(n, frame)
    rms = np.sqrt(np.mean(np.square(frames, dtype=np.float64), axis=1))
    return np.asarray(20.0 * np.log10(np.maximum(rms, 1e-10)))


def noise_floor_db(levels: Levels) -> float:
    """The floor ``levels`` show: a low percentile of them (-inf if there are none)."""
    if levels.size == 0:
        return -math.inf
    shown = np.sort(levels)
    return float(shown[int(FLOOR_PERCENTILE / 100.0 * (shown.size - 1))])


def floor_peak(x: NDArray[np.float32], frame: int, end: int, frames: int) -> float:
    """The loudest sample of the noise floor in the ``frames`` frames (of ``frame`` samples)
    before frame ``end`` of ``x``: of the frames within ``FLOOR_BAND_DB`` of the floor (digital
    silence where a stream sent it: then nothing)."""
    lo = max(0, end - frames) * frame
    window = x[lo : max(lo, end * frame)]
    levels = frame_levels(window, frame)
    quiet = levels <= noise_floor_db(levels) + FLOOR_BAND_DB
    if not quiet.any():
        return 0.0
    peaks = np.abs(window[: levels.size * frame].reshape(-1, frame)).max(axis=1)
    return float(peaks[quiet].max())


def onset_spans(
    levels: Levels, flags: Flags, start: int, peak_db: float, rule: OnsetRule
) -> list[tuple[int, int]]:
    """Spans [lo, hi) of the frames before ``start`` (indices into ``levels`` and ``flags``, the
    history before and including the run) that belong to the run confirmed at ``start`` (whose
    loudest frame so far is ``peak_db``), in order; the last one ends at ``start``."""
    window = slice(max(0, start - rule.floor_frames), start)
    outside = ~flags[window] & (levels[window] > DIGITAL_SILENCE_DB)
    floor = noise_floor_db(levels[window][outside])
    audible = levels >= max(rule.energy_db, floor + rule.soft_db)
    lo = _island_start(audible, start, rule.max_gap)
    spans = [(lo, start)]
    while True:
        burst = _burst_before(audible, flags, levels, lo, peak_db, rule)
        if burst is None:
            return spans
        spans.insert(0, burst)
        lo = burst[0]


def _island_start(audible: Flags, end: int, max_gap: int) -> int:
    """The first frame of the audible stretch that ends at ``end``, its frames at most
    ``max_gap`` apart (``end`` itself if none of the ``max_gap + 1`` frames before it is)."""
    lo, k = end, end - 1
    while k >= 0 and lo - k <= max_gap + 1:
        if audible[k]:
            lo = k
        k -= 1
    return lo


def _burst_before(
    audible: Flags, flags: Flags, levels: Levels, onset: int, peak_db: float, rule: OnsetRule
) -> tuple[int, int] | None:
    """The burst that ends within ``burst_gap`` frames before ``onset`` and belongs to the
    reply, if there is one."""
    k = onset - 1
    while k >= 0 and not audible[k]:
        k -= 1
    if k < 0 or onset - (k + 1) > rule.burst_gap:
        return None
    hi = k + 1
    lo = _island_start(audible, hi, rule.max_gap)
    if not flags[lo:hi].any() or float(levels[lo:hi].max()) < peak_db - rule.burst_db:
        return None
    return lo, hi
