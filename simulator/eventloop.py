"""The event loop every paced command runs on: timers that wake to the microsecond.

asyncio's default selector on Linux waits with epoll, whose timeout is whole milliseconds
rounded up, so a frame due in 0.2 ms wakes its session about 1 ms late, and a send-time error of
0.5-1 ms is built into every frame whatever else the machine does. Here a wait with a timeout
first blocks in ``select()`` on the epoll descriptor itself (a timeout in microseconds; the
descriptor is readable when any socket it watches is), then collects the ready sockets from
epoll without waiting. One more system call per wait buys sub-millisecond wake-ups.
"""

from __future__ import annotations

import asyncio
import select
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["FineTimeoutSelector", "new_event_loop", "run"]

T = TypeVar("T")

_SELECT_FD_LIMIT = 1024  # select() cannot watch a descriptor at or above FD_SETSIZE


if hasattr(selectors, "EpollSelector"):

    class FineTimeoutSelector(selectors.EpollSelector):
        """An epoll selector whose timeouts are kept to the microsecond."""

        def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            fd = self.fileno()
            if timeout is not None and timeout > 0 and fd < _SELECT_FD_LIMIT:
                select.select([fd], [], [], timeout)
                timeout = 0
            return super().select(timeout)

    def new_event_loop() -> asyncio.AbstractEventLoop:
        """A selector event loop on ``FineTimeoutSelector``."""
        return asyncio.SelectorEventLoop(FineTimeoutSelector())

else:  # pragma: no cover - other platforms keep asyncio's own loop
    FineTimeoutSelector = None  # type: ignore[assignment,misc]

    def new_event_loop() -> asyncio.AbstractEventLoop:
        return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on a loop from ``new_event_loop``."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
