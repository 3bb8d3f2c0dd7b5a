"""The run's index page: a summary and a sortable, filterable table linking to every session."""

from __future__ import annotations

import statistics
from collections.abc import Container

from duplexsim.run.store import ResultRow
from duplexsim.viewer.data import RunView
from duplexsim.viewer.layout import (
    badge,
    document,
    esc,
    fmt_num,
    match_text,
    scorer_notice,
)
from duplexsim.viewer.scripts import INDEX_JS

__all__ = ["index_page"]

NONE = "–"  # an empty field (a ``talk`` session has no reference emotion)

# (header, sort type); a "num" column sorts on each cell's data-v
COLUMNS = (
    ("sample", "text"),
    ("emotion", "text"),
    ("language", "text"),
    ("status", "text"),
    ("match", "text"),
    ("latency (ms)", "num"),
    ("reply (s)", "num"),
    ("reply's top emotion", "text"),
    ("end reason", "text"),
)


def index_page(run: RunView, pages: str = "sessions", linked: Container[str] | None = None) -> str:
    """``linked``: the sessions whose pages exist (None: all); the others are listed unlinked,
    and the page is marked as partial (see ``write``)."""
    partial = linked is not None and any(r.sample_id not in linked for r in run.rows)
    notice = (
        '<div class="alert info" id="partial">Only some sessions have a page yet; the others '
        f"are listed without a link. Run <code>duplexsim view {esc(str(run.run_dir))}</code> "
        "to write them all.</div>"
        if partial
        else ""
    )
    body = (
        f'<nav class="crumbs"><span>run <b>{esc(run.run_id)}</b></span>'
        f"<span>model <b>{esc(run.model)}</b></span></nav>"
        f"<h1>Sessions of {esc(run.run_id)}</h1>"
        f'<section class="card">{_stats(run)}</section>'
        f"{scorer_notice(run.report, str(run.run_dir))}{notice}{_run_problems(run)}"
        f'<section class="card">{_filters(run)}{_table(run, pages, linked)}'
        '<p class="hint">Click a header to sort; the text box matches anywhere in a row.</p>'
        "</section>"
        f"<footer>duplexsim view · {esc(str(run.run_dir))}</footer>"
    )
    kind = "partial-index" if partial else "index"
    return document(f"{run.run_id} · duplexsim sessions", body, INDEX_JS, kind=kind)


def _run_problems(run: RunView) -> str:
    """What could not be used of the run's own records (rows without an id, its metadata)."""
    problems = run.row_notes.get("", [])
    if not problems:
        return ""
    items = "".join(f"<li>{esc(p)}</li>" for p in problems[:50])
    more = f"<li>and {len(problems) - 50} more</li>" if len(problems) > 50 else ""
    return (
        '<div class="alert warn" id="run-problems">Some of the run\'s records could not be '
        f"used:<ul>{items}{more}</ul></div>"
    )


def _stats(run: RunView) -> str:
    rows = run.rows
    counts = {s: sum(1 for r in rows if r.status == s) for s in ("ok", "no-reply", "failed")}
    # latency from sessions whose own timing kept its budget only, with their count
    latencies = [r.latency_s for r in rows if r.latency_s is not None and r.precise]
    median = statistics.median(latencies) * 1000 if latencies else None
    completed = [r for r in rows if r.status != "failed"]
    faithful = sum(r.faithful for r in completed)
    precise = sum(r.precise for r in completed)
    items = [
        ("sessions", str(len(rows))),
        ("replied", str(counts["ok"])),
        ("no reply", str(counts["no-reply"])),
        ("failed", str(counts["failed"])),
        ("input fidelity", f"{faithful}/{len(completed)}"),
        ("precision", f"{precise}/{len(completed)}"),
        ("median latency", f"{fmt_num(median, '{:.0f}')} ms (n={len(latencies)})"),
    ]
    if run.report is not None:
        m = run.report.metrics
        items += [
            ("match rate", _pct(m.match_rate)),
            ("shuffled baseline", _pct(m.shuffled_baseline)),
            ("N scored", str(m.n)),
            ("scorer", run.report.scorer),
        ]
    cells = "".join(f"<div><b>{esc(v)}</b><span>{esc(k)}</span></div>" for k, v in items)
    return f'<div class="stats">{cells}</div>'


def _pct(x: float) -> str:
    return fmt_num(x * 100, "{:.1f}") + "%" if x == x else "–"


def _filters(run: RunView) -> str:
    def select(field: str, label: str, values: list[str]) -> str:
        options = "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in values)
        return (
            f'<select data-field="{field}" aria-label="{esc(label)}">'
            f'<option value="">{esc(label)}: all</option>{options}</select>'
        )

    emotions = sorted({r.emotion or NONE for r in run.rows})
    languages = sorted({r.language or NONE for r in run.rows})
    return (
        '<div class="filters"><input id="filter" type="search" placeholder="Filter sessions…" '
        'aria-label="filter">'
        f"{select('emotion', 'emotion', emotions)}{select('language', 'language', languages)}"
        f"{select('match', 'match', ['yes', 'no', '–'])}"
        f"{select('status', 'status', ['ok', 'no-reply', 'failed'])}"
        '<span class="count" id="count"></span></div>'
    )


def _table(run: RunView, pages: str, linked: Container[str] | None) -> str:
    head = "".join(f'<th data-type="{kind}">{esc(name)}</th>' for name, kind in COLUMNS)
    body = "".join(_row(run, r, pages, linked) for r in run.rows)
    return (
        f'<table class="sessions" id="sessions"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


_MATCH_CSS = {"yes": "yes", "no": "no"}


def _row(run: RunView, r: ResultRow, pages: str, linked: Container[str] | None) -> str:
    scores = run.scores.get(r.sample_id)
    match = match_text(scores.match if scores else None)
    top = (scores.reply_top if scores else None) or "–"
    latency = "" if r.latency_s is None else f"{r.latency_s * 1000:.0f}"
    reply = "" if r.reply_duration_s is None else f"{r.reply_duration_s:.2f}"
    href = f"{pages}/{run.page(r.sample_id)}"
    sample = (
        f'<a href="{esc(href)}">{esc(r.sample_id)}</a>'
        if linked is None or r.sample_id in linked
        else f'<span title="no page yet">{esc(r.sample_id)}</span>'
    )
    return (
        f'<tr data-emotion="{esc(r.emotion or NONE)}" data-language="{esc(r.language or NONE)}" '
        f'data-match="{esc(match)}" data-status="{esc(r.status)}">'
        f"<td>{sample}</td>"
        f"<td>{esc(r.emotion or NONE)}</td><td>{esc(r.language or NONE)}</td>"
        f"<td>{badge(r.status)}</td>"
        f"<td>{badge(match, _MATCH_CSS.get(match, 'none'))}"
        f'</td><td class="num" data-v="{latency}">{latency or "–"}</td>'
        f'<td class="num" data-v="{reply}">{reply or "–"}</td>'
        f"<td>{esc(top)}</td><td>{esc(r.end_reason)}</td></tr>"
    )
