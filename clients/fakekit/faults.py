"""Faults a fake server can inject, shared by every fake server whatever its protocol.

Handshake faults are decided by ``Faults.admit`` once per connection attempt. Media faults trigger
once the server has received a given amount of input audio (media time, not wall time), so tests
that feed audio faster than real time see them at the same point of the stream. Only
``extra_latency_s`` is wall time; the server's I/O layer applies it.
"""

from __future__ import annotations

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
    connections: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        if self.refuse_status is not None and not 400 <= self.refuse_status <= 599:
            raise ValueError(f"refuse_status must be 400..599, not {self.refuse_status}")
        for name in ("rate_limit_first", "retry_after_s", "extra_latency_s"):
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
        return None

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
