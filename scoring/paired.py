"""Paired comparisons of two runs on the same items: match rate, lift, cosine, target, latency.

Two runs scored on the same benchmark share its items, and most of the spread of a match rate
comes from which items are hard, not from the model: the paired difference cancels it (Miller
2024, "Adding Error Bars to Evals", arXiv 2411.00640, on paired differences). Every figure here
is A minus B on the items both runs have, with a cluster bootstrap interval and, where a test
exists, a two-sided p-value; ``docs/metrics.md`` ("Comparing runs") gives each formula and its
source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.scoring.items import MISSING, NO_REPLY
from duplexsim.scoring.resample import (
    DEFAULT,
    Clusters,
    Resampling,
    bootstrap_draws,
    cluster_robust_se,
    percentile_interval,
    rngs,
    sign_flip_test,
)

__all__ = [
    "MISSING",
    "NO_REPLY",
    "Difference",
    "MatchComparison",
    "compare_match",
    "compare_means",
    "compare_medians",
    "mcnemar_exact",
    "top_shares",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

N_EMOTIONS = 12


@dataclass(frozen=True)
class Difference:
    """A minus B on one figure: the estimate, its 95 % interval, and a p-value (NaN: none)."""

    metric: str
    n: int  # items compared
    estimate: float
    low: float
    high: float
    p_value: float
    test: str  # how p was found, e.g. "McNemar exact", "exact sign-flip (64 arrangements)"
    se: float = math.nan  # cluster-robust standard error, where the figure is a mean

    def to_dict(self) -> dict[str, Any]:
        return {k: _json(v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class MatchComparison:
    """Match rate of A against B. ``b``: items A matched and B did not, ``c``: the reverse
    (McNemar's discordant pairs; None where an item's mean over its trials is neither 0 nor 1)."""

    n: int
    clusters: str
    rate_a: float
    rate_b: float
    difference: Difference  # percentage points
    lift_a: float  # percentage points over each run's own exact shuffled expectation
    lift_b: float
    lift: Difference  # lift_a - lift_b; interval only
    b: int | None
    c: int | None
    mcnemar_p: float | None

    def to_dict(self) -> dict[str, Any]:
        out = {k: _json(v) for k, v in self.__dict__.items()}
        return out | {"difference": self.difference.to_dict(), "lift": self.lift.to_dict()}


def _json(x: Any) -> Any:
    return None if isinstance(x, float) and math.isnan(x) else x


# ---------------------------------------------------------------- per-item inputs


def top_shares(tops: NDArray[np.integer[Any]]) -> FloatArray:
    """(N, 13): the share of an item's trials whose top emotion was each of the 12 (column 12:
    no reply). ``tops`` is (N,) for one trial or (N, K), each entry an emotion index, NO_REPLY,
    or MISSING for a trial that did not count. An item with no counted trial is all zeros."""
    t = np.asarray(tops).reshape(len(tops), -1)
    if np.any((t < MISSING) | (t > NO_REPLY)):
        raise ValueError("top emotions must be indices 0..12 or -1 (missing)")
    counts = np.zeros((t.shape[0], N_EMOTIONS + 1))
    for k in range(t.shape[1]):
        present = t[:, k] != MISSING
        counts[np.flatnonzero(present), t[present, k]] += 1.0
    totals = counts.sum(axis=1, keepdims=True)
    out: FloatArray = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
    return out


def mcnemar_exact(b: int, c: int) -> float:
    """McNemar's exact test (two-sided): under H0 the b + c discordant pairs split as a fair
    coin, p = min(1, 2 * P(Binomial(b + c, 1/2) <= min(b, c))) (McNemar 1947; the exact form in
    Fagerland, Lydersen & Laake 2013). Integer arithmetic, so exact to the float's rounding."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, float(2 * tail / 2**n))


# ---------------------------------------------------------------- resampled statistics


def _mean_interval(d: FloatArray, clusters: Clusters, draws: IntArray) -> tuple[float, float]:
    """Cluster bootstrap of the mean: each resample's sum of drawn clusters' totals over their
    sizes (a ratio: clusters differ in size)."""
    totals = (draws * clusters.totals(d)).sum(axis=1)
    sizes = (draws * clusters.sizes()).sum(axis=1)
    return percentile_interval(totals / sizes)


def _lifts(refs: IntArray, shares: FloatArray, weights: IntArray) -> FloatArray:
    """Lift in pp for each row of item weights: 100 * (matches / W - sum_e top(e) ref(e) / W^2),
    W the total weight, top(e) and ref(e) the weighted counts (non-replies in no top(e))."""
    w = weights.astype(np.float64)
    total = w.sum(axis=1)
    rows = np.arange(refs.size)
    matches = np.einsum("bn,n->b", w, shares[rows, refs])
    top = np.einsum("bn,ne->be", w, shares[:, :N_EMOTIONS])
    ref = np.einsum("bn,ne->be", w, np.eye(N_EMOTIONS)[refs])
    out: FloatArray = 100.0 * (matches / total - (top * ref).sum(axis=1) / total**2)
    return out


