"""Which run is better, and how sure we are: the paired comparisons of one group's runs as tables,
their rank bands, repeated trials' agreement and the smallest difference the benchmark can see.

The statistics are ``duplexsim.scoring``'s (compare, paired, power, trials); this module turns a
group's reports into them and them into rows for the terminal, Markdown, HTML and JSON.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from duplexsim.report.data import RunReport
from duplexsim.scoring.compare import Comparisons, PairComparison, compare_runs
from duplexsim.scoring.paired import Difference, top_shares
from duplexsim.scoring.power import Detectable, detectable, icc_anova
from duplexsim.scoring.resample import Clusters, Resampling

__all__ = [
    "ALPHA",
    "BAND_NOTE",
    "Table",
    "band_reasons",
    "comparison_tables",
    "detectable_lines",
    "detectables",
    "group_comparisons",
    "run_detectable",
    "trial_table",
]

ALPHA = 0.05
BAND_NOTE = (
    "band: runs in one band cannot be told apart by match rate on this benchmark (paired test "
    "on the samples both have in N, Holm-adjusted over every pair of runs, alpha 0.05). Band 1 "
    "is the best run, every run not separable from it and every run ranked above one of those; "
    "the runs left are banded the same way."
)


MATCH_HEADERS = [
    "A", "B", "N", "match A vs B", "A-B (pp) [95% CI]", "b / c", "McNemar p", "test", "p",
    "p (Holm)", "lift A-B (pp) [95% CI]",
]  # fmt: skip
TRIAL_HEADERS = [
    "run", "trials", "samples with 2+", "kappa (top emotion)", "match rate by trial", "sd",
    "range", "within-sample variance match / cosine / target",
]  # fmt: skip


@dataclass(frozen=True)
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]
    note: str = ""


def _name(report: RunReport, reports: Sequence[RunReport]) -> str:
    """The run id, or, where two runs of the group share it, the run's folder."""
    same = sum(1 for r in reports if r.run_id == report.run_id)
    return report.run_id if same == 1 else str(report.run_dir)


def group_comparisons(reports: Sequence[RunReport]) -> Comparisons | None:
    """Every pair of the group's runs that have samples in N (None: fewer than two)."""
    runs = [
        dataclasses.replace(r.items, name=_name(r, reports)) for r in reports if r.items is not None
    ]
    if len(runs) < 2:
        return None
    seed = reports[0].metrics.seed
    return compare_runs(runs, Resampling(seed=seed), alpha=ALPHA)


def bands(reports: Sequence[RunReport], comparisons: Comparisons | None) -> dict[str, int]:
    """Band of each run by run id (a lone run, or one with nothing in N: band 1 / none)."""
    if comparisons is None:
        return {r.run_id: 1 for r in reports if r.items is not None}
    return {r.run_id: comparisons.bands[_name(r, reports)] for r in reports if r.items is not None}


def band_reasons(comparisons: Comparisons) -> list[str]:
    """Why each run is in its band, in words: the head of each band against the runs below it."""
    by_pair = {(p.a, p.b): p for p in comparisons.pairs}
    order = sorted(comparisons.bands, key=lambda run: _rank(run, comparisons))
    lines = []
    heads: dict[int, str] = {}
    for run in order:
        band = comparisons.bands[run]
        head = heads.setdefault(band, run)
        if run == head:
            previous = heads.get(band - 1)
            if previous is None:
                lines.append(f"band {band}: {run}, the best match rate")
                continue
            pair = by_pair[(previous, run)]
            lines.append(f"band {band}: {run}, below {previous}: {_sentence(pair)} < alpha {ALPHA}")
            continue
        pair = by_pair[(head, run)]
        separable = pair.adjusted["match"] <= ALPHA
        why = "ranked above a run it cannot be told from" if separable else "not separable"
        lines.append(f"band {band}: {run} with {head}, {why}: {_sentence(pair)}")
    return lines


def _rank(run: str, comparisons: Comparisons) -> int:
    """Position of ``run`` in the pairs' order (every pair has the better-ranked run first)."""
    return sum(1 for p in comparisons.pairs if p.b == run)


def _sentence(pair: PairComparison) -> str:
    d = pair.match.difference
    return (
        f"{pair.a} - {pair.b} = {d.estimate:+.1f} pp [{d.low:+.1f}, {d.high:+.1f}], "
        f"p {_p(d.p_value)}, Holm {_p(pair.adjusted['match'])}"
    )


# ---------------------------------------------------------------- formatting


def _p(x: float) -> str:
    if math.isnan(x):
        return "-"
    return f"{x:.1e}" if x < 0.001 else f"{x:.3f}"


def _diff(d: Difference, fmt: str = "{:+.1f}") -> str:
    if math.isnan(d.estimate):
        return "-"
    return f"{fmt.format(d.estimate)} [{fmt.format(d.low)}, {fmt.format(d.high)}]"


