"""One direction of a two-model session: what one side said, as the frames the other is sent
(pure: no clock, no I/O; the session calls it once per frame, in order).

Frame k of the listening side spans [k F, (k + 1) F) of the timeline and holds the speaking side's
audio from ``delay_s`` earlier: two frames, the bridge and, between two rates, the resampler's
look-ahead. It is built a frame before it is due (so at its due time it only goes out, as a
context's frame does), once the frame before that is over, and by then the audio it holds is
final (``OutputTrack`` places a chunk that comes late at most ``bridge_s`` before its arrival,
never behind what it placed before). Between rates each output sample is a windowed sinc centred
on its own instant in the source (no phase delay: the look-ahead is read from audio already
final), so audio at t on the speaking side's timeline is heard at t + ``delay_s``, exact to the
sample.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

__all__ = ["Relay", "Segments"]

FloatArray = NDArray[np.float32]
HALF_TAPS = 32  # each side of a resampled sample's kernel, in source samples
BETA = 8.0  # the Kaiser window's: about 80 dB of stopband


class Segments(Protocol):
    """Where the speaking side's audio is (an ``OutputTrack``)."""

    def segment(self, lo: int, hi: int) -> FloatArray: ...


class Relay:
    def __init__(self, src_rate: int, dst_rate: int, frame_s: float, bridge_s: float) -> None:
        if src_rate <= 0 or dst_rate <= 0 or frame_s <= 0 or bridge_s < 0:
            raise ValueError("rates and the frame must be positive, the bridge not negative")
        self.src_rate, self.dst_rate = src_rate, dst_rate
        self.frame_s = frame_s
        ahead = 0 if src_rate == dst_rate else HALF_TAPS
        # in whole source samples: every output sample then falls on the same kernel phases
        self.lag = math.ceil((2 * frame_s + bridge_s) * src_rate - 1e-6) + ahead
        g = math.gcd(src_rate, dst_rate)
        self._up, self._down = dst_rate // g, src_rate // g  # output i is at source i*down/up
        self._bank = None if ahead == 0 else _kernels(self._up, self._down)
        self._patterns: dict[tuple[int, int], tuple[NDArray[np.int64], FloatArray]] = {}
        self._k = 0

    @property
    def delay_s(self) -> float:
        """Audio at t on the speaking side's timeline is heard at t + ``delay_s``."""
        return self.lag / self.src_rate

    def frame(self, k: int, source: Segments, muted_from_s: float | None = None) -> FloatArray:
        """Frame ``k`` for the listening side (frames come in order, each once): the speaking
        side's audio, silent from ``muted_from_s`` on its timeline (a partner past its turns)."""
        if k != self._k:
            raise ValueError(f"relay frame {k} asked after frame {self._k - 1}")
        self._k += 1
        first, end = self._edge(k, self.dst_rate), self._edge(k + 1, self.dst_rate)
        muted = None if muted_from_s is None else round(muted_from_s * self.src_rate)
        if self._bank is None:
            return _span(source, first - self.lag, end - self.lag, muted)
        base = first * self._down // self._up - self.lag  # the source sample at or before it
        offsets, kernels = self._pattern(first, end)
        lo = base - HALF_TAPS + 1
        window = _span(source, lo, base + int(offsets[-1]) + HALF_TAPS + 1, muted)
        rows = sliding_window_view(window, 2 * HALF_TAPS)[offsets]
        out: FloatArray = np.einsum("ij,ij->i", rows, kernels)
        return out

    def _pattern(self, first: int, end: int) -> tuple[NDArray[np.int64], FloatArray]:
        """Output samples [first, end): where each one's source sample is from the first's, and
        its kernel (alike for every frame that starts on the same phase: cached)."""
        key = (first * self._down % self._up, end - first)
        found = self._patterns.get(key)
        if found is None:
            assert self._bank is not None
            i = np.arange(first, end)
            offsets = i * self._down // self._up - first * self._down // self._up
            found = (offsets, self._bank[i * self._down % self._up])
            self._patterns[key] = found
        return found

    def _edge(self, k: int, rate: int) -> int:
        """Where frame ``k`` starts, in samples at ``rate`` (frames of a whole number of samples
        are all alike; others differ by a sample, never drifting)."""
        return round(k * self.frame_s * rate)


def _span(source: Segments, lo: int, hi: int, muted: int | None) -> FloatArray:
    """Source samples [lo, hi): silence before the timeline's start and from ``muted`` on."""
    out = np.zeros(hi - lo, dtype=np.float32)
    a, b = max(lo, 0), hi if muted is None else min(hi, max(muted, lo))
    if b > a:
        out[a - lo : b - lo] = source.segment(a, b)
    return out


def _kernels(up: int, down: int) -> FloatArray:
    """One kernel per phase r/up between source samples: a Kaiser-windowed sinc over
    2 x ``HALF_TAPS`` source samples, cut off below the lower of the two Nyquist rates, summing to
    one (silence and steady levels pass unchanged)."""
    cutoff = 0.95 * min(1.0, up / down)  # of the source's Nyquist rate
    j = np.arange(-HALF_TAPS + 1, HALF_TAPS + 1)
    x = j[None, :] - (np.arange(up) / up)[:, None]  # each tap's distance from the instant
    window = np.i0(BETA * np.sqrt(np.clip(1 - (x / HALF_TAPS) ** 2, 0, None))) / np.i0(BETA)
    h = np.sinc(cutoff * x) * window
    bank: FloatArray = (h / h.sum(axis=1, keepdims=True)).astype(np.float32)
    return bank
