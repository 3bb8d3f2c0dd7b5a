"""Starts held to a provider's limits: the asyncio side of ``ProviderPacing`` for one run.

A session asks for its turn before it starts (``turn``), says it started, and says how it ended
(``ended``): a refusal for the rate limits holds every start of the run back and halves how many
run at once; a session the provider took lets one more run. What the provider says of its limits
(``said``: ``rate_limits.updated``, the handshake's headers) paces the starts under what remains.
"""

from __future__ import annotations

import asyncio

from duplexsim.core.retry import ProviderLimit, ProviderPacing, RetryPolicy

__all__ = ["ProviderGate"]

POLL_S = 0.05  # how often a held start looks again


class ProviderGate:
    def __init__(self, policy: RetryPolicy, tokens_per_session: float | None = None) -> None:
        self.pacing = ProviderPacing(policy, tokens_per_session)
        self.in_flight = 0

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def turn(self) -> float:
        """Returns once a session may start (call ``started`` then); the seconds it waited."""
        began = self._now()
        while (wait := self.pacing.wait(self._now(), self.in_flight)) > 0:
            await asyncio.sleep(min(wait, POLL_S))
        return self._now() - began

    def started(self) -> None:
        self.in_flight += 1
        self.pacing.started(self._now())

    def ended(self, rate_limited: bool, retry_after_s: float | None = None) -> float:
        """A started session ended (refused for the rate limits or not); returns the back-off
        a refusal set (0 otherwise)."""
        delay = 0.0
        if rate_limited:
            delay = self.pacing.refused(self._now(), self.in_flight, retry_after_s)
        else:
            self.pacing.took()
        self.in_flight -= 1
        return delay

    def said(self, limits: tuple[ProviderLimit, ...]) -> None:
        self.pacing.said(limits, self._now())
