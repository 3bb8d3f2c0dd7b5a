"""Many comparisons at once: Holm's adjustment of p-values and rank bands.

Ten runs make 45 pairwise questions; at alpha = 0.05 each, some "differences" are noise. Holm's
step-down adjustment (Holm 1979) controls the chance of any false claim among them, and is never
less powerful than Bonferroni. Rank bands then say which runs the data cannot tell apart, as
Chatbot Arena's confidence-interval ranks do (Chiang et al. 2024, arXiv 2403.04132).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

__all__ = ["holm", "rank_bands"]


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given: with the m finite p-values sorted ascending,
    p_adj(j) = max over i <= j of min(1, (m - i + 1) * p(i)). A NaN (no test) stays NaN and does
    not count in m. Reject at level alpha where p_adj <= alpha."""
    finite = [(p, k) for k, p in enumerate(p_values) if not math.isnan(p)]
    for p, _ in finite:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-value {p!r} is not between 0 and 1")
    finite.sort()
    m = len(finite)
    out = [math.nan] * len(p_values)
    running = 0.0
    for i, (p, k) in enumerate(finite):
        running = max(running, min(1.0, (m - i) * p))
        out[k] = running
    return out


def rank_bands(order: Sequence[str], separable: Callable[[str, str], bool]) -> dict[str, int]:
    """Band of each run, ``order`` best first; ``separable(better, worse)`` says the data tell the
    two apart (their adjusted p is below alpha).

    Band 1 is the best run, every run it cannot be separated from, and every run ranked above
    one of those (so bands never contradict the order); the rest are banded the same way,
    headed by the best run left."""
    bands: dict[str, int] = {}
    left = list(order)
    band = 0
    while left:
        band += 1
        head = left[0]
        last = max(k for k, run in enumerate(left) if k == 0 or not separable(head, run))
        for run in left[: last + 1]:
            bands[run] = band
        left = left[last + 1 :]
    return bands
