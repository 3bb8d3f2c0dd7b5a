"""Resampling for paired comparisons: clusters of items, the cluster bootstrap and sign-flip
permutation p-values. Pure numpy; the same inputs and seed always give the same numbers.

Samples cut from one recording are not independent, so every interval and permutation here works
on clusters (the manifest's ``source_id``): a bootstrap resample draws whole clusters with
replacement (Davison & Hinkley 1997, on hierarchical data; Field & Welsh 2007), and a
permutation flips the sign of a whole cluster's differences. Without source ids every item is
its own cluster, which is the ordinary bootstrap and the ordinary paired sign-flip test.
``docs/metrics.md`` ("Comparing runs") gives the formulas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "DEFAULT",
    "EXACT_LIMIT",
    "Clusters",
    "Resampling",
    "SignFlip",
    "bootstrap_draws",
    "cluster_robust_se",
    "percentile_interval",
    "rngs",
    "sign_flip_test",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

EXACT_LIMIT = 16  # sign flips are enumerated exactly up to 2^16 arrangements of nonzero clusters
_CHUNK = 2000  # Monte Carlo sign flips drawn per block (bounds memory at ~16 MB for 1,000 clusters)


@dataclass(frozen=True)
class Resampling:
    """How many resamples and permutations, and the seed that drives them."""

    bootstrap: int = 1000
    permutations: int = 10_000  # Monte Carlo sign flips, when exact enumeration is too big
    seed: int = 0
    exact_limit: int = EXACT_LIMIT

    def __post_init__(self) -> None:
        for name, least in (("bootstrap", 1), ("permutations", 1), ("seed", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
        if not 0 <= self.exact_limit <= 20:
            raise ValueError(f"exact_limit must be between 0 and 20, got {self.exact_limit!r}")


@dataclass(frozen=True, eq=False)
class Clusters:
    """Which cluster each of N items belongs to: ``codes[i]`` in 0..count-1."""

    codes: IntArray
    count: int
    clustered: bool  # False: every item its own cluster
    singletons: bool = False  # source ids given, but each names one item: nothing to cluster

    @classmethod
    def of(cls, ids: Sequence[str | None] | None, n: int) -> Clusters:
        """From one source id per item (None: an item of its own); ``ids=None``, no id at all, or
        ids that each name one item give the unclustered case."""
        if ids is None or all(i is None for i in ids):
            return cls(np.arange(n, dtype=np.intp), n, False)
        if len(ids) != n:
            raise ValueError(f"{len(ids)} source ids for {n} items")
        index: dict[object, int] = {}
        codes = np.empty(n, dtype=np.intp)
        for i, source in enumerate(ids):
            key: object = ("item", i) if source is None else source
            codes[i] = index.setdefault(key, len(index))
        if len(index) == n:
            return cls(codes, n, False, singletons=True)
        return cls(codes, len(index), True)

    def sizes(self) -> IntArray:
        out: IntArray = np.bincount(self.codes, minlength=self.count)
        return out

    def totals(self, values: FloatArray) -> FloatArray:
        """Sum of ``values`` within each cluster."""
        out: FloatArray = np.bincount(self.codes, weights=values, minlength=self.count).astype(
            np.float64
        )
        return out

    def subset(self, keep: NDArray[np.bool_]) -> Clusters:
        """The clusters of the items where ``keep`` is true, renumbered."""
        _, codes = np.unique(self.codes[keep], return_inverse=True)
        count = int(codes.max()) + 1 if codes.size else 0
        grouped = self.clustered or self.singletons
        return Clusters(
            codes.astype(np.intp),
            count,
            self.clustered and count < codes.size,
            singletons=grouped and count == codes.size,
        )

    def describe(self) -> str:
        if self.clustered:
            return f"clustered by source_id ({self.count} clusters)"
        if self.singletons:
            return "unclustered (each source_id holds one sample)"
        return "unclustered (no source_id)"


DEFAULT = Resampling()


def rngs(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent streams for the bootstrap and the permutations: SeedSequence(seed).spawn(2)."""
    boot, perm = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(boot), np.random.default_rng(perm)


