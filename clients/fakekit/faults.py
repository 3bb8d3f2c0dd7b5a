"""Faults a fake server can inject, shared by every fake server whatever its protocol.

Handshake faults are decided by ``Faults.admit`` once per connection attempt. Media faults trigger
once the server has received a given amount of input audio (media time, not wall time), so tests
that feed audio faster than real time see them at the same point of the stream. Only
``extra_latency_s`` and the rate limit are wall time: the server's I/O layer applies the first;
the second counts the connections accepted in the last ``rate_window_s``.

A rate limit (``rate_limit`` connections per ``rate_window_s``) is reported the way OpenAI
reports its own: ``x-ratelimit-{limit,remaining,reset}-requests`` headers on every handshake's
answer, and the same figures in the fake's ``rate_limits.updated`` where its protocol has one;
past it a handshake gets 429 with a Retry-After of the time until a connection leaves the window.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from duplexsim.clients.fakekit.serveractions import Action, Close, Send, Stall

__all__ = ["Faults", "MediaFaults", "Rejection"]


@dataclass(frozen=True)
class Rejection:
    """An HTTP answer instead of the WebSocket upgrade."""

    status: int
    headers: dict[str, str]
    body: str


@dataclass
class Faults:
    """Every field is optional; the defaults inject nothing. One instance serves all connections
    to a server, so ``connections`` counts attempts across them (refused ones included)."""

    refuse_status: int | None = None  # reject every handshake with this HTTP status (401, 503, ...)
    rate_limit_first: int = 0  # reject the first N attempts with 429 and Retry-After
    retry_after_s: float = 1.0  # Retry-After value for those 429s (fractions allowed, for tests)
    close_after_s: float | None = None  # close with 1011 once this much input media has arrived
    stall_after_s: float | None = None  # then send nothing and stop reading; socket stays open
    malformed_after_s: float | None = None  # then send one malformed text message ...
    malformed_then_close: bool = False  # ... and close (1011) instead of carrying on
    extra_latency_s: float = 0.0  # wall-clock delay added to every outgoing message
    rate_limit: int = 0  # accept at most this many connections per rate_window_s (0: no limit)
    rate_window_s: float = 60.0
    connections: int = field(default=0, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)
    _accepted: deque[float] = field(default_factory=deque, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.refuse_status is not None and not 400 <= self.refuse_status <= 599:
            raise ValueError(f"refuse_status must be 400..599, not {self.refuse_status}")
        if not self.rate_window_s > 0:
            raise ValueError(f"rate_window_s must be positive, not {self.rate_window_s}")
        for name in ("rate_limit_first", "retry_after_s", "extra_latency_s", "rate_limit"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        for name in ("close_after_s", "stall_after_s", "malformed_after_s"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must not be negative")

    def admit(self) -> Rejection | None:
        """Count one connection attempt; the HTTP rejection to send, or None to accept it."""
        self.connections += 1
        if self.refuse_status is not None:
            return Rejection(self.refuse_status, {}, "refused by fault injection\n")
        if self.connections <= self.rate_limit_first:
            headers = {"Retry-After": f"{self.retry_after_s:g}"}
            return Rejection(429, headers, "rate limited by fault injection\n")
        if self.rate_limit:
            now = self._window()
            if len(self._accepted) >= self.rate_limit:
                wait = self._accepted[0] + self.rate_window_s - now
                headers = {"Retry-After": f"{max(wait, 0.001):.3f}", **self.limit_headers()}
                body = "Rate limit reached for requests (fault injection)\n"
                return Rejection(429, headers, body)
            self._accepted.append(now)
        return None

    def _window(self) -> float:
        """Now, with the connections that have left the window forgotten."""
        now = self.clock()
        while self._accepted and self._accepted[0] <= now - self.rate_window_s:
            self._accepted.popleft()
        return now

    def requests_left(self) -> tuple[int, int, float] | None:
        """(limit, remaining, seconds to the next refill) of the rate limit; None: no limit."""
        if not self.rate_limit:
            return None
        now = self._window()
        reset = self._accepted[0] + self.rate_window_s - now if self._accepted else 0.0
        return self.rate_limit, self.rate_limit - len(self._accepted), max(reset, 0.0)

    def limit_headers(self) -> dict[str, str]:
        """The rate limit as OpenAI's headers say theirs (none without a limit)."""
        left = self.requests_left()
        if left is None:
            return {}
        limit, remaining, reset = left
        return {
            "x-ratelimit-limit-requests": str(limit),
            "x-ratelimit-remaining-requests": str(remaining),
            "x-ratelimit-reset-requests": f"{math.ceil(reset * 1000)}ms",
        }

    @staticmethod
    def reached(threshold_s: float | None, received_s: float) -> bool:
        """Whether a media fault at ``threshold_s`` is due after ``received_s`` of input."""
        return threshold_s is not None and received_s >= threshold_s


_CLOSING = (Close(1011, "injected fault: close_after_s"),)
_BROKEN = Close(1011, "injected fault: malformed_after_s")


class MediaFaults:
    """One connection's media faults as a fake's actions, the same for every protocol: a close
    or a stall once enough input has arrived, and one malformed message. ``finished`` turns True
    with the first action that ends the connection, so the fake can stop answering.

    A protocol whose service ends a session its own way says how: ``closing``, the actions of
    ``close_after_s`` (by default a 1011 close); ``broken``, the close after a malformed message
    when ``malformed_then_close`` asks for one."""

    def __init__(
        self, faults: Faults, *, closing: Sequence[Action] = _CLOSING, broken: Close = _BROKEN
    ) -> None:
        self._faults = faults
        self._closing = list(closing)
        self._broken = broken
        self._malformed_sent = False
        self.finished = False

    def stop(self, received_s: float) -> list[Action]:
        """The close or stall due after ``received_s`` of input; empty while none is."""
        if Faults.reached(self._faults.close_after_s, received_s):
            self.finished = True
            return list(self._closing)
        if Faults.reached(self._faults.stall_after_s, received_s):
            self.finished = True
            return [Stall()]
        return []

    def malformed(self, received_s: float, garbage: Callable[[], str | bytes]) -> list[Action]:
        """The malformed message ``garbage`` makes, once it is due (built only then: some depend
        on the session's state), and the close that may follow it."""
        if self._malformed_sent or not Faults.reached(self._faults.malformed_after_s, received_s):
            return []
        self._malformed_sent = True
        actions: list[Action] = [Send(garbage())]
        if self._faults.malformed_then_close:
            self.finished = True
            actions.append(self._broken)
        return actions
