"""PNG plots of one group of comparable runs: match rate per emotion for every run, and the
emotion x language heatmap of each run."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from duplexsim.core.emotions import EMOTIONS
from duplexsim.core.extras import require
from duplexsim.report.data import RunReport
from duplexsim.report.groups import Group

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


def emotion_bars(group: Group, path: Path) -> Path:
    """Match rate per reference emotion, one bar per run; a 0% bar is drawn as a coloured line
    on the axis with a "0" above it, so a zero reads as zero, not as a missing value."""
    plt = _pyplot()
    reports = group.reports
    fig, ax = plt.subplots(figsize=(11, 4.6), dpi=110)
    width = 0.8 / max(1, len(reports))
    x = np.arange(len(EMOTIONS))
    for i, r in enumerate(reports):
        values = np.array([_rate(r, e.name) for e in EMOTIONS])
        left = x + (i - (len(reports) - 1) / 2) * width
        bars = ax.bar(
            left,
            values,
            width,
            label=_literal(r.model + ("" if r.model == r.run_id else f" ({r.run_id})")),
        )
        color = bars.patches[0].get_facecolor() if bars.patches else None
        for xi, v in zip(left, values, strict=True):
            if v == 0:
                ax.hlines(0, xi - width / 2, xi + width / 2, colors=[color], linewidth=3)
                ax.text(xi, 0.8, "0", ha="center", va="bottom", fontsize=7, color=color)
    ax.axhline(
        100 / len(EMOTIONS),
        color="grey",
        linestyle="--",
        linewidth=1,
        label="uniform chance (8.3%)",
    )
    ax.set_ylim(bottom=0)
    ax.set_xticks(x, [e.display for e in EMOTIONS], rotation=30, ha="right")
    ax.set_ylabel("match rate (%)")
    ax.set_title(_literal(f"Match rate by reference emotion\n{group.title}"), fontsize=9)
    ax.legend(fontsize=8, ncols=2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _rate(r: RunReport, emotion: str) -> float:
    group = r.metrics.per_emotion.get(emotion)
    return np.nan if group is None else 100 * group.match_rate


def language_heatmap(group: Group, path: Path) -> Path:
    """Emotion x language match rate, one panel per run (pooling runs would hide which model
    mirrors which emotion)."""
    plt = _pyplot()
    reports = group.reports
    languages = sorted({lang for r in reports for lang in r.metrics.per_language})
    if not languages:  # e.g. talk runs: replies with no reference emotion to mirror
        fig, ax = plt.subplots(figsize=(6.5, 2), dpi=110)
        ax.text(0.5, 0.5, "no samples with a reference emotion", ha="center", va="center")
        ax.set_axis_off()
        fig.savefig(path)
        plt.close(fig)
        return path
    cols = min(3, len(reports))
    rows = math.ceil(len(reports) / cols)
    panel_w = max(4.0, 0.9 * len(languages) + 3.0)
    fig, axes = plt.subplots(
        rows, cols, figsize=(panel_w * cols, 5.2 * rows), dpi=100, squeeze=False
    )
    image = None
    for k, ax in enumerate(axes.flat):
        if k >= len(reports):
            ax.set_axis_off()
            continue
        grid = _grid(reports[k], languages)
        image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=100, aspect="auto")
        ax.set_xticks(range(len(languages)), languages)
        ax.set_yticks(range(len(EMOTIONS)), [e.display for e in EMOTIONS] if k % cols == 0 else [])
        _annotate(ax, grid)
        ax.set_title(_literal(f"{reports[k].model}\n{reports[k].run_id}"), fontsize=9)
    fig.suptitle(
        _literal(f"Match rate (%) by emotion and language, per run\n{group.title}"), fontsize=10
    )
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), label="match rate (%)")
    fig.savefig(path)
    plt.close(fig)
    return path


def _grid(r: RunReport, languages: Sequence[str]) -> np.ndarray:
    grid = np.full((len(EMOTIONS), len(languages)), np.nan)
    for i, e in enumerate(EMOTIONS):
        for j, lang in enumerate(languages):
            cell = r.metrics.per_emotion_language.get((e.name, lang))
            if cell is not None and cell.n:
                grid[i, j] = 100 * cell.matches / cell.n
    return grid


def _annotate(ax: Any, grid: np.ndarray) -> None:
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            if not math.isnan(grid[i, j]):
                color = "white" if grid[i, j] < 60 else "black"
                ax.text(
                    j, i, f"{grid[i, j]:.0f}", ha="center", va="center", color=color, fontsize=7
                )
