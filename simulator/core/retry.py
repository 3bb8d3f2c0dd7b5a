"""The one retry policy: which failures are retried, how long to wait before each attempt, and
how fast to start sessions under what a provider says of its limits (pure: callers give the
time).

A refusal for the provider's rate limits is not a failed attempt: it makes the whole run slow
down (``ProviderPacing``), and the refused session waits its turn and starts again, up to
``max_rate_limited`` refusals per sample.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["ProviderLimit", "ProviderPacing", "RetryPolicy"]

DEFAULT_WINDOW_S = 60.0  # a limit that does not say when it resets: per minute, as they mostly are


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    base_s: float = 1.0
    max_s: float = 30.0
    jitter: float = 0.25  # share of the delay drawn at random, so retries do not stampede
    max_rate_limited: int = 20  # refusals for rate limits a sample waits out before it fails

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
        return self.backoff(attempt, retry_after_s, rng)

    def backoff(
        self, attempt: int, retry_after_s: float | None = None, rng: random.Random | None = None
    ) -> float:
        """The wait after failure number ``attempt`` (from 1): the server's retry-after, else
        ``base_s`` doubling per failure with jitter; capped at ``max_s`` either way."""
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


@dataclass
class ProviderPacing:
    """When the next session may start, from what the provider said of its limits and how it
    refused (pure: every call takes the time).

    - Each limit it said (``said``) allows ``remaining`` more of its unit before its window
      resets: a start costs one request, and ``tokens_per_session`` tokens where that is known.
      Starts are spread over the time left in the window, so the run stays under what remains
      rather than spending it at once and then stopping; with nothing left they wait for the
      reset. A window past its reset no longer holds anything back.
    - A refusal (``refused``) holds every start back for the provider's retry-after, or the
      policy's back-off doubling with each refusal in a row, and halves how many sessions may
      run at once (``window``); each session the provider takes (``took``) lets one more run.
    """

    policy: RetryPolicy = field(default_factory=RetryPolicy)
    tokens_per_session: float | None = None
    window: float = math.inf  # sessions at once the provider takes (inf: no refusal yet)
    hold_until: float = -math.inf  # no start before this (a refusal's back-off)
    refusals: int = 0  # refusals in a row
    last_start: float = -math.inf
    _limits: dict[str, tuple[ProviderLimit, float, int]] = field(default_factory=dict)
    _starts: int = 0

    def said(self, limits: Iterable[ProviderLimit], now: float) -> None:
        """The provider's latest word on its limits (it counts every start made so far)."""
        for limit in limits:
            self._limits[limit.name] = (limit, now, self._starts)

    def started(self, now: float) -> None:
        self._starts += 1
        self.last_start = now

    def took(self) -> None:
        """A session the provider accepted (it was not refused)."""
        self.refusals = 0
        if self.window != math.inf:
            self.window += 1.0

    def refused(
        self,
        now: float,
        in_flight: int,
        retry_after_s: float | None = None,
        rng: random.Random | None = None,
    ) -> float:
        """A start refused for the rate limits, with ``in_flight`` sessions running (itself
        included); returns the back-off it set."""
        self.refusals += 1
        delay = self.policy.backoff(self.refusals, retry_after_s, rng)
        self.hold_until = max(self.hold_until, now + delay)
        self.window = max(1.0, min(self.window, float(in_flight)) / 2.0)
        return delay

    def wait(self, now: float, in_flight: int) -> float:
        """Seconds until a start may go (0: now; inf: once a running session ends)."""
        waits = [self.hold_until - now]
        if self.window != math.inf and in_flight >= math.floor(self.window):
            waits.append(math.inf)
        for name, (limit, at, starts_then) in self._limits.items():
            cost = 1.0 if name == "requests" else self.tokens_per_session
            if cost is None or limit.remaining is None:
                continue
            waits.append(self._limit_wait(limit, at, starts_then, cost, now))
        return max(0.0, *waits)

    def _limit_wait(
        self, limit: ProviderLimit, at: float, starts_then: int, cost: float, now: float
    ) -> float:
        reset_at = at + (DEFAULT_WINDOW_S if limit.reset_s is None else limit.reset_s)
        if now >= reset_at:
            return 0.0  # the window has refilled
        assert limit.remaining is not None
        left = limit.remaining - cost * (self._starts - starts_then)
        if left < cost:
            return reset_at - now
        spacing = (reset_at - now) / (left / cost)
        return self.last_start + spacing - now
