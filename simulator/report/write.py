"""Write every form of the report into one folder, each file atomically."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from duplexsim.core.extras import MissingExtra
from duplexsim.core.files import write_text_atomic
from duplexsim.report.compare import BAND_NOTE, detectables
from duplexsim.report.data import RunReport
from duplexsim.report.groups import LEGEND, Group, group_reports, separate_note
from duplexsim.report.html import html_report
from duplexsim.report.plots import emotion_bars, language_heatmap
from duplexsim.report.tables import group_notes, markdown_report

__all__ = ["PLOTS_MISSING", "write_report"]

PLOTS_MISSING = "no PNG plots: matplotlib is not installed (pip install 'duplexsim[plots]')"


def write_report(reports: Sequence[RunReport], out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    groups = group_reports(reports)
    plots: list[list[Path]] = []
    paths: dict[str, Path] = {}
    for i, group in enumerate(groups):
        tag = "" if i == 0 else f"-{i + 1}"
        found = _plots(group, out_dir, tag)
        plots.append(list(found.values()))
        paths |= found
    paths |= {
        "markdown": out_dir / "leaderboard.md",
        "html": out_dir / "leaderboard.html",
        "json": out_dir / "leaderboard.json",
    }
    names = [[p.name for p in group_plots] for group_plots in plots]
    write_text_atomic(paths["markdown"], markdown_report(reports, plots=names))
    write_text_atomic(paths["html"], html_report(reports, plots))
    data = {
        "note": separate_note(groups),
        "legend": LEGEND,
        "groups": [
            {
                "benchmark": g.benchmark.to_dict(),
                "scorer": g.identity.to_dict(),
                "comparable_with_mirroring": g.comparable,
                "notes": group_notes(g),
                "runs": [r.run_id for r in g.reports],  # ranked
                "bands": g.bands,
                "band_note": BAND_NOTE,
                "comparisons": None if g.comparisons is None else g.comparisons.to_dict(),
                "detectable": {run: d.to_dict() for run, d in detectables(g.reports).items()},
            }
            for g in groups
        ],
        # every run with its provenance, ranked within its group
        "runs": [r.to_dict() | {"group": i} for i, g in enumerate(groups) for r in g.reports],
    }
    write_text_atomic(paths["json"], json.dumps(data, indent=2, default=str))
    return paths


def _plots(group: Group, out_dir: Path, tag: str = "") -> dict[str, Path]:
    """A group's PNG plots, or none without the ``plots`` extra (the tables carry the same
    figures)."""
    try:
        return {
            f"png_emotion{tag}": emotion_bars(group, out_dir / f"match_by_emotion{tag}.png"),
            f"png_heatmap{tag}": language_heatmap(
                group, out_dir / f"match_by_emotion_language{tag}.png"
            ),
        }
    except MissingExtra:
        return {}
