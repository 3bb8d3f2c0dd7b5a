"""The kit's wall-clock wake-up, on the virtual clock: a conversation is ticked at its wake_at,
the timer only ever moves earlier, a tick that makes nothing due never spins, and a cancelled
ticker stays quiet."""

from __future__ import annotations

import asyncio

from duplexsim.clients.fakekit.serveractions import Action
from duplexsim.clients.fakekit.ticker import RETRY_S, Ticker
from tests.helpers.virtualclock import run_virtual


class Due:
    """A conversation with things due at the given times."""

    def __init__(self, *times: float) -> None:
        self.times = list(times)
        self.ticks: list[float] = []

    def receive(self, message: str | bytes, now: float | None = None) -> list[Action]:
        return []

    def tick(self, now: float) -> list[Action]:
        self.ticks.append(now)
        self.times = [t for t in self.times if t > now]
        return []

    def wake_at(self) -> float | None:
        return min(self.times, default=None)


def test_ticks_at_each_wake_up_and_moves_only_earlier() -> None:
    async def main() -> tuple[float, list[float]]:
        t0 = asyncio.get_running_loop().time()
        due = Due(t0 + 1.0, t0 + 2.0)
        ticker = Ticker(due, due.tick)
        ticker.arm()
        due.times.append(t0 + 5.0)
        ticker.arm()  # a later wake-up leaves the earlier timer alone
        await asyncio.sleep(10.0)
        return t0, due.ticks

    t0, ticks = run_virtual(main())
    assert [t - t0 for t in ticks] == [1.0, 2.0, 5.0]


def test_a_tick_that_makes_nothing_due_waits_before_the_next() -> None:
    async def main() -> list[float]:
        t0 = asyncio.get_running_loop().time()
        due = Due(t0 + 1.0)
        due.tick = lambda now: due.ticks.append(now) or []  # type: ignore[method-assign]
        ticker = Ticker(due, due.tick)
        ticker.arm()
        await asyncio.sleep(1.0 + 2.5 * RETRY_S)
        ticker.cancel()
        await asyncio.sleep(1.0)
        return due.ticks

    ticks = run_virtual(main())
    assert len(ticks) == 3  # at 1.0, then every RETRY_S while it stays due, until cancelled
    assert abs(ticks[1] - ticks[0] - RETRY_S) < 1e-9


def test_a_cancelled_ticker_is_not_armed_again() -> None:
    async def main() -> list[float]:
        t0 = asyncio.get_running_loop().time()
        due = Due(t0 + 1.0)
        ticker = Ticker(due, due.tick)
        ticker.cancel()
        ticker.arm()
        await asyncio.sleep(2.0)
        return due.ticks

    assert run_virtual(main()) == []
