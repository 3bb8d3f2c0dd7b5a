"""PNG plots: match rate per emotion for every run, and the emotion x language heatmap."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simulator.core.emotions import EMOTIONS
from simulator.core.extras import require
from simulator.report.data import RunReport

__all__ = ["emotion_bars", "language_heatmap"]


def _pyplot() -> Any:
    matplotlib = require("matplotlib", "the PNG plots")
    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt

    return plt


def _literal(text: str) -> str:
    """``text`` shown as written: matplotlib reads a pair of ``$`` as math (and fails on bad
    math), so each is escaped."""
    return text.replace("$", r"\$")


def emotion_bars(reports: Sequence[RunReport], path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 4.2), dpi=110)
    width = 0.8 / max(1, len(reports))
    x = np.arange(len(EMOTIONS))
    for i, r in enumerate(reports):
        values = []
        for e in EMOTIONS:
            group = r.metrics.per_emotion.get(e.name)
            values.append(np.nan if group is None else 100 * group.match_rate)
        ax.bar(x + (i - (len(reports) - 1) / 2) * width, values, width, label=_literal(r.run_id))
    ax.axhline(
        100 / len(EMOTIONS),
        color="grey",
        linestyle="--",
        linewidth=1,
        label="uniform chance (8.3%)",
    )
    ax.set_xticks(x, [e.display for e in EMOTIONS], rotation=30, ha="right")
    ax.set_ylabel("match rate (%)")
    ax.set_title("Match rate by reference emotion")
    ax.legend(fontsize=8, ncols=2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def language_heatmap(reports: Sequence[RunReport], path: Path) -> Path:
    """Emotion x language match rate, pooled over the given runs (as MIRRORING averages models)."""
    plt = _pyplot()
    languages = sorted({lang for r in reports for lang in r.metrics.per_language})
    grid = np.full((len(EMOTIONS), len(languages)), np.nan)
    for i, e in enumerate(EMOTIONS):
        for j, lang in enumerate(languages):
            n = matches = 0
            for r in reports:
                group = r.metrics.per_emotion_language.get((e.name, lang))
                if group is not None:
                    n += group.n
                    matches += group.matches
            if n:
                grid[i, j] = 100 * matches / n
    if not languages:  # e.g. talk runs: replies with no reference emotion to mirror
        fig, ax = plt.subplots(figsize=(6.5, 2), dpi=110)
        ax.text(0.5, 0.5, "no samples with a reference emotion", ha="center", va="center")
        ax.set_axis_off()
        fig.savefig(path)
        plt.close(fig)
        return path
    fig, ax = plt.subplots(figsize=(max(6.5, 1.2 * len(languages) + 3.5), 6), dpi=110)
    image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=100, aspect="auto")
    ax.set_xticks(range(len(languages)), languages)
    ax.set_yticks(range(len(EMOTIONS)), [e.display for e in EMOTIONS])
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            if not math.isnan(grid[i, j]):
                ax.text(
                    j,
                    i,
                    f"{grid[i, j]:.0f}",
                    ha="center",
                    va="center",
                    color="white" if grid[i, j] < 60 else "black",
                    fontsize=8,
                )
    ax.set_title("Match rate (%) by emotion and language\n(all runs pooled)")
    fig.colorbar(image, ax=ax, label="match rate (%)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