def _match_row(p: PairComparison) -> list[str]:
    m = p.match
    discordant = "-" if m.b is None else f"{m.b} / {m.c}"
    mcnemar = "-" if m.mcnemar_p is None else _p(m.mcnemar_p)
    return [
        p.a,
        p.b,
        str(p.n),
        f"{100 * m.rate_a:.1f}% vs {100 * m.rate_b:.1f}%",
        _diff(m.difference),
        discordant,
        mcnemar,
        m.difference.test,
        _p(m.difference.p_value),
        _p(p.adjusted["match"]),
        _diff(m.lift),
    ]


def _scores_row(p: PairComparison) -> list[str]:
    cells = [p.a, p.b]
    for figure in ("cosine", "target"):
        d = p.difference(figure)
        cells += [_diff(d, "{:+.3f}"), _p(d.p_value), _p(p.adjusted[figure])]
    return cells


def _latency_row(p: PairComparison) -> list[str]:
    d = p.latency
    return [p.a, p.b, str(d.n), _diff(d, "{:+.0f}"), _p(d.p_value), _p(p.adjusted["latency"])]


def _clusters_note(reports: Sequence[RunReport], comparisons: Comparisons) -> str:
    kinds = sorted({p.clusters for p in comparisons.pairs})
    why = sorted({r.clusters_note for r in reports if r.clusters_note})
    unclustered = f" ({'; '.join(why)})" if why and any("unclustered" in k for k in kinds) else ""
    return (
        f"A minus B on the samples in N for both (with trials, each sample's mean over its "
        f"trials); {', '.join(kinds)}{unclustered}. Intervals: 95% cluster bootstrap. p: McNemar's "
        "exact test where each sample's match is 0 or 1 and there are no clusters, else the "
        "(cluster) sign-flip permutation test; latency: the sign test. p (Holm): adjusted over the "
        f"{len(comparisons.pairs)} pair(s), per figure. docs/metrics.md, 'Comparing runs'."
    )


def comparison_tables(reports: Sequence[RunReport], comparisons: Comparisons) -> list[Table]:
    """Match, scores and latency of every pair, best-ranked run as A."""
    pairs = comparisons.pairs
    match = Table(
        "paired match rate, A minus B",
        MATCH_HEADERS,
        [_match_row(p) for p in pairs],
        _clusters_note(reports, comparisons),
    )
    scores = Table(
        "paired cosine and target, A minus B (mean)",
        ["A", "B", "cosine A-B [95% CI]", "p", "p (Holm)", "target A-B [95% CI]", "p", "p (Holm)"],
        [_scores_row(p) for p in pairs],
    )
    latency = Table(
        "paired latency, A minus B (median over sessions precise in both, ms)",
        ["A", "B", "n", "A-B ms [95% CI]", "p", "p (Holm)"],
        [_latency_row(p) for p in pairs],
    )
    return [match, scores, latency]


def trial_table(reports: Sequence[RunReport]) -> Table | None:
    """Test-retest figures of the runs with repeated trials."""
    rows = []
    for r in reports:
        a = r.agreement
        if a is None:
            continue
        low, high = a.rate_range
        rates = " / ".join("-" if math.isnan(x) else f"{100 * x:.1f}%" for x in a.trial_rates)
        var = a.within_variance
        rows.append(
            [
                r.run_id,
                str(a.trials),
                str(a.items),
                "-" if math.isnan(a.kappa) else f"{a.kappa:.3f}",
                rates,
                "-" if math.isnan(a.rate_sd) else f"{100 * a.rate_sd:.1f} pp",
                f"{100 * (high - low):.1f} pp",
                " / ".join(
                    "-" if math.isnan(var[k]) else f"{var[k]:.4f}"
                    for k in ("match", "cosine", "target")
                ),
            ]
        )
    if not rows:
        return None
    return Table(
        "repeated trials: how much a rerun moves the run",
        TRIAL_HEADERS,
        rows,
        "Figures over each sample's mean of its trials; kappa: Cohen's, of the top emotion "
        "between trials (mean over pairs of trials; no reply is a category).",
    )


def run_detectable(report: RunReport, models: int) -> Detectable | None:
    """The smallest match-rate difference this run's benchmark finds at 80% power against a
    model at the same rate, from its N, clusters and observed rate (None: nothing in N)."""
    items = report.items
    if items is None:
        return None
    shares = top_shares(items.tops)
    match = shares[np.arange(len(items.ids)), items.refs]
    clusters = Clusters.of(list(items.sources), len(items.ids))
    icc = icc_anova(match, clusters)
    return detectable(
        clusters.sizes(),
        float(match.mean()),
        0.0 if math.isnan(icc) else icc,
        models=max(2, models),
        alpha=ALPHA,
        source="observed",
    )


def detectables(reports: Sequence[RunReport]) -> dict[str, Detectable]:
    """Each scored run's minimum detectable difference, at the level its group's pairs need."""
    models = sum(1 for r in reports if r.items is not None)
    found = {r.run_id: run_detectable(r, models) for r in reports}
    return {run: d for run, d in found.items() if d is not None}


def detectable_lines(reports: Sequence[RunReport]) -> list[str]:
    return [f"{run}: {d.describe()}" for run, d in detectables(reports).items()]
