"""What both kinds of page share: the document shell, number formats, badges and file names."""

from __future__ import annotations

import html
import math
import re

from simulator.report.data import RunReport
from simulator.report.tables import NOT_COMPARABLE
from simulator.viewer.style import STYLE

__all__ = [
    "badge",
    "document",
    "esc",
    "fmt_ms",
    "fmt_num",
    "fmt_s",
    "match_text",
    "page_name",
    "scorer_notice",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def page_name(sample_id: str) -> str:
    """The session page's file name; ids are already [A-Za-z0-9._-] in a valid benchmark."""
    return _UNSAFE.sub("_", sample_id).lstrip(".") + ".html"


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def fmt_s(x: float | None, digits: int = 3) -> str:
    return f"{x:.{digits}f} s" if x is not None and _finite(x) else "–"


def fmt_ms(x_s: float | None) -> str:
    return f"{x_s * 1000:.0f} ms" if x_s is not None and _finite(x_s) else "–"


def fmt_num(x: float | int | None, fmt: str = "{:,.1f}") -> str:
    return fmt.format(x) if x is not None and _finite(float(x)) else "–"


def match_text(match: bool | None) -> str:
    return "–" if match is None else ("yes" if match else "no")


def badge(text: str, kind: str | None = None) -> str:
    css = kind if kind is not None else text
    return f'<span class="badge {esc(css)}">{esc(text)}</span>'


def scorer_notice(report: RunReport | None, run_dir: str) -> str:
    """Which scorer the scores come from, its caveat, or how to score the run."""
    if report is None:
        return (
            '<div class="alert info">This run has not been scored yet: run '
            f"<code>duplexsim score {esc(run_dir)}</code>, then view it again.</div>"
        )
    if report.comparable:
        return f'<p class="sub">Scored with <b>{esc(report.scorer)}</b>.</p>'
    return f'<div class="alert warn">{esc(NOT_COMPARABLE.format(scorer=report.scorer))}</div>'


def document(title: str, body: str, script: str, data: str | None = None) -> str:
    """A complete page: inline style and script, nothing fetched from anywhere."""
    embedded = f'<script id="session-data" type="application/json">{data}</script>' if data else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>"
        f"<body><main>{body}</main>{embedded}<script>{script}</script></body></html>\n"
    )