def bootstrap_draws(clusters: Clusters, resamples: int, rng: np.random.Generator) -> IntArray:
    """(B, G): how many times each of the G clusters is drawn in each of B resamples of G
    clusters drawn uniformly with replacement. An item's weight in a resample is its cluster's
    count: ``draws[:, clusters.codes]``."""
    g = clusters.count
    picks = rng.integers(0, g, size=(resamples, g)) + (np.arange(resamples) * g)[:, None]
    out: IntArray = np.bincount(picks.ravel(), minlength=resamples * g).reshape(resamples, g)
    return out


def percentile_interval(values: FloatArray, level: float = 0.95) -> tuple[float, float]:
    """The percentile bootstrap interval (numpy's default linear interpolation)."""
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(values, (tail, 100.0 - tail))
    return float(low), float(high)


@dataclass(frozen=True)
class SignFlip:
    p_value: float
    exact: bool  # True: all 2^G arrangements enumerated; False: seeded Monte Carlo
    arrangements: int  # 2^G enumerated, or the Monte Carlo draws

    def describe(self) -> str:
        if self.exact:
            return f"exact sign-flip ({self.arrangements} arrangements)"
        return f"Monte Carlo sign-flip ({self.arrangements} draws)"


def sign_flip_test(
    totals: FloatArray, rng: np.random.Generator, options: Resampling = DEFAULT
) -> SignFlip:
    """Two-sided paired permutation test of "A and B are exchangeable within each cluster".

    ``totals`` are the clusters' summed differences D_c; the statistic is |sum_c s_c D_c| over
    sign vectors s. Clusters with D_c = 0 do not change the statistic, so they are left out
    (the p-value is the same). With G' nonzero clusters, 2^G' <= 2^exact_limit: every arrangement
    is enumerated and p = #{|T*| >= |T|} / 2^G' (the identity is one of them, so p > 0).
    Otherwise ``options.permutations`` seeded random sign vectors and p = (count + 1) / (M + 1)
    (Phipson & Smyth 2010: never 0, and a valid p-value)."""
    d = np.asarray(totals, dtype=np.float64)
    d = d[d != 0.0]
    if d.size == 0:
        return SignFlip(1.0, True, 1)
    observed = abs(float(d.sum()))
    tol = 1e-9 * float(np.abs(d).sum())  # float sums in another order must still tie
    if d.size <= options.exact_limit:
        g = d.size
        bits = (np.arange(2**g, dtype=np.int64)[:, None] >> np.arange(g)) & 1
        stats = np.abs(((2 * bits - 1) * d).sum(axis=1))
        count = int(np.count_nonzero(stats >= observed - tol))
        return SignFlip(count / 2**g, True, 2**g)
    count = 0
    left = options.permutations
    while left > 0:
        block = min(left, _CHUNK)
        signs = 2 * rng.integers(0, 2, size=(block, d.size), dtype=np.int8) - 1
        count += int(np.count_nonzero(np.abs((signs * d).sum(axis=1)) >= observed - tol))
        left -= block
    return SignFlip((count + 1) / (options.permutations + 1), False, options.permutations)


def cluster_robust_se(values: FloatArray, clusters: Clusters) -> float:
    """Standard error of the mean of ``values`` with the cluster-robust (CR1) variance:
    sqrt(G / (G - 1) * sum_c (T_c - m_c * mean)^2) / N (Liang & Zeger 1986; Cameron & Miller
    2015). Unclustered it is sd(values, ddof=1) / sqrt(N). NaN for fewer than two clusters."""
    n = values.size
    g = clusters.count
    if g < 2:
        return math.nan
    mean = float(values.mean())
    resid = clusters.totals(values) - clusters.sizes() * mean
    return math.sqrt(g / (g - 1) * float(np.sum(resid * resid))) / n
