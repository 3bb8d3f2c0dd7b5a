"""The leaderboard as a terminal table and as Markdown: one table per group of comparable runs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from duplexsim.core.emotions import EMOTIONS
from duplexsim.core.partnermetrics import PartnerSummary
from duplexsim.core.prices import format_amount
from duplexsim.core.textable import render_table
from duplexsim.report.compare import (
    BAND_NOTE,
    Table,
    band_reasons,
    comparison_tables,
    detectable_lines,
    trial_table,
)
from duplexsim.report.data import NO_SCORER, RunReport
from duplexsim.report.groups import LEGEND, Group, group_reports, ranked, separate_note
from duplexsim.run.costs import cost_text

__all__ = [
    "NOT_COMPARABLE",
    "PARTNER_HEADERS",
    "PARTNER_NOTE",
    "TASK_HEADERS",
    "group_notes",
    "has_partner",
    "leaderboard_rows",
    "markdown_report",
    "partner_rows",
    "partner_table_rows",
    "ranked",
    "task_rows",
    "terminal_report",
]

NOT_COMPARABLE = (
    "NOT COMPARABLE WITH MIRRORING: scored with '{scorer}', not Empathic-Insight-Voice-Small; "
    "these numbers only rank runs scored the same way."
)
FLAGGED = (
    "A model marked [fake] was a local reference model; [URL override: ...] means the profile's "
    "endpoint was replaced on the command line: neither measured the model its name stands for."
)
HEADERS = [
    "#",
    "band",
    "model",
    "run",
    "match rate",
    "shuffled",
    "lift (pp)",
    "p",
    "cosine",
    "target",
    "ref",
    "N",
    "reply rate",
    "latency p50 ms (n)",
    "input fidelity",
    "precision",
    "retried",
    "failed",
    "cost",
    "cost / sample",
]


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.1f}%"


def _num(x: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if x is None or math.isnan(x) else fmt.format(x)


def leaderboard_rows(
    reports: Sequence[RunReport], bands: Mapping[str, int] | None = None
) -> list[list[str]]:
    """One row per run, ranked; ``bands``: each run's rank band by run id (none: "-")."""
    rows = []
    for rank, r in enumerate(ranked(reports), start=1):
        m = r.metrics
        lift = m.ci.get("lift_pp")
        lift_text = _num(m.lift_pp, "{:+.1f}")
        if lift is not None and not math.isnan(lift.low):
            lift_text += f" [{lift.low:+.1f}, {lift.high:+.1f}]"
        rows.append(
            [
                str(rank),
                str((bands or {}).get(r.run_id, "-")),
                r.model,
                r.run_id,
                _pct(m.match_rate),
                _pct(m.shuffled_baseline),
                lift_text,
                _num(m.p_value),
                _num(m.cosine),
                _num(m.target_score),
                _num(m.ref_score),
                str(m.n),
                _pct(m.reply_rate),
                f"{_num(r.timing.latency_p50_ms, '{:.0f}')} ({r.timing.latency_n})",
                f"{r.timing.faithful}/{r.timing.completed}",
                f"{r.timing.precise}/{r.timing.completed}",
                str(r.timing.retried),
                str(m.n_failed),
                *_cost_cells(r),
            ]
        )
    return rows


def _cost_cells(r: RunReport) -> list[str]:
    cost = r.timing.cost
    if cost is None:
        return ["-", "-"]
    per = cost.per_sample
    return [cost_text(cost.total, cost.currency), "-" if per is None else format_amount(per)]


def cost_notes(reports: Sequence[RunReport]) -> list[str]:
    """Per run: what its cost is computed from (usage x the prices it recorded, their date and
    source), and what is unknown where it is."""
    notes = []
    for r in ranked(reports):
        cost = r.timing.cost
        if cost is None:
            continue
        unknown = f"; unknown: {', '.join(cost.total.unknown[:3])}" if cost.total.unknown else ""
        notes.append(f"{r.run_id}: cost = usage x {cost.basis}{unknown}")
    return notes


def group_notes(group: Group) -> list[str]:
    """The warnings a group's table carries."""
    scored = group.identity.name != NO_SCORER
    notes = sorted(
        {NOT_COMPARABLE.format(scorer=r.scorer) for r in group.reports if not r.comparable}
    )
    notes = notes if scored else []
    if scored and not group.identity.known:
        notes.append(
            "Scorer identity unrecorded (scores cached before weights and code versions were "
            "kept): run `duplexsim score` again to record it."
        )
    if any("[" in r.model for r in group.reports):
        notes.append(FLAGGED)
    return notes


TASK_HEADERS = ["run", "task", "N", "take-overs", "take-over rate", "latency ms (take-overs)"]
TASK_NOTE = (
    "Full-Duplex-Bench's figures: a take-over is 1 s or more of model speech; lower is better on "
    "pause handling, higher on turn-taking; latency is clamped at 0 and averaged over take-overs."
)


