"""``duplexsim compare``: which of several runs is better, and how sure we are.

Every pair of runs on the samples both have in N: the paired match difference with McNemar's test
and the lift difference, cosine and target with sign-flip permutation tests, latency medians, all
clustered by the manifest's source_id where it has one; p-values raw and Holm-adjusted; rank
bands; repeated trials' agreement; the smallest difference the benchmark can see.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from duplexsim.cli.score_cmd import check_runs
from duplexsim.core.errors import ConfigError
from duplexsim.core.files import write_text_atomic
from duplexsim.core.textable import render_table

if TYPE_CHECKING:
    from duplexsim.report.groups import Group

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compare",
        help="paired comparison of scored runs of one benchmark: differences with intervals, "
        "raw and Holm-adjusted p-values, rank bands",
    )
    p.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="two or more runs")
    p.add_argument("--scorer", help="which cached scores to use (default: each run's best)")
    p.add_argument("--seed", type=int, default=0, help="seed of resampling and permutations")
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the comparison as JSON")
    p.set_defaults(func=_compare)


def _compare(args: argparse.Namespace) -> int:
    if len(args.run_dirs) < 2:
        raise ConfigError("compare needs two or more runs")
    check_runs(args.run_dirs)
    from duplexsim.report.data import NO_SCORER, build_report
    from duplexsim.report.groups import group_reports, separate_note

    reports = [build_report(d, args.scorer, seed=args.seed) for d in args.run_dirs]
    groups = group_reports(reports)
    if len(groups) > 1:
        raise ConfigError(f"cannot compare: {separate_note(groups)}")
    group = groups[0]
    if group.identity.name == NO_SCORER:
        raise ConfigError("cannot compare: these runs are timing only (nothing scored)")
    empty = [r.run_id for r in group.reports if r.items is None]
    if empty:
        raise ConfigError(f"cannot compare: no sample in N in {', '.join(empty)}")
    print(compare_text(group))
    if args.json is not None:
        write_text_atomic(args.json, json.dumps(compare_json(group), indent=2))
        print(f"\ncomparison: {args.json}")
    return 0


def compare_text(group: Group) -> str:
    from duplexsim.report.tables import group_notes, statistics_notes, statistics_tables

    ranking = [
        [
            str(rank),
            str(group.bands.get(r.run_id, "-")),
            r.run_id,
            r.model,
            str(r.metrics.n),
            f"{100 * r.metrics.match_rate:.1f}%",
            str(r.metrics.trials),
        ]
        for rank, r in enumerate(group.reports, start=1)
    ]
    parts = [group.title, *group_notes(group), ""]
    parts.append(render_table(["#", "band", "run", "model", "N", "match rate", "trials"], ranking))
    for table in statistics_tables(group):
        parts += ["", f"{table.title}:", render_table(table.headers, table.rows)]
        parts += [table.note] if table.note else []
    return "\n".join([*parts, "", *statistics_notes(group)])


def compare_json(group: Group) -> dict[str, Any]:
    from duplexsim.report.compare import BAND_NOTE, detectables

    return {
        "benchmark": group.benchmark.to_dict(),
        "scorer": group.identity.to_dict(),
        "runs": [r.run_id for r in group.reports],  # ranked
        "bands": group.bands,
        "band_note": BAND_NOTE,
        "comparisons": None if group.comparisons is None else group.comparisons.to_dict(),
        "trials": {r.run_id: r.agreement.to_dict() for r in group.reports if r.agreement},
        "detectable": {run: d.to_dict() for run, d in detectables(group.reports).items()},
    }
