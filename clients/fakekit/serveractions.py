"""What a fake server's pure protocol object asks its I/O shell to do (clients/fakeserver.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["Action", "Burst", "Close", "Send", "Stall", "expand"]


@dataclass(frozen=True)
class Send:
    message: str | bytes


@dataclass(frozen=True)
class Close:
    code: int
    reason: str


@dataclass(frozen=True)
class Stall:
    """Send nothing more and stop reading, leaving the connection open."""


@dataclass(frozen=True)
class Burst:
    """Messages sent back to back, each built only when the one before it is out: the first
    message of a long reply then leaves without waiting for the rest to be encoded."""

    messages: Iterable[str | bytes]


Action = Send | Close | Stall | Burst


def expand(actions: Iterable[Action]) -> Iterator[Send | Close | Stall]:
    """Actions with every burst spelled out as its sends (for inspection)."""
    for action in actions:
        if isinstance(action, Burst):
            yield from (Send(m) for m in action.messages)
        else:
            yield action
