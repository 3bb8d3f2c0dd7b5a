"""Admission control: a new session starts only while this process keeps pace.

``--concurrency`` is a ceiling, not a promise. ``Headroom`` samples the event loop's lag (a
ticker that asks to wake every ``TICK_S`` and notes how late it woke) and this process's CPU share
(its children's too: co-located fakes and the worker pool use the same cores, so it is a share
of all the machine's cores) over the last second; ``admit`` decides from those figures alone (pure), so a session is started only while
the sessions already running keep their timing budget. One ``Headroom`` per event loop is shared
by every run on it (the demo runs one per model).
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from dataclasses import dataclass
from typing import ClassVar

__all__ = ["AdmissionLimits", "Headroom", "admit"]

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


def admit(
    in_flight: int, ceiling: int, lag_ms: float, cpu_share: float, limits: AdmissionLimits
) -> bool:
    """Whether one more session may start now. With none running, one always may (a run always
    progresses, and its own figures then say how far it can go)."""
    if in_flight >= ceiling:
        return False
    if in_flight == 0:
        return True
    return lag_ms < limits.loop_lag_ms and cpu_share < limits.cpu_share


class Headroom:
    """The loop's recent lag and this process's recent CPU share, sampled while sessions run."""

    _by_loop: ClassVar[dict[int, Headroom]] = {}

    def __init__(self, limits: AdmissionLimits | None = None) -> None:
        self.limits = limits or AdmissionLimits()
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
            if settled and (
                not check or admit(self.in_flight, ceiling, lag_ms, share, self.limits)
            ):
                break
            self.refused += 1
            await asyncio.sleep(SETTLE_S)
        self.in_flight += 1
        self.last_start = loop.time()

    def done(self) -> None:
        self.in_flight -= 1


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
