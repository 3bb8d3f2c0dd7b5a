"""The build report as Markdown and as terminal text, from the report's JSON-ready dict. Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from duplexsim.core.textable import render_table

__all__ = ["STEP_LABELS", "render_markdown", "steps_table"]

STEP_LABELS = {
    "adjacent_pairs": "adjacent turn pairs",
    "dropped_overlapping": "- reply starts before the turn ends (overlap)",
    "dropped_gap_too_long": "- reply starts more than max gap after the turn",
    "candidate_pairs": "candidate pairs",
    "dropped_no_pause_boundary": "- no pause boundary for the context",
    "dropped_unscored": "- a turn could not be scored",
    "dropped_emotions_differ": "- dominant emotions differ",
    "same_emotion": "same dominant emotion",
    "dropped_balancing": "- capped by balancing",
    "kept": "kept (samples)",
}


def _markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _step_rows(report: Mapping[str, Any]) -> list[list[object]]:
    return [[STEP_LABELS[k], v] for k, v in report["steps"].items()]


def _count_rows(report: Mapping[str, Any]) -> tuple[list[str], list[list[object]]]:
    languages: list[str] = list(report["languages"])
    rows: list[list[object]] = []
    totals = [0] * len(languages)
    for emotion, by_lang in report["counts"].items():
        row = [by_lang.get(lang, 0) for lang in languages]
        totals = [t + v for t, v in zip(totals, row, strict=True)]
        rows.append([emotion, *row, sum(row)])
    rows.append(["total", *totals, sum(totals)])
    return ["emotion", *languages, "total"], rows


def steps_table(report: Mapping[str, Any]) -> str:
    """Terminal text: the steps, then counts per emotion x language."""
    headers, rows = _count_rows(report)
    return "\n\n".join(
        [
            render_table(["step", "pairs"], _step_rows(report)),
            render_table(headers, rows),
        ]
    )


def render_markdown(report: Mapping[str, Any]) -> str:
    turns = report["turns"]
    headers, rows = _count_rows(report)
    parts = [
        "# Benchmark build report",
        "",
        f"{report['calls']} calls, {report['audio_hours']:.2f} h of audio, languages: "
        f"{', '.join(report['languages'])}; listings: {', '.join(report['listings'])}.",
        f"Scorer `{report['scorer']}`; balancing seed {report['seed']}.",
        "",
        f"Turns: {turns['turns']} ({turns['backchannels_dropped']} backchannels and "
        f"{turns['short_segments_dropped']} short segments left out); turns scored: "
        f"{turns['scored']}, unscored: {turns['unscored']}.",
        "",
        "## Pairs, step by step",
        "",
        _markdown_table(["step", "pairs"], _step_rows(report)),
        "",
        "## Samples by emotion x language",
        "",
        _markdown_table(headers, rows),
        "",
        "## Balancing",
        "",
        f"The {report['balancing']['top']} most frequent emotions are capped at "
        f"{report['balancing']['cap']} samples each.",
        "",
    ]
    same = report["same_emotion_by_emotion"]
    capped = report["balancing"]["capped"]
    if same:
        parts.append(
            _markdown_table(
                ["emotion", "same-emotion pairs", "kept"],
                [[e, n, capped.get(e, {}).get("kept", n)] for e, n in same.items()],
            )
        )
        parts.append("")
    if report["unscored_turns"]:
        parts += ["## Unscored turns", ""]
        parts += [f"- {key}: {why}" for key, why in report["unscored_turns"].items()]
        parts.append("")
    parts += ["## Options", "", "```json"]
    parts += [json.dumps(report["options"], indent=2), "```", ""]
    return "\n".join(parts)
