"""A self-contained HTML leaderboard: sortable tables, plots embedded, no network needed."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path

from simulator.report.data import RunReport
from simulator.report.tables import (
    HEADERS,
    TASK_HEADERS,
    TASK_NOTE,
    _per_emotion_rows,
    _per_language_rows,
    _scorer_notes,
    has_tasks,
    leaderboard_rows,
    out_of_n_notes,
    ranked,
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


def html_report(reports: Sequence[RunReport], plots: Sequence[Path]) -> str:
    runs = [r.run_id for r in ranked(reports)]
    warnings = "".join(f'<p class="warn">{html.escape(n)}</p>' for n in _scorer_notes(reports))
    m = reports[0].metrics if reports else None
    method = (
        ""
        if m is None
        else (
            f"<p class='note'>Shuffled baseline: {m.permutations} seeded permutations (seed {m.seed}); "
            f"lift interval: 95% bootstrap over samples ({m.bootstrap} resamples). A sample where the "
            "model never replied counts in N as a non-match; infrastructure failures are excluded "
            "and listed in the last column. Click a header to sort.</p>"
        )
    )
    method += "".join(f"<p class='note'>{html.escape(n)}</p>" for n in out_of_n_notes(reports))
    sections = [
        "<h1>MIRRORING leaderboard</h1>",
        warnings,
        _table(HEADERS, leaderboard_rows(reports), "leaderboard"),
        method,
        "<h2>Match rate by emotion</h2>",
        _table(["emotion", *runs], _per_emotion_rows(reports), "by-emotion"),
        "<h2>Match rate by language</h2>",
        _table(["language", *runs], _per_language_rows(reports), "by-language"),
    ]
    if has_tasks(reports):
        sections += [
            "<h2>Timing by task</h2>",
            _table(TASK_HEADERS, task_rows(reports), "by-task"),
            f"<p class='note'>{html.escape(TASK_NOTE)}</p>",
        ]
    sections += [_image(p) for p in plots]
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>MIRRORING leaderboard"
        f"</title><style>{_STYLE}</style></head><body>{''.join(sections)}"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
