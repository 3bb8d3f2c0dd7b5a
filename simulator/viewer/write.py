"""Write a run's pages: ``index.html`` and ``sessions/<page name>.html``, each file atomically.

A full view writes every session's page and the index, and removes the pages in ``sessions/`` that
the viewer wrote for sessions the run no longer has (files it did not write are left alone). With
``sample`` only that session's page is written; the index is left alone unless there is none, or
the one there is itself partial (written with ``sample``): then it is (re)written, linking only the
sessions whose pages exist.

A session whose recording cannot be gathered or drawn still gets a page (what went wrong, and its
result row); the others and the index are written as usual.
"""

from __future__ import annotations

import logging
from pathlib import Path

from duplexsim.core.files import write_text_atomic
from duplexsim.core.runfolder import RunFolder
from duplexsim.viewer.data import RunView, load_run, load_session
from duplexsim.viewer.index import index_page
from duplexsim.viewer.layout import GENERATOR
from duplexsim.viewer.page import failure_page, session_page

__all__ = ["DEFAULT_MAX_EMBED_S", "SESSIONS_DIR", "write_view"]

SESSIONS_DIR = "sessions"
DEFAULT_MAX_EMBED_S = 600.0  # seconds of audio (three players together) one page may embed
_HEAD_BYTES = 4096  # where a page's generator and kind are
_log = logging.getLogger(__name__)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text)


def write_session(
    run: RunView,
    sample_id: str,
    out_dir: Path,
    *,
    max_embed_s: float | None = DEFAULT_MAX_EMBED_S,
    linked: set[str] | None = None,
) -> Path:
    path = out_dir / SESSIONS_DIR / run.page(sample_id)
    try:
        session = load_session(run, sample_id, max_embed_s=max_embed_s)
        text = session_page(run, session, path.parent, linked)
    except Exception as exc:  # one unreadable session must not cost the others their pages
        problem = f"{type(exc).__name__}: {exc}"
        _log.warning("%s: session %r: %s (its page says so)", run.run_dir, sample_id, problem)
        text = failure_page(run, run.row(sample_id), problem)
    _write(path, text)
    return path


def _page_kind(path: Path) -> str | None:
    """What the viewer wrote at ``path`` ("session", "index", "partial-index"); None for a file it
    did not write. Pages written before the kind was recorded count as sessions by their title."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_HEAD_BYTES)
    except OSError:
        return None
    if not head.startswith(b"<!doctype html>"):
        return None
    marker = f'<meta name="generator" content="{GENERATOR}"><meta name="duplexsim-page" content="'
    start = head.find(marker.encode())
    if start >= 0:
        kind = head[start + len(marker) :].split(b'"', 1)[0]
        return kind.decode("ascii", "replace")
    if " · duplexsim</title>".encode() in head and b"<title>" in head:
        return "session"  # an earlier viewer's session page
    return None


def _remove_stale_pages(run: RunView, sessions_dir: Path) -> None:
    current = {name.lower() for name in run.pages.values()}  # as a case-blind file system sees
    if not sessions_dir.is_dir():
        return
    for path in sessions_dir.glob("*.html"):
        if path.name.lower() not in current and path.is_file() and _page_kind(path) == "session":
            path.unlink(missing_ok=True)


def write_view(
    run_dir: RunFolder | Path,
    out_dir: Path | None = None,
    *,
    sample: str | None = None,
    scorer: str | None = None,
    max_embed_s: float | None = DEFAULT_MAX_EMBED_S,
) -> Path:
    """Write the index and every session page (or only ``sample``'s page); returns the index's
    path, or the session page's with ``sample``. ``max_embed_s``: above this many seconds of audio
    a page plays the bundle's files instead of embedding them (None: always embed)."""
    run = load_run(run_dir, scorer)
    out = out_dir if out_dir is not None else run.run_dir / "view"
    index = out / "index.html"
    if sample is not None:
        row = run.row(sample)  # an unknown sample fails before anything is written
        sessions = out / SESSIONS_DIR
        linked = {r.sample_id for r in run.rows if (sessions / run.page(r.sample_id)).is_file()}
        linked.add(row.sample_id)
        page = write_session(run, row.sample_id, out, max_embed_s=max_embed_s, linked=linked)
        if not index.exists() or _page_kind(index) == "partial-index":
            _write(index, index_page(run, SESSIONS_DIR, linked))
        return page
    for r in run.rows:
        write_session(run, r.sample_id, out, max_embed_s=max_embed_s)
    _remove_stale_pages(run, out / SESSIONS_DIR)
    _write(index, index_page(run, SESSIONS_DIR))
    return index
