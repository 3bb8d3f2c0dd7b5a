"""Repeated trials (scoring/trials.py): kappa, within-item variance, per-trial rates, and the
variance a comparison saves by averaging trials."""

from __future__ import annotations

import math

import numpy as np
import pytest

from duplexsim.scoring.paired import MISSING, NO_REPLY, compare_match, top_shares
from duplexsim.scoring.resample import Clusters, Resampling
from duplexsim.scoring.trials import (
    cohens_kappa,
    item_means,
    mean_pairwise_kappa,
    trial_agreement,
    within_item_variance,
)


def test_cohens_kappa_textbook() -> None:
    # Cohen's kappa's standard worked example: 50 items, yes/yes 20, yes/no 5, no/yes 10,
    # no/no 15: p_o = 0.7, p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5, kappa = 0.4
    x = np.array([1] * 25 + [0] * 25)
    y = np.array([1] * 20 + [0] * 5 + [1] * 10 + [0] * 15)
    assert cohens_kappa(x, y) == pytest.approx(0.4)
    assert cohens_kappa(x, x) == pytest.approx(1.0)
    assert math.isnan(cohens_kappa(np.zeros(5, int), np.zeros(5, int)))  # p_e = 1


def test_kappa_against_a_second_implementation() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, NO_REPLY + 1, 300)
    y = np.where(rng.random(300) < 0.6, x, rng.integers(0, NO_REPLY + 1, 300))
    table = np.zeros((13, 13))
    for i, j in zip(x, y, strict=True):
        table[i, j] += 1
    table /= table.sum()
    p_o = np.trace(table)
    p_e = table.sum(axis=1) @ table.sum(axis=0)
    assert cohens_kappa(x, y) == pytest.approx((p_o - p_e) / (1 - p_e))


def test_lights_kappa_is_the_mean_over_pairs() -> None:
    tops = np.array([[0, 0, 1], [1, 1, 1], [2, 3, 2], [4, 4, MISSING], [5, 6, 5], [0, 1, 0]])
    pairs = [(0, 1), (0, 2), (1, 2)]
    expected = []
    for j, k in pairs:
        both = (tops[:, j] != MISSING) & (tops[:, k] != MISSING)
        expected.append(cohens_kappa(tops[both, j], tops[both, k]))
    assert mean_pairwise_kappa(tops) == pytest.approx(np.mean(expected))


def test_item_means_and_within_variance() -> None:
    values = np.array([[1.0, 0.0, 1.0], [0.5, 0.5, np.nan], [np.nan] * 3, [0.2, np.nan, np.nan]])
    means = item_means(values)
    assert means[0] == pytest.approx(2 / 3) and means[1] == 0.5 and means[3] == 0.2
    assert math.isnan(means[2])
    # items with two or more trials: var(1, 0, 1) = 1/3, var(.5, .5) = 0
    assert within_item_variance(values) == pytest.approx((1 / 3 + 0) / 2)
    assert math.isnan(within_item_variance(np.array([[1.0], [0.0]])))


def test_trial_agreement_by_hand() -> None:
    refs = np.array([0, 1, 2, 3])
    tops = np.array([[0, 0], [1, 2], [NO_REPLY, 2], [3, MISSING]])
    cosine = np.array([[0.9, 0.7], [0.5, 0.5], [0.0, 0.4], [0.8, np.nan]])
    out = trial_agreement(refs, tops, {"cosine": cosine})
    assert out.trials == 2 and out.items == 3
    assert out.trial_rates == pytest.approx((3 / 4, 2 / 3))
    assert out.rate_sd == pytest.approx(np.std([3 / 4, 2 / 3], ddof=1))
    assert out.rate_range == pytest.approx((2 / 3, 3 / 4))
    # match per trial: item 0 (1, 1), item 1 (1, 0), item 2 (0, 1): variances 0, .5, .5
    assert out.within_variance["match"] == pytest.approx(1 / 3)
    assert out.within_variance["cosine"] == pytest.approx((0.02 + 0 + 0.08) / 3)
    assert out.kappa == pytest.approx(cohens_kappa(np.array([0, 1, NO_REPLY]), np.array([0, 2, 2])))
    assert out.to_dict()["trials"] == 2


def test_averaging_trials_narrows_the_comparison() -> None:
    """Miller's variance reduction: with K trials per item the paired difference's standard error
    falls towards the between-item part alone, sqrt((var_between + var_within / K) / n)."""
    rng = np.random.default_rng(9)
    n, k = 400, 8
    refs = np.zeros(n, dtype=np.intp)
    skill_a = rng.uniform(0.1, 0.7, n)  # each item's chance that A matches
    skill_b = np.clip(skill_a - 0.05, 0, 1)

    def trials(p: np.ndarray, count: int) -> np.ndarray:
        return np.where(rng.random((n, count)) < p[:, None], 0, 1)

    se = {}
    for count in (1, k):
        out = compare_match(
            refs,
            top_shares(trials(skill_a, count)),
            top_shares(trials(skill_b, count)),
            Clusters.of(None, n),
            Resampling(bootstrap=200),
        )
        se[count] = out.difference.se / 100
    within = np.mean(skill_a * (1 - skill_a) + skill_b * (1 - skill_b))
    between = np.var(skill_a - skill_b)
    assert se[k] < 0.6 * se[1]
    assert se[k] == pytest.approx(math.sqrt((between + within / k) / n), rel=0.15)
    assert se[1] == pytest.approx(math.sqrt((between + within) / n), rel=0.15)
