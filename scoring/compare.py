"""Compare every pair of runs on one benchmark: paired differences, Holm-adjusted p-values and
rank bands. The per-figure statistics are in ``scoring.paired``; this module aligns two runs on
the items both have in N, runs each comparison, adjusts each figure's p-values for the number of
pairs and bands the runs by match rate.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.scoring.paired import (
    Difference,
    MatchComparison,
    compare_match,
    compare_means,
    compare_medians,
    top_shares,
)
from duplexsim.scoring.ranking import holm, rank_bands
from duplexsim.scoring.resample import DEFAULT, Clusters, Resampling
from duplexsim.scoring.trials import item_means

__all__ = ["Comparisons", "PairComparison", "RunItems", "compare_pair", "compare_runs"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]
FIGURES = ("match", "cosine", "target", "latency")


@dataclass(frozen=True, eq=False)
class RunItems:
    """One run's per-item figures on the items in its N, one column per trial: ``tops`` the top
    emotion (NO_REPLY, or MISSING for a trial that did not count), cosine and target (NaN where
    missing), latency in seconds (NaN where not precise)."""

    name: str
    ids: tuple[str, ...]
    refs: IntArray
    tops: IntArray  # (N, K)
    cosine: FloatArray  # (N, K)
    target: FloatArray  # (N, K)
    latency: FloatArray  # (N, K)
    sources: tuple[str | None, ...]  # the manifest's source_id per item (None: none)

    def __post_init__(self) -> None:
        n = len(self.ids)
        if len(set(self.ids)) != n:
            raise ValueError(f"run {self.name!r}: a sample id appears more than once")
        shapes = {np.shape(x)[:1] for x in (self.refs, self.tops, self.cosine, self.target)}
        if shapes != {(n,)} or np.shape(self.latency)[:1] != (n,) or len(self.sources) != n:
            raise ValueError(f"run {self.name!r}: every per-item array needs {n} rows")

    @property
    def trials(self) -> int:
        return int(np.shape(self.tops)[1]) if np.ndim(self.tops) == 2 else 1

    @property
    def match_rate(self) -> float:
        shares = top_shares(self.tops)
        return float(shares[np.arange(len(self.ids)), self.refs].mean()) if self.ids else math.nan


@dataclass(frozen=True)
class PairComparison:
    a: str
    b: str
    n: int
    clusters: str
    trials: tuple[int, int]
    match: MatchComparison
    cosine: Difference
    target: Difference
    latency: Difference  # ms
    adjusted: dict[str, float] = field(default_factory=dict)  # Holm, by figure

    def difference(self, figure: str) -> Difference:
        found: Difference = self.match.difference if figure == "match" else getattr(self, figure)
        return found

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "n": self.n,
            "clusters": self.clusters,
            "trials": list(self.trials),
            "match": self.match.to_dict(),
            "cosine": self.cosine.to_dict(),
            "target": self.target.to_dict(),
            "latency_ms": self.latency.to_dict(),
            "p_holm": {k: None if math.isnan(v) else v for k, v in self.adjusted.items()},
        }


@dataclass(frozen=True)
class Comparisons:
    pairs: list[PairComparison]
    bands: dict[str, int]  # by match rate; runs the data cannot separate share a band
    alpha: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "adjustment": "holm",
            "bands": self.bands,
            "pairs": [p.to_dict() for p in self.pairs],
        }


def _align(a: RunItems, b: RunItems) -> tuple[IntArray, IntArray]:
    where_b = {sid: k for k, sid in enumerate(b.ids)}
    common = sorted(sid for sid in a.ids if sid in where_b)
    where_a = {sid: k for k, sid in enumerate(a.ids)}
    ia = np.array([where_a[s] for s in common], dtype=np.intp)
    ib = np.array([where_b[s] for s in common], dtype=np.intp)
    differ = np.flatnonzero(a.refs[ia] != b.refs[ib])
    if differ.size:
        raise ValueError(
            f"runs {a.name!r} and {b.name!r} disagree on the reference emotion of sample "
            f"{common[differ[0]]!r}: they are not runs of one benchmark"
        )
    return ia, ib


def compare_pair(a: RunItems, b: RunItems, options: Resampling = DEFAULT) -> PairComparison:
    """A against B on the items in N for both (per-item means where a run has several trials),
    clustered by source_id where the manifest gives one."""
    ia, ib = _align(a, b)
    if ia.size == 0:
        raise ValueError(f"runs {a.name!r} and {b.name!r} have no sample in N in common")
    sources = [
        a.sources[i] if a.sources[i] is not None else b.sources[j]
        for i, j in zip(ia, ib, strict=True)
    ]
    clusters = Clusters.of(sources, ia.size)
    match = compare_match(
        a.refs[ia], top_shares(a.tops[ia]), top_shares(b.tops[ib]), clusters, options
    )

    def means(run: RunItems, rows: IntArray, name: str) -> FloatArray:
        return item_means(np.asarray(getattr(run, name), dtype=np.float64)[rows])

    figures = {
        name: compare_means(name, means(a, ia, name), means(b, ib, name), clusters, options)
        for name in ("cosine", "target")
    }
    latency = compare_medians(
        "latency_ms",
        1000.0 * means(a, ia, "latency"),
        1000.0 * means(b, ib, "latency"),
        clusters,
        options,
    )
    return PairComparison(
        a.name,
        b.name,
        int(ia.size),
        clusters.describe(),
        (a.trials, b.trials),
        match,
        figures["cosine"],
        figures["target"],
        latency,
    )


def compare_runs(
    runs: Sequence[RunItems], options: Resampling = DEFAULT, alpha: float = 0.05
) -> Comparisons:
    """Every pair, best-ranked run first in each pair; p-values Holm-adjusted per figure over the
    pairs; bands by match rate at ``alpha`` on the adjusted match p-values."""
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise ValueError("runs to compare need distinct names")
    ordered = sorted(runs, key=lambda r: -r.match_rate if not math.isnan(r.match_rate) else 1.0)
    pairs = [compare_pair(a, b, options) for a, b in itertools.combinations(ordered, 2)]
    adjusted = {f: holm([p.difference(f).p_value for p in pairs]) for f in FIGURES}
    pairs = [
        PairComparison(**{**p.__dict__, "adjusted": {f: adjusted[f][k] for f in FIGURES}})
        for k, p in enumerate(pairs)
    ]
    by_pair = {(p.a, p.b): p for p in pairs}

    def separable(better: str, worse: str) -> bool:
        pair = by_pair[(better, worse)]
        return pair.adjusted["match"] <= alpha and pair.match.difference.estimate > 0

    bands = rank_bands([r.name for r in ordered], separable)
    return Comparisons(pairs, bands, alpha)