def has_tasks(reports: Sequence[RunReport]) -> bool:
    """Whether any run's benchmark names tasks (Full-Duplex-Bench's): then timing is shown by task."""
    return any(t.task != "all" for r in reports for t in r.tasks)


def task_rows(reports: Sequence[RunReport]) -> list[list[str]]:
    rows = []
    for r in ranked(reports):
        for t in r.tasks:
            rate = t.takeover_rate
            latency = None if t.latency_s is None else 1000 * t.latency_s
            tor = _pct(math.nan if rate is None else rate)
            rows.append(
                [r.run_id, t.task, str(t.samples), str(t.takeovers), tor, _num(latency, "{:.0f}")]
            )
    return rows


PARTNER_HEADERS = [
    "run",
    "task",
    "interruptions",
    "stopped",
    "stop ms",
    "answered",
    "answer ms",
    "talked on",
    "backchannels",
    "kept floor",
    "next turns",
    "replied",
    "turn ms",
    "distractors",
    "took turn",
    "skipped",
]
PARTNER_NOTE = (
    "A partner that reacts (docs/metrics.md): after an interruption, how many times the model "
    "stopped (a 0.5 s silence before the interruption's speech was over plus 0.5 s) and the "
    "median ms from the interruption's start to its last speech, how many times it answered and "
    "the median ms from the end of the interruption's speech, how many times it talked on; after "
    "a backchannel, how many times it spoke on within 0.5 s of its end; per next turn, replies "
    "and the median latency; distractors the model answered with 1 s of speech or more; steps "
    "that could not fire. Latencies come from sessions whose timing was valid."
)


def has_partner(reports: Sequence[RunReport]) -> bool:
    return any(r.partner for r in reports)


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole}" if whole else "-"


def _ms(seconds: float | None) -> str:
    return _num(None if seconds is None else 1000 * seconds, "{:.0f}")


def partner_rows(reports: Sequence[RunReport]) -> list[list[str]]:
    return partner_table_rows([(r.run_id, r.partner) for r in ranked(reports)])


def partner_table_rows(runs: Sequence[tuple[str, Sequence[PartnerSummary]]]) -> list[list[str]]:
    """One line per run and task: what the model did at the partner's steps."""
    rows = []
    for run_id, summaries in runs:
        for p in summaries:
            skipped = ", ".join(f"{k} {n}" for k, n in sorted(p.skipped.items())) or "-"
            rows.append(
                [
                    run_id,
                    p.task,
                    str(p.interrupts),
                    _share(p.stopped, p.interrupts),
                    _ms(p.stop_latency_s),
                    _share(p.answered, p.interrupts),
                    _ms(p.response_latency_s),
                    _share(p.resumed, p.interrupts),
                    str(p.backchannels),
                    _share(p.kept_floor, p.backchannels),
                    str(p.next_turns),
                    _share(p.replied, p.next_turns),
                    _ms(p.turn_latency_s),
                    str(p.distractors),
                    _share(p.took_turn, p.distractors),
                    skipped,
                ]
            )
    return rows


def out_of_n_notes(reports: Sequence[RunReport]) -> list[str]:
    """Per run: N, and every sample out of it by reason (none is dropped without a word), and
    the replies cut short that are in it."""
    notes = []
    for r in ranked(reports):
        out = r.metrics.out_of_n
        reasons = ", ".join(f"{reason} {len(ids)}" for reason, ids in out.items()) or "none"
        cut = r.timing.truncated
        truncated = f"; {cut} {'reply' if cut == 1 else 'replies'} truncated" if cut else ""
        loose = r.timing.faithful - r.timing.precise
        imprecise = f"; {loose} in N without their latency (precision lost)" if loose else ""
        notes.append(
            f"{r.run_id}: N = {r.metrics.n}; out of N: {reasons}{truncated}{imprecise}{_bad(r)}"
        )
    return notes


def _bad(report: RunReport) -> str:
    """How many of a run's sessions had values that could not be used (treated as missing)."""
    sessions = sum(1 for sample_id in report.problems if sample_id)
    if not report.problems:
        return ""
    what = f"{sessions} session{'' if sessions == 1 else 's'}" if sessions else "its metadata"
    return f"; unusable values in the files of {what} (see leaderboard.json)"


def _per_emotion_rows(reports: Sequence[RunReport]) -> list[list[str]]:
    rows = []
    for e in EMOTIONS:
        cells = [e.display]
        for r in ranked(reports):
            group = r.metrics.per_emotion.get(e.name)
            cells.append("-" if group is None else f"{_pct(group.match_rate)} ({group.n})")
        rows.append(cells)
    return rows


def _per_language_rows(reports: Sequence[RunReport]) -> list[list[str]]:
    languages = sorted({lang for r in reports for lang in r.metrics.per_language})
    rows = []
    for lang in languages:
        cells = [lang]
        for r in ranked(reports):
            group = r.metrics.per_language.get(lang)
            cells.append("-" if group is None else f"{_pct(group.match_rate)} ({group.n})")
        rows.append(cells)
    return rows