def _weighted_medians(d: FloatArray, weights: IntArray) -> FloatArray:
    """For each row of integer item weights, the median of the multiset where item i appears
    weights[i] times (numpy's median of that multiset: the mean of the two middle values)."""
    order = np.argsort(d, kind="stable")
    values = d[order]
    cum = np.cumsum(weights[:, order], axis=1)
    total = cum[:, -1]
    low = np.argmax(cum > ((total - 1) // 2)[:, None], axis=1)
    high = np.argmax(cum > (total // 2)[:, None], axis=1)
    out: FloatArray = (values[low] + values[high]) / 2.0
    return out


def _check_pair(a: FloatArray, b: FloatArray, clusters: Clusters) -> None:
    if a.shape != b.shape or a.ndim != 1 or a.size != clusters.codes.size:
        raise ValueError(
            f"paired values must be two 1-d arrays of one length per item: got {a.shape}, "
            f"{b.shape} for {clusters.codes.size} items"
        )


# ---------------------------------------------------------------- comparisons


def compare_match(
    refs: IntArray,
    shares_a: FloatArray,
    shares_b: FloatArray,
    clusters: Clusters,
    options: Resampling = DEFAULT,
) -> MatchComparison:
    """Match rate and lift of A against B on the same N items (``top_shares`` of each).

    The p-value is McNemar's exact test where every item's match is 0 or 1 (one trial, or trials
    that all agree) and there are no clusters; otherwise the sign-flip test on per-cluster sums
    of the per-item match difference (on 0/1 matches without clusters the two are the same
    test)."""
    n = refs.size
    if n == 0 or shares_a.shape != (n, N_EMOTIONS + 1) or shares_b.shape != shares_a.shape:
        raise ValueError(f"need (N, 13) top shares for N = {n} > 0 items in both runs")
    rows = np.arange(n)
    match_a, match_b = shares_a[rows, refs], shares_b[rows, refs]
    d = match_a - match_b
    boot_rng, perm_rng = rngs(options.seed)
    draws = bootstrap_draws(clusters, options.bootstrap, boot_rng)
    weights = draws[:, clusters.codes]
    binary = bool(np.all(np.isin(shares_a, (0.0, 1.0))) and np.all(np.isin(shares_b, (0.0, 1.0))))
    b = int(np.count_nonzero(d > 0)) if binary else None
    c = int(np.count_nonzero(d < 0)) if binary else None
    mcnemar = mcnemar_exact(b, c) if b is not None and c is not None else None
    if mcnemar is not None and not clusters.clustered:
        p, test = mcnemar, "McNemar exact"
    else:
        flip = sign_flip_test(clusters.totals(d), perm_rng, options)
        p, test = flip.p_value, f"{'cluster ' if clusters.clustered else ''}{flip.describe()}"
    low, high = _mean_interval(d, clusters, draws)
    ones = np.ones((1, n), dtype=np.intp)
    lift_a, lift_b = (float(_lifts(refs, s, ones)[0]) for s in (shares_a, shares_b))
    lift_low, lift_high = percentile_interval(
        _lifts(refs, shares_a, weights) - _lifts(refs, shares_b, weights)
    )
    return MatchComparison(
        n=n,
        clusters=clusters.describe(),
        rate_a=float(match_a.mean()),
        rate_b=float(match_b.mean()),
        difference=Difference(
            "match_pp",
            n,
            100.0 * float(d.mean()),
            100.0 * low,
            100.0 * high,
            p,
            test,
            100.0 * cluster_robust_se(d, clusters),
        ),
        lift_a=lift_a,
        lift_b=lift_b,
        lift=Difference("lift_pp", n, lift_a - lift_b, lift_low, lift_high, math.nan, "none"),
        b=b,
        c=c,
        mcnemar_p=mcnemar,
    )


def compare_means(
    metric: str,
    a: FloatArray,
    b: FloatArray,
    clusters: Clusters,
    options: Resampling = DEFAULT,
) -> Difference:
    """Mean of the per-item differences a_i - b_i (cosine, target: per-item means over trials),
    with a cluster bootstrap interval and the sign-flip test on per-cluster sums."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    _check_pair(a, b, clusters)
    if a.size == 0 or not np.all(np.isfinite(a) & np.isfinite(b)):
        raise ValueError(f"{metric}: need at least one item and finite values for every item")
    d = a - b
    boot_rng, perm_rng = rngs(options.seed)
    draws = bootstrap_draws(clusters, options.bootstrap, boot_rng)
    low, high = _mean_interval(d, clusters, draws)
    flip = sign_flip_test(clusters.totals(d), perm_rng, options)
    test = f"{'cluster ' if clusters.clustered else ''}{flip.describe()}"
    se = cluster_robust_se(d, clusters)
    return Difference(metric, d.size, float(d.mean()), low, high, flip.p_value, test, se)


def compare_medians(
    metric: str,
    a: FloatArray,
    b: FloatArray,
    clusters: Clusters,
    options: Resampling = DEFAULT,
) -> Difference:
    """Median of the per-item differences a_i - b_i over the items where both are finite (NaN:
    no precise value, e.g. latency of a session whose timing was invalid), with a cluster
    bootstrap interval and a sign test (the sign-flip test on per-cluster sums of sign(d_i);
    unclustered, exactly the two-sided binomial sign test with zero differences dropped)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    _check_pair(a, b, clusters)
    keep = np.isfinite(a) & np.isfinite(b)
    n = int(np.count_nonzero(keep))
    if n == 0:
        return Difference(metric, 0, math.nan, math.nan, math.nan, math.nan, "none")
    d = (a - b)[keep]
    sub = clusters.subset(keep)
    boot_rng, perm_rng = rngs(options.seed)
    draws = bootstrap_draws(sub, options.bootstrap, boot_rng)
    low, high = percentile_interval(_weighted_medians(d, draws[:, sub.codes]))
    if sub.clustered:
        flip = sign_flip_test(sub.totals(np.sign(d)), perm_rng, options)
        p, test = flip.p_value, f"cluster sign test, {flip.describe()}"
    else:
        p = mcnemar_exact(int(np.count_nonzero(d > 0)), int(np.count_nonzero(d < 0)))
        test = "sign test (exact binomial)"
    return Difference(metric, n, float(np.median(d)), low, high, p, test)
