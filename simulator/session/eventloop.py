"""The event loop every paced command runs on: timers that wake to the microsecond.

asyncio's default selector on Linux waits with epoll, whose timeout is whole milliseconds
rounded up, so a frame due in 0.2 ms wakes its session about 1 ms late, and a send-time error of
0.5-1 ms is built into every frame whatever else the machine does. Here a wait with a timeout
first blocks in ``select()`` on the epoll descriptor itself (a timeout in microseconds; the
descriptor is readable when any socket it watches is), then collects the ready sockets from
epoll without waiting. One more system call per wait buys sub-millisecond wake-ups.

The selector also records the loop's stalls (``duplexsim.core.stalls``): each iteration that ran its
callbacks for longer than a moment, each wait that ended later than its timeout asked, and the
time the thread, woken from a wait, stood in the run queue. Two clock readings per iteration and
one small read of the thread's schedstat per wait; ``stall_log`` gives them to whoever needs to
know how far the loop could be trusted at an instant.
"""

from __future__ import annotations

import asyncio
import os
import select
import selectors
import threading
import time
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

from duplexsim.core.stalls import MIN_STALL_S, StallLog

__all__ = ["FineTimeoutSelector", "keep_stall_log", "new_event_loop", "run", "stall_log"]

T = TypeVar("T")

_SELECT_FD_LIMIT = 1024  # select() cannot watch a descriptor at or above FD_SETSIZE


class RunQueueWait:
    """How long this thread has waited for a core, runnable but not running, since the last
    call (Linux's schedstat ``run_delay``; 0.0 where the system does not say). A loop woken by a
    socket cannot see that wait in its own clock readings: the bytes were there, the thread
    was not running."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._thread: int | None = None
        self._last = 0

    def since_last(self) -> float:
        if self._thread is None:  # opened by the thread that uses it: the figures are per thread
            self._thread = threading.get_ident()
            try:
                self._fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
            except OSError:
                return 0.0
            self._last = self._read()
            return 0.0
        if self._fd is None or threading.get_ident() != self._thread:
            return 0.0
        now = self._read()
        waited, self._last = now - self._last, now
        return waited / 1e9

    def _read(self) -> int:
        assert self._fd is not None
        try:
            return int(os.pread(self._fd, 64, 0).split()[1])
        except (OSError, ValueError, IndexError):
            return self._last

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


if hasattr(selectors, "EpollSelector"):

    class FineTimeoutSelector(selectors.EpollSelector):
        """An epoll selector whose timeouts are kept to the microsecond, and which notes the
        loop's stalls in ``stalls``: iterations that ran callbacks for a while, waits that ended
        later than their timeout, and the time the thread, woken, waited for a core (which a
        wake-up by a socket hides: ``RunQueueWait``)."""

        def __init__(self) -> None:
            super().__init__()
            self.stalls = StallLog()
            self._returned: float | None = None  # when the last select returned
            self._queue = RunQueueWait()

        def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            called = time.monotonic()
            if self._returned is not None and called - self._returned >= MIN_STALL_S:
                self.stalls.note(self._returned, called)  # callbacks ran all that time
            fd = self.fileno()
            wait = timeout
            if timeout is not None and timeout > 0 and fd < _SELECT_FD_LIMIT:
                select.select([fd], [], [], timeout)
                timeout = 0
            ready = super().select(timeout)
            self._returned = returned = time.monotonic()
            if wait is not None and returned - called - wait >= MIN_STALL_S:
                self.stalls.note(called + wait, returned)  # woken late: not scheduled in time
            if wait is None or wait > 0:  # it slept: how long did it wait for a core, woken?
                queued = self._queue.since_last()
                if queued >= MIN_STALL_S:
                    self.stalls.note(returned - queued, returned)
            return ready

        def close(self) -> None:
            self._queue.close()
            super().close()

    def new_event_loop() -> asyncio.AbstractEventLoop:
        """A selector event loop on ``FineTimeoutSelector``."""
        selector = FineTimeoutSelector()
        loop = asyncio.SelectorEventLoop(selector)
        keep_stall_log(loop, selector.stalls)
        return loop

else:  # pragma: no cover - other platforms keep asyncio's own loop, whose stalls are not known
    FineTimeoutSelector = None  # type: ignore[assignment,misc]

    def new_event_loop() -> asyncio.AbstractEventLoop:
        return asyncio.new_event_loop()


_logs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, StallLog] = weakref.WeakKeyDictionary()


def keep_stall_log(loop: asyncio.AbstractEventLoop, log: StallLog) -> None:
    """``log`` holds the stalls of ``loop`` (``new_event_loop``'s loops; a loop on a virtual clock,
    which never stalls, keeps an empty one)."""
    _logs[loop] = log


def stall_log(loop: asyncio.AbstractEventLoop | None = None) -> StallLog | None:
    """The stalls of ``loop`` (default: the running one); None for a loop that records none
    (asyncio's own): what it added to a session's latency is not known."""
    return _logs.get(loop or asyncio.get_running_loop())


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on a loop from ``new_event_loop``."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
