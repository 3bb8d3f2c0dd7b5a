"""What a fake server's pure protocol object asks its I/O shell to do (clients/fakeserver.py)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Action", "Close", "Send", "Stall"]


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


Action = Send | Close | Stall
