"""Wakes a fake's conversation when its wall clock next has something due (a reply generated on
while the client sends nothing): the one timer per connection every transport of the kit keeps."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from duplexsim.clients.fakekit.declare import Conversation

__all__ = ["Ticker"]

RETRY_S = 0.001  # a tick that made nothing due waits this long before the next: never a spin


class Ticker:
    """``on_tick(now)`` at the conversation's ``wake_at``. One timer at a time, moved only
    earlier: while input flows the wake-up lies a lapse ahead and fires early at most once per
    lapse (no timer churn per message)."""

    def __init__(self, conversation: Conversation, on_tick: Callable[[float], None]) -> None:
        self._conversation = conversation
        self._on_tick = on_tick
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._stopped = False

    def arm(self, soonest: float = 0.0) -> None:
        """Set the timer for the conversation's next wake-up, unless it is set earlier."""
        if self._stopped:
            return
        at = self._conversation.wake_at()
        if at is None or (self._timer is not None and self._timer.when() <= at):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_at(max(at, soonest), self._fire)

    def cancel(self) -> None:
        """Stop for good: the connection is over."""
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        self._timer = None
        now = self._loop.time()
        self._on_tick(now)
        self.arm(now + RETRY_S)