def statistics_tables(group: Group) -> list[Table]:
    """The group's paired comparisons (two or more scored runs) and repeated trials' tables."""
    if group.identity.name == NO_SCORER:
        return []
    found = [] if group.comparisons is None else comparison_tables(group.reports, group.comparisons)
    trials = trial_table(group.reports)
    return found + ([trials] if trials is not None else [])


def statistics_notes(group: Group) -> list[str]:
    """What a band means, and the smallest difference each run's benchmark can see."""
    if group.identity.name == NO_SCORER:
        return []
    reasons = [] if group.comparisons is None else band_reasons(group.comparisons)
    return [BAND_NOTE, *reasons, *detectable_lines(group.reports)]


def _terminal_group(group: Group, number: int, total: int) -> list[str]:
    runs = [r.run_id for r in group.reports]
    head = f"[{number}/{total}] " if total > 1 else ""
    parts = [
        f"{head}{group.title}",
        *group_notes(group),
        "",
        render_table(HEADERS, leaderboard_rows(group.reports, group.bands)),
        "",
        *out_of_n_notes(group.reports),
        *cost_notes(group.reports),
    ]
    if group.identity.name == NO_SCORER:  # timing only: the tables would be empty
        return parts
    for table in statistics_tables(group):
        parts += ["", f"{table.title}:", render_table(table.headers, table.rows)]
        parts += [table.note] if table.note else []
    return [
        *parts,
        "",
        *statistics_notes(group),
        "",
        "match rate by emotion (N):",
        render_table(["emotion", *runs], _per_emotion_rows(group.reports)),
        "",
        "match rate by language (N):",
        render_table(["language", *runs], _per_language_rows(group.reports)),
    ]


def terminal_report(reports: Sequence[RunReport]) -> str:
    groups = group_reports(reports)
    note = separate_note(groups)
    parts: list[str] = [note, ""] if note else []
    for i, group in enumerate(groups, start=1):
        parts += [*_terminal_group(group, i, len(groups)), ""]
    if has_tasks(reports):
        parts += ["timing by task:", render_table(TASK_HEADERS, task_rows(reports)), TASK_NOTE, ""]
    if has_partner(reports):
        table = render_table(PARTNER_HEADERS, partner_rows(reports))
        parts += ["partner by task:", table, PARTNER_NOTE, ""]
    parts.append(LEGEND)
    return "\n".join(parts)


def _markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def method_line(reports: Sequence[RunReport]) -> str:
    if not reports:
        return ""
    m = reports[0].metrics
    return (
        f"Shuffled baseline: {m.permutations} seeded permutations (seed {m.seed}); "
        f"intervals: 95% bootstrap over samples ({m.bootstrap} resamples). "
        "A sample where the model never replied counts as a non-match."
    )


def markdown_report(reports: Sequence[RunReport], *, plots: Sequence[Sequence[str]] = ()) -> str:
    """``plots``: the image files of each group, in group order."""
    groups = group_reports(reports)
    note = separate_note(groups)
    parts = ["# MIRRORING leaderboard", ""] + ([f"> {note}", ""] if note else [])
    for i, group in enumerate(groups):
        runs = [r.run_id for r in group.reports]
        parts += [f"## {group.title}", ""]
        parts += [f"> **{n}**" for n in group_notes(group)] + [""]
        parts += [_markdown_table(HEADERS, leaderboard_rows(group.reports, group.bands)), ""]
        notes = [*out_of_n_notes(group.reports), *cost_notes(group.reports)]
        parts += [*(f"- {n}" for n in notes), ""]
        if group.identity.name != NO_SCORER:  # else timing only: the tables would be empty
            for table in statistics_tables(group):
                parts += [f"### {table.title[0].upper()}{table.title[1:]}", ""]
                parts += [_markdown_table(table.headers, table.rows), ""]
                parts += [table.note, ""] if table.note else []
            parts += [*(f"- {n}" for n in statistics_notes(group)), ""]
            parts += ["### Match rate by emotion", ""]
            parts += [_markdown_table(["emotion", *runs], _per_emotion_rows(group.reports)), ""]
            parts += ["### Match rate by language", ""]
            parts += [_markdown_table(["language", *runs], _per_language_rows(group.reports)), ""]
        parts += [f"![{p}]({p})" for p in (plots[i] if i < len(plots) else ())] + [""]
    if has_tasks(reports):
        parts += ["## Timing by task", "", _markdown_table(TASK_HEADERS, task_rows(reports))]
        parts += ["", TASK_NOTE, ""]
    if has_partner(reports):
        parts += ["## Partner by task", "", _markdown_table(PARTNER_HEADERS, partner_rows(reports))]
        parts += ["", PARTNER_NOTE, ""]
    parts += [method_line(reports), "", LEGEND, ""]
    return "\n".join(parts)
