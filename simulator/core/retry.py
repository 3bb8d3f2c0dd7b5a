"""The one retry policy: which failures are retried, how long to wait before each attempt, and
how fast to start sessions under what a provider says of its limits."""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["ProviderLimit", "RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    base_s: float = 1.0
    max_s: float = 30.0
    jitter: float = 0.25  # share of the delay drawn at random, so retries do not stampede

    def delay(
        self,
        attempt: int,
        *,
        retryable: bool,
        retry_after_s: float | None = None,
        rng: random.Random | None = None,
    ) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``; None when no further attempt is allowed.

        ``attempt`` counts from 1 (the attempt that just failed). A server's retry-after wins over
        the backoff, capped at ``max_s``.
        """
        if not retryable or attempt >= self.max_attempts:
            return None
        if retry_after_s is not None:
            return float(min(max(retry_after_s, 0.0), self.max_s))
        backoff = float(min(self.base_s * 2.0 ** (attempt - 1), self.max_s))
        spread = (rng or random.Random()).uniform(-self.jitter, self.jitter) * backoff
        return max(0.0, backoff + spread)


@dataclass(frozen=True)
class ProviderLimit:
    """One of a provider's rate limits as it said it (OpenAI's ``rate_limits.updated``, or
    ``x-ratelimit-*`` headers): ``name`` is "requests" or "tokens", per the provider's window;
    ``reset_s`` counts from when it was said."""

    name: str
    limit: int | None = None
    remaining: int | None = None
    reset_s: float | None = None
