"""Holm's adjustment and rank bands (scoring/ranking.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from duplexsim.scoring.ranking import holm, rank_bands


def holm_rejections(p: list[float], alpha: float) -> set[int]:
    """Holm (1979) as he stated it: step down through the sorted p-values, rejecting while
    p(i) <= alpha / (m - i + 1), and stop at the first that is not."""
    order = sorted(range(len(p)), key=lambda k: p[k])
    rejected: set[int] = set()
    for i, k in enumerate(order):
        if p[k] > alpha / (len(p) - i):
            break
        rejected.add(k)
    return rejected


def test_holm_known_set() -> None:
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4 * 0.005, 3 * 0.01, 2 * 0.03, max(1 * 0.04, 0.06)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == [1.0, 1.0]
    assert holm([]) == []
    assert holm([0.02]) == [0.02]


def test_holm_matches_the_step_down_procedure() -> None:
    rng = np.random.default_rng(11)
    for _ in range(300):
        p = list(rng.random(int(rng.integers(1, 12))) ** 3)
        adjusted = holm(p)
        for alpha in (0.01, 0.05, 0.1):
            assert {k for k, q in enumerate(adjusted) if q <= alpha} == holm_rejections(p, alpha)


def test_holm_leaves_nan_out() -> None:
    out = holm([0.01, math.nan, 0.04])
    assert out[0] == pytest.approx(0.02) and math.isnan(out[1]) and out[2] == pytest.approx(0.04)
    with pytest.raises(ValueError):
        holm([1.5])


def bands_of(order: str, separable_pairs: set[str]) -> dict[str, int]:
    return rank_bands(list(order), lambda a, b: a + b in separable_pairs)


def test_rank_bands() -> None:
    # nothing separable: one band
    assert bands_of("ABC", set()) == {"A": 1, "B": 1, "C": 1}
    # everything separable: a band each
    assert bands_of("ABC", {"AB", "AC", "BC"}) == {"A": 1, "B": 2, "C": 3}
    # A ties B; C is separable from A; C heads band 2 with D, which C cannot separate
    assert bands_of("ABCD", {"AC", "AD", "BD"}) == {"A": 1, "B": 1, "C": 2, "D": 2}
    # A cannot separate C although it separates B: B, ranked above C, shares band 1
    assert bands_of("ABCD", {"AB", "AD", "BD", "CD"}) == {"A": 1, "B": 1, "C": 1, "D": 2}
    assert rank_bands([], lambda a, b: True) == {}
