"""Scoring-service errors: one class with a short machine-readable code and a retry flag.

Every failure the service reports travels as a reply with ``code``, ``error`` and ``retryable``
(see ``wire``); ``ScoringError`` is the same triple as an exception, for code that raises.
"""

from __future__ import annotations

from duplexsim.core.errors import DuplexsimError

__all__ = [
    "BAD_REQUEST",
    "BUSY",
    "DEADLINE",
    "INVALID_CLIP",
    "RETRYABLE_CODES",
    "SCORER_FAILED",
    "TIMEOUT",
    "UNKNOWN_SCORER",
    "WORKER_LOST",
    "ScoringError",
    "WireError",
]

BUSY = "busy"  # the broker's queue is full: back off and retry
DEADLINE = "deadline"  # the request's deadline passed before it was scored
BAD_REQUEST = "bad-request"  # the message breaks the wire format
INVALID_CLIP = "invalid-clip"  # this clip cannot be scored (empty, NaN, over-long); others can
UNKNOWN_SCORER = "unknown-scorer"  # the worker does not serve that scorer
SCORER_FAILED = "scorer-failed"  # the scorer raised while scoring this item's batch
WORKER_LOST = "worker-lost"  # workers died holding this request too many times (poison clip?)
TIMEOUT = "timeout"  # the client heard nothing back in time (broker down, wrong CURVE key)

RETRYABLE_CODES = frozenset({BUSY, SCORER_FAILED, TIMEOUT})


class ScoringError(DuplexsimError):
    """A scoring request failed; ``code`` says why and ``retryable`` whether trying again may help."""

    code: str = "scoring"

    def __init__(self, message: str, *, code: str | None = None, retryable: bool | None = None):
        if code is not None:
            self.code = code
        super().__init__(
            message, retryable=self.code in RETRYABLE_CODES if retryable is None else retryable
        )


class WireError(ScoringError):
    """A message that breaks the wire format; never retryable (the same bytes fail again)."""

    code = BAD_REQUEST

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)
