"""Admission control: a new session starts only while this process keeps pace.

``--concurrency`` is a ceiling, not a promise. Two things decide how many sessions run at once:

- ``ValidWindow`` learns it from the sessions themselves: each session that ends with valid
  timing lets one more run (the window doubles per round while they keep their budget), and it
  halves when a quarter or more of the sessions started since the last cut broke it. It
  follows what the machine can pace, whatever moves it (our load, a co-located fake's, another
  job's), and it is the figure the run's results depend on.
- ``Headroom`` samples the event loop's lag (a ticker that asks to wake every ``TICK_S`` and
  notes how late it woke) and this process's CPU share (its children's too: co-located fakes and
  the worker pool use the same cores) over the last second, so a start never lands on a loop that
  is already late; ``admit`` decides from those figures and the window alone (pure).

One ``Headroom`` per event loop is shared by every run on it (the demo runs one per model).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import ClassVar

__all__ = ["AdmissionLimits", "Headroom", "Slot", "ValidWindow", "admit"]

TICK_S = 0.01  # how often the loop's lag is sampled
WINDOW_S = 1.0  # the figures a decision looks at: the last second
# after a start the next waits this long at least: its handshake shows in the figures first, and
# 51 ms is 11 ms past a 20 ms frame, so successive sessions' send instants (whole milliseconds,
# ``Schedule.start``) fall on every phase of the frame instead of piling onto a few
SETTLE_S = 0.051


@dataclass(frozen=True)
class AdmissionLimits:
    loop_lag_ms: float = 2.0  # the last second's 95th-percentile loop lag must stay under this
    cpu_share: float = 0.7  # ... and the CPU share of this process and its children (of all cores)


INITIAL_WINDOW = 8.0  # sessions at once before any has finished: few enough for 2 cores
CUT_MIN = 2  # invalid sessions since the last cut before the window halves ...
CUT_SHARE = 0.25  # ... if they are at least this share of the sessions ended since


@dataclass
class ValidWindow:
    """How many sessions at once keep their timing valid, learnt from how they end (pure: the
    caller gives the times). Like a congestion window: grows by one for each session that ends
    valid while the window holds the run back, and halves once the sessions started since the
    last cut show that the load breaks budgets: at least ``CUT_MIN`` of them invalid, and
    ``CUT_SHARE`` or more. A stray invalid session (a machine that stalls now and then whatever
    the load) does not shrink it; a run far past what the machine paces does, within a round."""

    size: float = INITIAL_WINDOW
    cut_at: float = -math.inf  # when it was last halved
    valid_since: int = 0  # sessions started after the last cut that ended valid ...
    invalid_since: int = 0  # ... and invalid

    def ended(self, valid: bool, started_at: float, now: float, in_flight: int) -> None:
        """A session started at ``started_at`` ended now, its timing ``valid`` or not, with
        ``in_flight`` sessions running (itself included)."""
        if valid and in_flight >= self.sessions:  # the window was what held the run back
            self.size += 1.0
        if started_at < self.cut_at:
            return  # it ran under the window before the last cut: no evidence about this one
        if valid:
            self.valid_since += 1
            return
        self.invalid_since += 1
        seen = self.valid_since + self.invalid_since
        if self.invalid_since >= CUT_MIN and self.invalid_since >= CUT_SHARE * seen:
            self.size = max(1.0, self.size / 2.0)
            self.cut_at = now
            self.valid_since = self.invalid_since = 0

    @property
    def sessions(self) -> int:
        return max(1, int(self.size))


def admit(
    in_flight: int,
    ceiling: int,
    lag_ms: float,
    cpu_share: float,
    limits: AdmissionLimits,
    window: int | None = None,
) -> bool:
    """Whether one more session may start now. With none running, one always may (a run always
    progresses, and its own figures then say how far it can go)."""
    if in_flight >= ceiling:
        return False
    if in_flight == 0:
        return True
    if window is not None and in_flight >= window:
        return False
    return lag_ms < limits.loop_lag_ms and cpu_share < limits.cpu_share


class Headroom:
    """The loop's recent lag and this process's recent CPU share, sampled while sessions run."""

    _by_loop: ClassVar[dict[int, Headroom]] = {}

    def __init__(self, limits: AdmissionLimits | None = None) -> None:
        self.limits = limits or AdmissionLimits()
        self.window = ValidWindow()
        self.in_flight = 0
        self.lags: deque[tuple[float, float]] = deque()  # (when, lag s)
        self.cpu: deque[tuple[float, float]] = deque()  # (when, CPU seconds so far)
        self.last_start = -1e9
        self.refused = 0  # decisions that found no room (for the progress line and tests)
        self._task: asyncio.Task[None] | None = None
        self._users = 0

    @classmethod
    def for_loop(cls) -> Headroom:
        """The one shared by every run on the running loop."""
        key = id(asyncio.get_running_loop())
        if key not in cls._by_loop:
            cls._by_loop[key] = cls()
        return cls._by_loop[key]

    def start(self) -> None:
        self._users += 1
        if self._task is None:
            self._task = asyncio.create_task(self._sample())

    async def stop(self) -> None:
        self._users -= 1
        if self._users == 0 and self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
            Headroom._by_loop.pop(id(asyncio.get_running_loop()), None)

    async def _sample(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + TICK_S
            await asyncio.sleep(TICK_S)
            now = loop.time()
            self.lags.append((now, max(0.0, now - due)))
            self.cpu.append((now, _cpu_seconds()))
            while self.lags and self.lags[0][0] < now - WINDOW_S:
                self.lags.popleft()
            while len(self.cpu) > 1 and self.cpu[0][0] < now - WINDOW_S:
                self.cpu.popleft()

    def figures(self) -> tuple[float, float]:
        """(95th-percentile loop lag in ms, CPU share of all cores) over the last second: one
        preemption on a shared machine does not close the door, a loop that keeps lagging does."""
        lags = sorted(lag for _, lag in self.lags)
        lag_ms = 1000.0 * lags[int(0.95 * (len(lags) - 1))] if lags else 0.0
        if len(self.cpu) < 2:
            return lag_ms, 0.0
        (t0, c0), (t1, c1) = self.cpu[0], self.cpu[-1]
        cores = os.cpu_count() or 1
        return lag_ms, (c1 - c0) / (t1 - t0) / cores if t1 > t0 else 0.0

    async def wait_for_room(self, ceiling: int, *, check: bool = True) -> None:
        """Returns once a session may start (and counts it in flight: call ``done`` after);
        without ``check`` only the spacing of starts applies."""
        loop = asyncio.get_running_loop()
        while True:
            settled = loop.time() - self.last_start >= SETTLE_S
            lag_ms, share = self.figures()
            window = self.window.sessions
            if settled and (
                not check or admit(self.in_flight, ceiling, lag_ms, share, self.limits, window)
            ):
                break
            self.refused += 1
            await asyncio.sleep(SETTLE_S)
        self.in_flight += 1
        self.last_start = loop.time()

    @contextlib.asynccontextmanager
    async def slot(self, ceiling: int, *, check: bool = True) -> AsyncIterator[Slot]:
        """Room for one session (``wait_for_room``), given back on leaving."""
        held = Slot(self, ceiling, check)
        await held.take()
        try:
            yield held
        finally:
            held.give_back()

    def ended(self, valid: bool, started_at: float) -> None:
        """A session (one attempt) ended; its timing was ``valid`` or not."""
        now = asyncio.get_running_loop().time()
        self.window.ended(valid, started_at, now, self.in_flight)

    def done(self) -> None:
        self.in_flight -= 1


class Slot:
    """One session's room in a ``Headroom``: taken, given back, taken again for a retry."""

    def __init__(self, headroom: Headroom, ceiling: int, check: bool) -> None:
        self.headroom = headroom
        self.ceiling = ceiling
        self.check = check
        self.held = False

    async def take(self) -> None:
        await self.headroom.wait_for_room(self.ceiling, check=self.check)
        self.held = True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            self.headroom.done()

    async def retake(self, after_s: float) -> None:
        """Give the room back, wait ``after_s``, and wait for room again (a retry starts only
        when there is room for it, like any session)."""
        self.give_back()
        await asyncio.sleep(after_s)
        await self.take()


def _cpu_seconds() -> float:
    """CPU time of this process and its children that ended so far, plus live children's where
    the platform says (os.times covers waited-for children only; the pool and fakes live on)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system + _live_children_cpu()


def _live_children_cpu() -> float:
    """CPU seconds of this process's live child processes (Linux /proc; 0 elsewhere)."""
    total = 0.0
    try:
        tick = os.sysconf("SC_CLK_TCK")
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
            children = f.read().split()
        for pid in children:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    except (OSError, ValueError, IndexError):
        return total
    return total
