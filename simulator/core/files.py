"""Files written so that a reader never sees half of one: a temporary file beside the target,
then a rename over it."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from duplexsim.core.errors import StorageError

__all__ = ["temp_beside", "write_bytes_atomic", "write_text_atomic"]


def temp_beside(target: Path) -> Path:
    """A new empty file next to ``target`` with the umask's mode (a plain write's); a
    StorageError naming ``target`` where its folder cannot take one."""
    # Not tempfile.mkstemp: its 0600 mode would survive os.replace; os.open honours the umask.
    while True:
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.tmp")
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        except FileExistsError:
            continue
        except OSError as exc:
            raise StorageError(target, exc) from None
        return tmp


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file beside it."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it; a full or read-only disk
    is a StorageError naming ``path``, and leaves ``path`` as it was."""
    tmp = temp_beside(path)
    try:
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError as exc:
            raise StorageError(path, exc) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
