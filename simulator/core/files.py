"""Files written so that a reader never sees half of one: a temporary file beside the target,
then a rename over it."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

__all__ = ["temp_beside", "write_text_atomic"]


def temp_beside(target: Path) -> Path:
    """A new empty file next to ``target`` with the umask's mode (a plain write's)."""
    # Not tempfile.mkstemp: its 0600 mode would survive os.replace; os.open honours the umask.
    while True:
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.tmp")
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        except FileExistsError:
            continue
        return tmp


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file beside it."""
    tmp = temp_beside(path)
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
