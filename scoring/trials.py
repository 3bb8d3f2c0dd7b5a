"""Repeated trials of one sample: per-item means, within-item variance and test-retest agreement.

A hosted model answers the same audio differently each time. Running every item K times and
averaging per item removes part of that noise from a comparison: the variance of an item's mean
is Var(mu_i) + sigma_i^2 / K, where sigma_i^2 is the within-item variance (Miller 2024,
arXiv 2411.00640, on reducing variance by resampling answers). The figures here say how
much a rerun moves a run: the within-item variance, how often the top emotion agrees between
trials (Cohen's kappa), and how much the match rate moves from one trial to the next.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.scoring.items import MISSING, NO_REPLY

__all__ = [
    "TrialAgreement",
    "cohens_kappa",
    "item_means",
    "mean_pairwise_kappa",
    "trial_agreement",
    "within_item_variance",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]


@dataclass(frozen=True)
class TrialAgreement:
    trials: int  # K, the most trials any item has
    items: int  # items with two or more counted trials (the ones agreement is measured on)
    within_variance: dict[str, float]  # per figure: mean over items of the variance across trials
    kappa: float  # top emotion, mean pairwise Cohen's kappa between trials (NaN: undefined)
    trial_rates: tuple[float, ...]  # match rate of trial 1, 2, ... over the items it counted
    rate_sd: float  # their standard deviation (ddof 1; NaN with one trial)

    @property
    def rate_range(self) -> tuple[float, float]:
        rates = [r for r in self.trial_rates if not math.isnan(r)]
        return (min(rates), max(rates)) if rates else (math.nan, math.nan)

    def to_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return None if math.isnan(x) else float(x)

        return {
            "trials": self.trials,
            "items": self.items,
            "within_variance": {k: num(v) for k, v in self.within_variance.items()},
            "kappa": num(self.kappa),
            "trial_rates": [num(r) for r in self.trial_rates],
            "rate_sd": num(self.rate_sd),
        }


def cohens_kappa(x: IntArray, y: IntArray, categories: int = NO_REPLY + 1) -> float:
    """Cohen's kappa (Cohen 1960) of two label vectors: (p_o - p_e) / (1 - p_e), p_o the share
    of agreeing items and p_e = sum_c p_x(c) p_y(c) the agreement expected from the margins.
    NaN where p_e = 1 (both always give one same label: agreement beyond chance is undefined)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"kappa needs two label vectors of one length, got {x.shape}, {y.shape}")
    if x.size == 0:
        return math.nan
    p_o = float(np.mean(x == y))
    p_x = np.bincount(x, minlength=categories) / x.size
    p_y = np.bincount(y, minlength=categories) / y.size
    p_e = float(np.sum(p_x * p_y))
    if p_e >= 1.0 - 1e-12:
        return math.nan
    return (p_o - p_e) / (1.0 - p_e)


def mean_pairwise_kappa(tops: NDArray[np.integer[Any]]) -> float:
    """Light's kappa (Light 1971): the mean of Cohen's kappa over every pair of trials, each on
    the items both counted. ``tops``: (N, K), NO_REPLY for no reply, MISSING for no trial."""
    t = np.asarray(tops)
    kappas = []
    for j, k in itertools.combinations(range(t.shape[1]), 2):
        both = (t[:, j] != MISSING) & (t[:, k] != MISSING)
        kappa = cohens_kappa(t[both, j], t[both, k])
        if not math.isnan(kappa):
            kappas.append(kappa)
    return float(np.mean(kappas)) if kappas else math.nan


def item_means(values: FloatArray) -> FloatArray:
    """(N,) mean over each item's counted trials (NaN marks a missing trial; an item with none
    is NaN)."""
    v = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
    counts = np.sum(~np.isnan(v), axis=1)
    sums = np.nansum(v, axis=1)
    out: FloatArray = np.divide(sums, counts, out=np.full(counts.shape, np.nan), where=counts > 0)
    return out


def within_item_variance(values: FloatArray) -> float:
    """Mean over items with two or more counted trials of the sample variance (ddof 1) across
    their trials: the pooled estimate of E[sigma_i^2] for items with equal trial counts."""
    v = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
    counted = np.sum(~np.isnan(v), axis=1)
    rows = v[counted >= 2]
    if rows.shape[0] == 0:
        return math.nan
    return float(np.mean(np.nanvar(rows, axis=1, ddof=1)))


def trial_agreement(
    refs: IntArray, tops: NDArray[np.integer[Any]], scores: dict[str, FloatArray]
) -> TrialAgreement:
    """The test-retest figures of one run: ``tops`` (N, K) as for ``mean_pairwise_kappa``;
    ``scores`` per-item per-trial values by name (e.g. cosine, target), NaN where missing."""
    t = np.asarray(tops).reshape(len(tops), -1)
    present = t != MISSING
    match = np.where(present, (t == np.asarray(refs)[:, None]).astype(np.float64), np.nan)
    rates = tuple(
        float(np.mean(match[present[:, k], k])) if present[:, k].any() else math.nan
        for k in range(t.shape[1])
    )
    finite = [r for r in rates if not math.isnan(r)]
    variances = {"match": within_item_variance(match)}
    variances |= {name: within_item_variance(v) for name, v in scores.items()}
    return TrialAgreement(
        trials=t.shape[1],
        items=int(np.count_nonzero(present.sum(axis=1) >= 2)),
        within_variance=variances,
        kappa=mean_pairwise_kappa(t),
        trial_rates=rates,
        rate_sd=float(np.std(finite, ddof=1)) if len(finite) > 1 else math.nan,
    )
