"""Compact summaries of a session's signals for drawing: a waveform's min/max per column, and how
many events fall in each time bin. Pure numpy; the page scales them to the screen."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["LEVELS", "Envelope", "EnvelopeBuilder", "density", "envelope"]

LEVELS = 127  # envelope values are integers in [-LEVELS, LEVELS]; full scale (1.0) is LEVELS


@dataclass(frozen=True)
class Envelope:
    """Min and max of each of ``len(mins)`` equal columns spanning ``duration_s``."""

    duration_s: float
    mins: list[int]
    maxs: list[int]

    def to_json(self) -> dict[str, object]:
        return {"duration": round(self.duration_s, 6), "min": self.mins, "max": self.maxs}


def envelope(samples: NDArray[np.float32], rate: int, columns: int) -> Envelope:
    """Column i covers samples [i*n//columns, (i+1)*n//columns); a column narrower than one sample
    takes the sample it starts on. Values are clipped to full scale and rounded to LEVELS steps,
    away from zero, so a quiet but non-silent column never draws as silence."""
    x = np.asarray(samples, dtype=np.float32).reshape(-1)
    n = x.size
    if n == 0 or columns <= 0:
        return Envelope(n / rate, [], [])
    columns = min(columns, n)
    starts = (np.arange(columns, dtype=np.int64) * n) // columns
    lo = np.minimum.reduceat(x, starts)
    hi = np.maximum.reduceat(x, starts)
    return Envelope(n / rate, _quantise(lo), _quantise(hi))


class EnvelopeBuilder:
    """``envelope`` of a track that is read block by block, in memory of its columns only:
    ``expected`` is the track's length in samples (from its file's header); samples past it
    count in the last column, and columns it never reaches are silence."""

    def __init__(self, expected: int, rate: int, columns: int) -> None:
        self.rate = rate
        self.columns = max(0, min(columns, expected))
        self.starts = (np.arange(self.columns, dtype=np.int64) * expected) // max(1, self.columns)
        self.lo = np.full(self.columns, np.inf)
        self.hi = np.full(self.columns, -np.inf)
        self.done = 0

    def push(self, block: NDArray[np.float32]) -> None:
        x = np.asarray(block, dtype=np.float32).reshape(-1)
        if x.size == 0 or self.columns == 0:
            self.done += x.size
            return
        index = np.arange(self.done, self.done + x.size, dtype=np.int64)
        cols = np.searchsorted(self.starts, index, side="right") - 1
        firsts = np.concatenate(([0], np.flatnonzero(np.diff(cols)) + 1))
        at = cols[firsts]
        self.lo[at] = np.minimum(self.lo[at], np.minimum.reduceat(x, firsts))
        self.hi[at] = np.maximum(self.hi[at], np.maximum.reduceat(x, firsts))
        self.done += x.size

    def finish(self) -> Envelope:
        lo = np.where(np.isfinite(self.lo), self.lo, 0.0).astype(np.float32)
        hi = np.where(np.isfinite(self.hi), self.hi, 0.0).astype(np.float32)
        return Envelope(self.done / self.rate, _quantise(lo), _quantise(hi))


def _quantise(values: NDArray[np.float32]) -> list[int]:
    scaled = np.clip(values.astype(np.float64), -1.0, 1.0) * LEVELS
    steps = np.sign(scaled) * np.ceil(np.abs(scaled) - 1e-9)
    return [int(v) for v in steps]


def density(times: Sequence[float], duration_s: float, bins: int) -> list[int]:
    """How many of ``times`` fall in each of ``bins`` equal bins over [0, duration_s); times past
    the end count in the last bin, times before 0 in the first."""
    if bins <= 0 or duration_s <= 0:
        return []
    t = np.asarray(times, dtype=np.float64)
    index = np.clip(np.floor(t / duration_s * bins), 0, bins - 1).astype(np.int64)
    return [int(c) for c in np.bincount(index, minlength=bins)]
