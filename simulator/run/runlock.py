"""One writer per run id: a lock held for as long as a process writes a run.

The locks are ``flock`` locks on files in the run's folder; the kernel drops them when the
process ends however it ends (kill -9 included), so no stale lock survives a crash. A whole run
holds the run lock exclusively; a shard holds it shared, plus its own shard lock exclusively:
the shards of one run id still run side by side, but the same shard twice, or a whole run beside
a shard, is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from duplexsim.core.errors import ConfigError

__all__ = ["RUN_LOCK", "run_lock"]

RUN_LOCK = ".writer.lock"


@contextlib.contextmanager
def run_lock(run_dir: Path, run_id: str, shard: tuple[int, int] | None) -> Iterator[None]:
    """Hold the run's write locks; ConfigError when another process writes the same part."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(_flock(run_dir / RUN_LOCK, run_id, exclusive=shard is None))
        if shard is not None:
            lock = run_dir / f".writer-shard{shard[0]}of{shard[1]}.lock"
            stack.enter_context(_flock(lock, run_id, exclusive=True))
        yield


@contextlib.contextmanager
def _flock(path: Path, run_id: str, *, exclusive: bool) -> Iterator[None]:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot create the run's lock ({exc.strerror})") from None
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            who = f"another process (pid {holder})" if holder else "other processes (shards)"
            raise ConfigError(
                f"run '{run_id}' is being written by {who}; wait for it, or choose another --run-id"
            ) from None
        if exclusive:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        try:
            yield
        finally:
            if exclusive:
                os.ftruncate(fd, 0)  # a pid left behind would name a process long gone
    finally:
        os.close(fd)  # closing the descriptor releases the lock
