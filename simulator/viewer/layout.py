"""What both kinds of page share: the document shell, number formats, badges and file names."""

from __future__ import annotations

import hashlib
import html
import math
import re
from collections import Counter
from collections.abc import Iterable

from duplexsim.report.data import RunReport
from duplexsim.report.tables import NOT_COMPARABLE
from duplexsim.viewer.style import STYLE

__all__ = [
    "badge",
    "document",
    "esc",
    "fmt_ms",
    "fmt_num",
    "fmt_s",
    "match_text",
    "page_names",
    "scorer_notice",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_LEADING_DOTS = re.compile(r"^\.+")
MAX_STEM = 80  # characters of the id kept in a file name
HASH_CHARS = 10
# names Windows reserves whatever follows them ("con.html" included)
_RESERVED = {"con", "prn", "aux", "nul", *(f"{d}{i}" for d in ("com", "lpt") for i in range(10))}
GENERATOR = "duplexsim view"  # in every page's head: how the viewer knows the files it wrote


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def page_names(sample_ids: Iterable[str]) -> dict[str, str]:
    """Each session page's file name, unique within the run even where the file system ignores
    case: the id itself when it is a plain name ([A-Za-z0-9._-], no leading dot, not reserved on
    Windows, at most MAX_STEM characters) that no other id's name equals but for case; else the
    id made safe plus ``~`` and a short hash of the exact id ("a b" -> ``a_b~<hash>.html``). A
    safe id never holds ``~``, so a hashed name never equals a plain one."""
    stems = {sid: _stem(sid) for sid in dict.fromkeys(sample_ids)}
    folded = Counter(stem.lower() for stem in stems.values())
    names = {
        sid: f"{stem}~{_digest(sid, HASH_CHARS)}.html"
        if stem != sid or folded[stem.lower()] > 1
        else f"{stem}.html"
        for sid, stem in stems.items()
    }
    taken = Counter(name.lower() for name in names.values())
    for sid, name in names.items():
        if taken[name.lower()] > 1:  # two ids whose short hashes agree: the whole hash
            names[sid] = f"{stems[sid]}~{_digest(sid, 64)}.html"
    return names


def _stem(sample_id: str) -> str:
    stem = _UNSAFE.sub("_", sample_id)[:MAX_STEM]
    stem = _LEADING_DOTS.sub(lambda m: "_" * len(m.group()), stem)  # never hidden, never ".."
    if not stem or stem.split(".")[0].lower() in _RESERVED:
        stem = "_" + stem
    return stem


def _digest(sample_id: str, chars: int) -> str:
    return hashlib.sha256(sample_id.encode("utf-8", "surrogatepass")).hexdigest()[:chars]


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
    scored = (
        f'<p class="sub">Scored with <b>{esc(report.identity.label())}</b> on benchmark '
        f"<b>{esc(report.benchmark.label)}</b>.</p>"
    )
    if report.comparable:
        return scored
    warn = esc(NOT_COMPARABLE.format(scorer=report.scorer))
    return f'<div class="alert warn">{warn}</div>{scored}'


def document(
    title: str, body: str, script: str, data: str | None = None, *, kind: str = "page"
) -> str:
    """A complete page: inline style and script, nothing fetched from anywhere. ``kind`` is
    recorded in the head beside the generator (see ``write``)."""
    embedded = f'<script id="session-data" type="application/json">{data}</script>' if data else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="generator" content="{GENERATOR}"><meta name="duplexsim-page" '
        f'content="{esc(kind)}"><meta name="viewport" content="width=device-width, '
        f'initial-scale=1"><title>{esc(title)}</title><style>{STYLE}</style></head>'
        f"<body><main>{body}</main>{embedded}<script>{script}</script></body></html>\n"
    )
