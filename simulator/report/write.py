"""Write every form of the report into one folder, each file atomically."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from simulator.core.files import write_text_atomic
from simulator.report.data import RunReport
from simulator.report.html import html_report
from simulator.report.plots import emotion_bars, language_heatmap
from simulator.report.tables import markdown_report, ranked

__all__ = ["write_report"]


def write_report(reports: Sequence[RunReport], out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    ordered = ranked(reports)
    bars = emotion_bars(ordered, out_dir / "match_by_emotion.png")
    heat = language_heatmap(ordered, out_dir / "match_by_emotion_language.png")
    paths = {
        "png_emotion": bars,
        "png_heatmap": heat,
        "markdown": out_dir / "leaderboard.md",
        "html": out_dir / "leaderboard.html",
        "json": out_dir / "leaderboard.json",
    }
    write_text_atomic(paths["markdown"], markdown_report(ordered, plots=[bars.name, heat.name]))
    write_text_atomic(paths["html"], html_report(ordered, [bars, heat]))
    data = {"runs": [r.to_dict() for r in ordered]}
    write_text_atomic(paths["json"], json.dumps(data, indent=2, default=str))
    return paths
