"""``run --max-cost``: a sample starts only while what the run has spent, what its sessions in
flight are expected to spend and what this one is expected to spend stay within the cap.

The cap is on the whole run: the samples recorded by earlier invocations count as spent, so an
interrupted run resumes (same ``--run-id``) under a larger cap, or none. When the next sample does
not fit and nothing is in flight to free room, no further sample starts: the run stops with
``BudgetReached`` once the sessions under way are recorded, like any interrupted run. A sample
that has started finishes its retries.
"""

from __future__ import annotations

import asyncio

from duplexsim.core.errors import DuplexsimError
from duplexsim.core.prices import format_amount

__all__ = ["Budget", "BudgetReached"]


class BudgetReached(DuplexsimError):
    """The run stopped starting samples at its ``--max-cost``; it resumes like any interrupted run."""

    def __init__(self, message: str, *, not_started: int, spent: float) -> None:
        super().__init__(message)
        self.not_started = not_started
        self.spent = spent


class Budget:
    def __init__(self, cap: float, spent: float, currency: str = "") -> None:
        self.cap = cap
        self.spent = spent
        self.currency = currency
        self.in_flight: dict[str, float] = {}
        self.closed = False  # a sample did not fit with nothing in flight: no more starts
        self.not_started = 0
        self._changed = asyncio.Condition()

    def fits(self, expected: float) -> bool:
        return self.spent + sum(self.in_flight.values()) + expected <= self.cap + 1e-12

    async def admit(self, key: str, expected: float) -> bool:
        """Whether sample ``key`` (expected to cost ``expected``) may start; waits while
        sessions in flight may free room."""
        async with self._changed:
            while not self.closed and not self.fits(expected):
                if not self.in_flight:
                    self.closed = True
                    break
                await self._changed.wait()
            if self.closed:
                self.not_started += 1
                return False
            self.in_flight[key] = expected
            return True

    async def settle(self, key: str, cost: float) -> None:
        """Sample ``key`` is recorded; it cost ``cost`` over all its attempts."""
        async with self._changed:
            self.in_flight.pop(key, None)
            self.spent += cost
            self._changed.notify_all()

    def reached(self) -> BudgetReached:
        spent = format_amount(self.spent, self.currency)
        cap = format_amount(self.cap, self.currency)
        return BudgetReached(
            f"--max-cost {cap} reached: spent {spent}; {self.not_started} sample(s) not started "
            "(run again with the same --run-id and a larger --max-cost, or none, to finish)",
            not_started=self.not_started,
            spent=self.spent,
        )
