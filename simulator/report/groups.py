"""Runs that can be compared: one group per (benchmark, scorer identity), ranked within it.

A match rate means something only beside others measured on the same benchmark with the same
scorer (weights, precision and code); runs from different groups are never ranked together.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from duplexsim.core.provenance import BenchmarkId, ScorerIdentity
from duplexsim.report.compare import bands, group_comparisons
from duplexsim.report.data import NO_SCORER, RunReport
from duplexsim.scoring.compare import Comparisons

__all__ = ["LEGEND", "Group", "group_reports", "ranked", "separate_note"]

LEGEND = (
    "cosine: mean cosine similarity between the reply's and the reference's 12 emotion scores; "
    "target: mean score the reply gets on the reference's emotion; ref: mean score the "
    "reference gets on its own emotion (what target would reach if the reply sounded like the "
    "reference). A reply that never came counts 0 in cosine and target."
)


@dataclass(frozen=True)
class Group:
    benchmark: BenchmarkId
    identity: ScorerIdentity
    reports: list[RunReport]  # ranked, best first

    @property
    def comparable(self) -> bool:
        return all(r.comparable for r in self.reports)

    @functools.cached_property
    def comparisons(self) -> Comparisons | None:
        """Every pair of its runs compared (None: timing only, or fewer than two scored)."""
        if self.identity.name == NO_SCORER:
            return None
        return group_comparisons(self.reports)

    @functools.cached_property
    def bands(self) -> dict[str, int]:
        """Rank band by run id (runs with nothing in N have none)."""
        return {} if self.identity.name == NO_SCORER else bands(self.reports, self.comparisons)

    @property
    def title(self) -> str:
        if self.identity.name == NO_SCORER:
            return f"benchmark {self.benchmark.label} · timing only: nothing scored"
        return f"benchmark {self.benchmark.label} · scorer {self.identity.label()}"


def ranked(reports: Sequence[RunReport]) -> list[RunReport]:
    def key(r: RunReport) -> float:
        m = r.metrics.match_rate
        return -1.0 if math.isnan(m) else m

    return sorted(reports, key=key, reverse=True)


_last: tuple[tuple[RunReport, ...], list[Group]] | None = None


def group_reports(reports: Sequence[RunReport]) -> list[Group]:
    """Groups in the order their first run was given; runs ranked within each. The same reports
    give the same groups (the terminal and every file of one report share their comparisons,
    computed once)."""
    global _last
    same = _last is not None and len(_last[0]) == len(reports)
    if _last is not None and same and all(a is b for a, b in zip(_last[0], reports, strict=True)):
        return _last[1]
    groups = _group(reports)
    _last = (tuple(reports), groups)
    return groups


def _group(reports: Sequence[RunReport]) -> list[Group]:
    found: dict[tuple[str, ScorerIdentity], list[RunReport]] = {}
    for r in reports:
        found.setdefault(r.group, []).append(r)
    return [Group(rs[0].benchmark, rs[0].identity, ranked(rs)) for rs in found.values()]


def separate_note(groups: Sequence[Group]) -> str | None:
    """The one line that says why there is more than one table."""
    if len(groups) < 2:
        return None
    benches = len({g.benchmark.digest or g.benchmark.path for g in groups})
    scorers = len({g.identity for g in groups})
    why = []
    if benches > 1:
        why.append(f"{benches} benchmarks")
    if scorers > 1:
        why.append(f"{scorers} scorer identities (name, weights, precision, version)")
    return (
        f"{len(groups)} separate tables: these runs span {' and '.join(why)}, and match rates "
        "are comparable only within one benchmark and one scorer."
    )
