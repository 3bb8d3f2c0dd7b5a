"""Write every form of the report into one folder, each file atomically."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from simulator.core.extras import MissingExtra
from simulator.core.files import write_text_atomic
from simulator.report.data import RunReport
from simulator.report.html import html_report
from simulator.report.plots import emotion_bars, language_heatmap
from simulator.report.tables import markdown_report, ranked

__all__ = ["PLOTS_MISSING", "write_report"]

PLOTS_MISSING = "no PNG plots: matplotlib is not installed (pip install 'duplexsim[plots]')"


def write_report(reports: Sequence[RunReport], out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    ordered = ranked(reports)
    paths = _plots(ordered, out_dir)
    plots = list(paths.values())
    paths |= {
        "markdown": out_dir / "leaderboard.md",
        "html": out_dir / "leaderboard.html",
        "json": out_dir / "leaderboard.json",
    }
    write_text_atomic(paths["markdown"], markdown_report(ordered, plots=[p.name for p in plots]))
    write_text_atomic(paths["html"], html_report(ordered, plots))
    data = {"runs": [r.to_dict() for r in ordered]}
    write_text_atomic(paths["json"], json.dumps(data, indent=2, default=str))
    return paths


def _plots(ordered: Sequence[RunReport], out_dir: Path) -> dict[str, Path]:
    """The PNG plots, or none without the ``plots`` extra (the tables carry the same figures)."""
    try:
        return {
            "png_emotion": emotion_bars(ordered, out_dir / "match_by_emotion.png"),
            "png_heatmap": language_heatmap(ordered, out_dir / "match_by_emotion_language.png"),
        }
    except MissingExtra:
        return {}
