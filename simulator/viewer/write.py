"""Write a run's pages: ``index.html`` and ``sessions/<sample-id>.html``, each file atomically."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from simulator.viewer.data import RunView, load_run, load_session
from simulator.viewer.index import index_page
from simulator.viewer.layout import page_name
from simulator.viewer.page import session_page

__all__ = ["SESSIONS_DIR", "write_view"]

SESSIONS_DIR = "sessions"


def _atomic_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would survive the rename
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_session(run: RunView, sample_id: str, out_dir: Path) -> Path:
    session = load_session(run, sample_id)
    path = out_dir / SESSIONS_DIR / page_name(run.row(sample_id).sample_id)
    _atomic_text(path, session_page(run, session))
    return path


def write_view(
    run_dir: Path,
    out_dir: Path | None = None,
    *,
    sample: str | None = None,
    scorer: str | None = None,
) -> Path:
    """Write the index and every session page (or only ``sample``'s page, with the index);
    returns the index's path, or the session page's with ``sample``."""
    run = load_run(run_dir, scorer)
    out = out_dir if out_dir is not None else run_dir / "view"
    if sample is not None:
        run.row(sample)  # an unknown sample fails before anything is written
        page = write_session(run, sample, out)
        _atomic_text(out / "index.html", index_page(run, SESSIONS_DIR))
        return page
    for row in run.rows:
        write_session(run, row.sample_id, out)
    index = out / "index.html"
    _atomic_text(index, index_page(run, SESSIONS_DIR))
    return index
