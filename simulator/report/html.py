"""A self-contained HTML leaderboard: sortable tables, plots embedded, no network needed."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path

from duplexsim.report.data import RunReport
from duplexsim.report.groups import LEGEND, Group, group_reports, separate_note
from duplexsim.report.tables import (
    HEADERS,
    PARTNER_HEADERS,
    PARTNER_NOTE,
    TASK_HEADERS,
    TASK_NOTE,
    _per_emotion_rows,
    _per_language_rows,
    cost_notes,
    group_notes,
    has_partner,
    has_tasks,
    leaderboard_rows,
    method_line,
    out_of_n_notes,
    partner_rows,
    statistics_notes,
    statistics_tables,
    task_rows,
)

__all__ = ["html_report"]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f3f3f3;cursor:pointer;user-select:none}
td:nth-child(2),td:nth-child(3),th:nth-child(2){text-align:left}
.warn{background:#fff3cd;border:2px solid #d39e00;padding:10px 14px;font-weight:bold}
img{max-width:100%;border:1px solid #eee}
.note{color:#555;font-size:90%}
"""

# Sort on the number at the start of a cell ("45.0%", "+3.1 [..]"); text sorts as text.
_SCRIPT = """
document.querySelectorAll('table.sortable').forEach(function(table){
  table.querySelectorAll('th').forEach(function(th, col){
    th.addEventListener('click', function(){
      var body = table.tBodies[0], rows = Array.from(body.rows);
      var dir = th.dataset.dir === 'desc' ? 1 : -1; th.dataset.dir = dir === 1 ? 'asc' : 'desc';
      function key(row){ var t = row.cells[col].textContent.trim();
        var n = parseFloat(t.replace(/^[+]/, '')); return isNaN(n) ? t : n; }
      rows.sort(function(a, b){ var x = key(a), y = key(b);
        if (typeof x === 'number' && typeof y === 'number') return dir * (x - y);
        return dir * String(x).localeCompare(String(y)); });
      rows.forEach(function(r){ body.appendChild(r); });
    });
  });
});
"""


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], table_id: str) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return (
        f'<table class="sortable" id="{table_id}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def _image(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def _statistics_html(group: Group, number: int) -> list[str]:
    """The paired comparisons and trials' tables, what a band means, the detectable difference."""
    parts = []
    for k, table in enumerate(statistics_tables(group)):
        parts += [
            f"<h3>{html.escape(table.title[0].upper() + table.title[1:])}</h3>",
            _table(table.headers, table.rows, f"statistics-{number}-{k}"),
            f"<p class='note'>{html.escape(table.note)}</p>" if table.note else "",
        ]
    notes = statistics_notes(group)
    return parts + [f"<p class='note'>{html.escape(n)}</p>" for n in notes]


def _group_html(group: Group, number: int, plots: Sequence[Path]) -> list[str]:
    runs = [r.run_id for r in group.reports]
    return [
        f"<h2>{html.escape(group.title)}</h2>",
        "".join(f'<p class="warn">{html.escape(n)}</p>' for n in group_notes(group)),
        _table(HEADERS, leaderboard_rows(group.reports, group.bands), f"leaderboard-{number}"),
        "".join(
            f"<p class='note'>{html.escape(n)}</p>"
            for n in [*out_of_n_notes(group.reports), *cost_notes(group.reports)]
        ),
        *_statistics_html(group, number),
        "<h3>Match rate by emotion</h3>",
        _table(["emotion", *runs], _per_emotion_rows(group.reports), f"by-emotion-{number}"),
        "<h3>Match rate by language</h3>",
        _table(["language", *runs], _per_language_rows(group.reports), f"by-language-{number}"),
        *(_image(p) for p in plots),
    ]


def html_report(reports: Sequence[RunReport], plots: Sequence[Sequence[Path]]) -> str:
    """``plots``: the image files of each group, in group order."""
    groups = group_reports(reports)
    note = separate_note(groups)
    sections = ["<h1>MIRRORING leaderboard</h1>"]
    if note:
        sections.append(f'<p class="warn">{html.escape(note)}</p>')
    for i, group in enumerate(groups):
        sections += _group_html(group, i + 1, plots[i] if i < len(plots) else ())
    sections.append(
        f"<p class='note'>{html.escape(method_line(reports))} Infrastructure failures are "
        "excluded and listed in the last column. Click a header to sort.</p>"
    )
    sections.append(f"<p class='note'>{html.escape(LEGEND)}</p>")
    if has_tasks(reports):
        sections += [
            "<h2>Timing by task</h2>",
            _table(TASK_HEADERS, task_rows(reports), "by-task"),
            f"<p class='note'>{html.escape(TASK_NOTE)}</p>",
        ]
    if has_partner(reports):
        sections += [
            "<h2>Partner by task</h2>",
            _table(PARTNER_HEADERS, partner_rows(reports), "by-partner"),
            f"<p class='note'>{html.escape(PARTNER_NOTE)}</p>",
        ]
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>MIRRORING leaderboard"
        f"</title><style>{_STYLE}</style></head><body>{''.join(sections)}"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
