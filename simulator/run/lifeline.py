"""Children end with the process that started them, however it ends (kill -9 included).

A helper process (a pool worker, a served fake model) watches its owner and exits as soon as the
owner is gone. Pool workers are children of multiprocessing's forkserver, not of the run, and
they keep the forkserver and the resource tracker alive (both wait for every holder of their
pipes): once the workers go, those two go as well.

The watch waits on a pidfd (Linux 5.3+), which becomes readable when the process exits; where
there is none it polls every half second.
"""

from __future__ import annotations

import os
import select
import threading
import time

__all__ = ["OWNER_ENV", "owner_env", "watch_owner", "watch_owner_from_env"]

OWNER_ENV = "DUPLEXSIM_OWNER_PID"
_POLL_S = 0.5
_EXIT_CODE = 143  # as if ended by SIGTERM


def owner_env() -> dict[str, str]:
    """Environment entries that tell a child started from here who its owner is."""
    return {OWNER_ENV: str(os.getpid())}


def watch_owner_from_env() -> None:
    """In a child started with ``owner_env``: exit when that owner exits."""
    pid = os.environ.get(OWNER_ENV, "")
    if pid.isdecimal():
        watch_owner(int(pid))


def watch_owner(pid: int) -> None:
    """Exit this process (without cleanup: it is an orphan) once process ``pid`` is gone."""
    if pid == os.getpid():
        return
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(_EXIT_CODE)  # gone already
    except (AttributeError, OSError):
        fd = None
    threading.Thread(target=_wait_then_exit, args=(pid, fd), name="lifeline", daemon=True).start()


def _wait_then_exit(pid: int, fd: int | None) -> None:
    if fd is not None:
        select.select([fd], [], [])
    else:
        while _alive(pid):
            time.sleep(_POLL_S)
    os._exit(_EXIT_CODE)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
