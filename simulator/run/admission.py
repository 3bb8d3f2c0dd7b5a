"""Admission control: how many sessions run at once, learnt from how they end.

``--concurrency`` is each run's ceiling, not a promise. How many sessions of every run on this
loop run at once is the ``PaceWindow``'s, learnt from the sessions themselves in rounds:

- a round is the sessions that started at one window size; once enough of them have ended it is
  judged: it *kept pace* when no session lost input fidelity and no more lost measurement
  precision than a few percent beyond what the machine loses by itself (the share lost at
  ``FLOOR`` sessions, where our own load is a few percent of one core, once a failing search
  has gone down there; what any load loses is not ours to wait out);
- the window then moves like a binary search between the largest load that kept pace and the
  smallest that did not: doubling while no round has failed, halfway once one has, and it stays
  once the two are a step apart (it converges instead of halving and regrowing);
- a round that lost precision (not fidelity) at a load not known to fail is *doubted*, not
  believed: the next round runs at the same load, and only if it fails too has the load failed.
  One stall (the machine's own, or the runs' start-up) reaches every session whose latency
  window is open at that instant, several at once; a load too high for the machine loses pace
  round after round. A load that
  failed is tried again now and then (one round in ``PROBE_AFTER`` + 1), so a machine that got
  quieter is used; a round that fails at a load that kept pace says the machine got busier, and
  that load is forgotten;
- below ``FLOOR`` sessions the window never holds a session back: another job's load is not
  ours to wait out, and a machine left idle while sessions wait helps no one.

``Headroom`` holds the window for every run on one loop (the demo runs one per model), spaces
starts so handshakes do not pile up, and keeps this process's CPU share (its children's too:
co-located fakes and the worker pool use the same cores) under ``AdmissionLimits.cpu_share``,
and the busiest one-threaded loop's (ours, or a co-located fake server's) under
``AdmissionLimits.loop_share``: a loop is one thread, and one that is busy most of the time
delays every frame it sends or answers, however many cores are idle. ``admit`` decides from
those figures and the window alone (pure).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = ["FLOOR", "AdmissionLimits", "Headroom", "PaceWindow", "Slot", "admit"]

CPU_TICK_S = 0.1  # how often this process's CPU time is sampled (it reads /proc: not every frame)
WINDOW_S = 1.0  # the CPU share a decision looks at: the last second
# after a start the next waits this long at least: its handshake shows in the figures first, and
# 51 ms is 11 ms past a 20 ms frame, so successive sessions' send instants (whole milliseconds,
# ``Schedule.start``) fall on every phase of the frame instead of piling onto a few
SETTLE_S = 0.051

INITIAL_WINDOW = 16.0  # sessions at once before any round is judged
FLOOR = 4  # sessions at once that are never held back (our load there is a few % of a core)
MIN_ROUND = 8  # sessions ended before a round is judged (and at least half the window)
MISS = 0.03  # share of a round that may lose precision beyond the machine's own share
SPREAD = 1.5  # standard deviations a round's count may stray from the machine's share
STEP = 0.125  # the search stops once the two bounds are this close (relative), or one apart
PROBE_AFTER = 8  # rounds that kept pace at the converged load before the failed one is tried


@dataclass(frozen=True)
class AdmissionLimits:
    cpu_share: float = 0.7  # this process and its children's CPU share of all cores
    # the CPU share of one core taken by our event loop's thread, or by a child (a fake model
    # server is one loop): past it, frames queue behind each other's callbacks
    loop_share: float = 0.55


@dataclass
class _Round:
    size: float  # the window the round's sessions started under
    started_at: float
    ended: int = 0
    imprecise: int = 0
    unfaithful: int = 0
    peak: int = 0  # the most sessions at once seen at one of its starts


@dataclass
class PaceWindow:
    """The sessions at once that keep pace (pure: the caller gives the times)."""

    size: float = INITIAL_WINDOW
    good: float = 0.0  # the largest load whose round kept pace (0: none yet)
    bad: float = math.inf  # the smallest load whose round did not ...
    bad_lost: int | None = 0  # ... how many of its sessions lost precision (None: fidelity) ...
    bad_ended: int = 0  # ... of how many
    machine: float = 0.0  # the share lost at FLOOR sessions: the machine's own
    kept: int = 0  # rounds in a row that kept pace at the converged load
    doubted: float = 0.0  # a load whose last round lost precision, not yet believed (0: none)
    rounds: list[tuple[float, int, int, int, bool]] = field(default_factory=list)
    _round: _Round | None = None

    @property
    def sessions(self) -> int:
        return max(1, int(self.size))

    @property
    def capacity(self) -> int:
        """What the run has learnt: the largest load that kept pace (the window until one did)."""
        return int(self.good) if self.good else self.sessions

    def started(self, at: float, in_flight: int) -> None:
        """A session started at ``at`` with ``in_flight`` running (itself included)."""
        if self._round is None:
            self._round = _Round(self.size, at)
        self._round.peak = max(self._round.peak, in_flight)

    def ended(self, started_at: float, *, precise: bool, faithful: bool) -> None:
        """A session (one attempt) started at ``started_at`` ended."""
        r = self._round
        if r is None or started_at < r.started_at:
            return  # it started under an earlier window: no evidence about this one
        r.ended += 1
        r.imprecise += not precise
        r.unfaithful += not faithful
        if r.unfaithful or r.ended >= max(MIN_ROUND, r.size / 2):
            self._judge(r)

    def _judge(self, r: _Round) -> None:
        sessions = max(1, int(r.size))
        load = float(min(r.peak, sessions)) if r.peak else float(sessions)
        # one imprecise session is a stray, not a share anything loses
        share = max(0, r.imprecise - 1) / r.ended
        if load <= FLOOR:
            # at the floor our own load is negligible: what is lost there is the machine's
            self.machine = share
            kept = r.unfaithful == 0
        else:
            kept = r.unfaithful == 0 and r.imprecise <= self.allowed(r.ended)
        self.rounds.append((r.size, r.ended, r.imprecise, r.unfaithful, kept))
        self._round = None
        if not kept and self._doubt(load, r):
            return  # the same load again: one burst of losses is not yet the load's
        self.doubted = 0.0
        if self.bad < math.inf and self._explained(self.bad_lost, self.bad_ended):
            self.bad = math.inf  # that load failed on what the machine loses at any load
        if kept:
            self._kept(load, held=r.peak >= sessions)
        else:
            self._failed(load, r)

    def _doubt(self, load: float, r: _Round) -> bool:
        """Whether a failed round is doubted (run again at its load) rather than believed: its
        first failure, on precision alone, at a load not known to fail."""
        if r.unfaithful or self.doubted or load >= self.bad or load <= FLOOR:
            return False
        self.doubted = load
        return True

    def _explained(self, lost: int | None, ended: int) -> bool:
        """Whether a failed round's precision losses are what the machine loses by itself (a
        round that lost fidelity, ``lost`` None, never is)."""
        return lost is not None and lost <= self.allowed(ended)

    def allowed(self, ended: int) -> int:
        """How many of ``ended`` sessions may lose precision in a round that keeps pace: a few
        percent, beyond what the machine loses by itself (with its binomial spread)."""
        m = self.machine
        spread = SPREAD * math.sqrt(ended * m * (1.0 - m))
        return max(1, math.ceil(ended * (MISS + m) + spread))

    def _kept(self, load: float, *, held: bool) -> None:
        self.good = max(self.good, load)
        if load >= self.bad:
            self.bad = math.inf  # a load that failed keeps pace now: the machine got quieter
        if not held:
            return  # the window did not hold the run back: it says nothing about more
        if self.bad == math.inf:
            self.size = 2.0 * self.size
        elif self._converged():
            self.kept += 1
            if self.kept >= PROBE_AFTER:  # now and then, the load that failed once more
                self.kept = 0
                self.size = self.bad
        else:
            self.size = (self.good + self.bad) / 2.0

    def _failed(self, load: float, r: _Round) -> None:
        self.kept = 0
        if load <= self.bad:
            lost = r.imprecise if r.unfaithful == 0 else None
            self.bad, self.bad_lost, self.bad_ended = max(float(FLOOR), load), lost, r.ended
        if self.good >= self.bad:  # it kept pace here before: the machine got busier
            self.good = 0.0
        low = self.good if self.good else max(float(FLOOR), self.bad / 2.0)
        self.size = max(float(FLOOR), (low + self.bad) / 2.0 if self.good else low)

    def _converged(self) -> bool:
        return self.bad - self.good <= max(1.0, STEP * self.good)

    def describe(self) -> dict[str, Any]:
        return {
            "window": self.sessions,
            "capacity": self.capacity,
            "kept_pace_at": self.good or None,
            "lost_pace_at": None if self.bad == math.inf else self.bad,
            "doubted": self.doubted or None,
            "machine_imprecise_share": round(self.machine, 3),
            "rounds": len(self.rounds),
        }


def admit(
    in_flight: int,
    window: int,
    cpu_share: float,
    limits: AdmissionLimits,
    loop_share: float = 0.0,
) -> bool:
    """Whether one more session may start now (the run's own ceiling is its caller's). Below
    ``FLOOR`` one always may: a run always progresses, and no other job's load keeps it idle.
    ``loop_share``: the busiest loop's share of its core."""
    if in_flight < FLOOR:
        return True
    if in_flight >= window:
        return False
    return cpu_share < limits.cpu_share and loop_share < limits.loop_share


class Headroom:
    """The window shared by every run on one loop, this process's recent CPU share, and how
    many sessions ran at once on average."""

    _by_loop: ClassVar[dict[int, Headroom]] = {}

    def __init__(self, limits: AdmissionLimits | None = None) -> None:
        self.limits = limits or AdmissionLimits()
        self.window = PaceWindow()
        self.in_flight = 0
        self.cpu: deque[_CpuSample] = deque()
        self.last_start = -1e9
        self.refused = 0  # decisions that found no room (for the progress line and tests)
        self.area = 0.0  # sessions x seconds, for the mean in flight
        self._since: float | None = None  # when in_flight last changed (None: none yet)
        self._first: float | None = None
        self._task: asyncio.Task[None] | None = None
        self._users = 0
        self._waiters: deque[_Waiter] = deque()  # sessions waiting for room, oldest first
        self._gate: asyncio.Task[None] | None = None  # admits them while any wait

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
            tasks = [t for t in (self._task, self._gate) if t is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._task = self._gate = None
            Headroom._by_loop.pop(id(asyncio.get_running_loop()), None)

    async def _sample(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(CPU_TICK_S)
            now = loop.time()
            self.cpu.append(_CpuSample.now(now))  # on the loop's thread: its own CPU time
            while len(self.cpu) > 1 and self.cpu[0].at < now - WINDOW_S:
                self.cpu.popleft()

    def cpu_share(self) -> float:
        """CPU share of all cores of this process and its children over the last second."""
        if len(self.cpu) < 2:
            return 0.0
        a, b = self.cpu[0], self.cpu[-1]
        cores = os.cpu_count() or 1
        return (b.total - a.total) / (b.at - a.at) / cores if b.at > a.at else 0.0

    def loop_share(self) -> float:
        """The share of one core taken over the last second by the busiest of our loop's
        thread and this process's children (a co-located fake server is one loop)."""
        if len(self.cpu) < 2:
            return 0.0
        a, b = self.cpu[0], self.cpu[-1]
        if b.at <= a.at:
            return 0.0
        busiest = b.loop - a.loop
        for pid, used in b.children.items():
            busiest = max(busiest, used - a.children.get(pid, used))
        return busiest / (b.at - a.at)

    def mean_in_flight(self, now: float) -> float:
        """Sessions at once, averaged from the first start to ``now``."""
        if self._first is None or self._since is None or now <= self._first:
            return 0.0
        return (self.area + self.in_flight * (now - self._since)) / (now - self._first)

    def _count(self, delta: int, now: float) -> None:
        if self._since is not None:
            self.area += self.in_flight * (now - self._since)
        if self._first is None:
            self._first = now
        self._since = now
        self.in_flight += delta

    async def wait_for_room(self, *, check: bool = True) -> None:
        """Returns once a session may start (and counts it in flight: call ``done`` after);
        without ``check`` only the spacing of starts applies. Sessions start in the order they
        asked, by one gate that wakes once per decision, however many wait (a waiter that
        polled on its own timer would cost the loop that paces the running sessions)."""
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop.create_future(), check)
        self._waiters.append(waiter)
        if self._gate is None or self._gate.done():
            self._gate = loop.create_task(self._admit_waiters())
        try:
            await waiter.admitted
        except asyncio.CancelledError:
            if waiter.admitted.done() and not waiter.admitted.cancelled():
                self.done()  # admitted as it was cancelled: the room is given back
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            raise

    async def _admit_waiters(self) -> None:
        """Starts the waiting sessions one at a time, oldest first, ``SETTLE_S`` apart at least."""
        loop = asyncio.get_running_loop()
        while self._waiters:
            settle = self.last_start + SETTLE_S - loop.time()
            if settle > 0:
                await asyncio.sleep(settle)
                continue
            waiter = self._next_admitted()
            if waiter is None:
                self.refused += 1
                await asyncio.sleep(SETTLE_S)
                continue
            now = loop.time()
            self._count(+1, now)
            self.last_start = now
            self.window.started(now, self.in_flight)
            waiter.admitted.set_result(None)

    def _next_admitted(self) -> _Waiter | None:
        """The oldest waiter that may start now (taken from the queue), or None."""
        while self._waiters and self._waiters[0].admitted.done():
            self._waiters.popleft()  # cancelled
        room = admit(
            self.in_flight, self.window.sessions, self.cpu_share(), self.limits, self.loop_share()
        )
        for waiter in self._waiters:
            if (room or not waiter.check) and not waiter.admitted.done():
                self._waiters.remove(waiter)
                return waiter
        return None

    @contextlib.asynccontextmanager
    async def slot(self, *, check: bool = True) -> AsyncIterator[Slot]:
        """Room for one session (``wait_for_room``), given back on leaving."""
        held = Slot(self, check)
        await held.take()
        try:
            yield held
        finally:
            held.give_back()

    def ended(self, started_at: float, *, precise: bool, faithful: bool) -> None:
        """A session (one attempt) that started at ``started_at`` ended."""
        self.window.ended(started_at, precise=precise, faithful=faithful)

    def done(self) -> None:
        self._count(-1, asyncio.get_running_loop().time())

    def describe(self) -> dict[str, Any]:
        """How the sessions were paced: the window, what it learnt, sessions at once."""
        now = asyncio.get_running_loop().time()
        return {**self.window.describe(), "mean_in_flight": round(self.mean_in_flight(now), 2)}


@dataclass(eq=False)
class _Waiter:
    admitted: asyncio.Future[None]  # done once it may start
    check: bool  # False: only the spacing of starts applies


class Slot:
    """One session's room in a ``Headroom``: taken, given back, taken again for a retry."""

    def __init__(self, headroom: Headroom, check: bool) -> None:
        self.headroom = headroom
        self.check = check
        self.held = False

    async def take(self) -> None:
        await self.headroom.wait_for_room(check=self.check)
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


@dataclass(frozen=True)
class _CpuSample:
    at: float  # the loop's clock
    total: float  # CPU seconds of this process and its children so far
    loop: float  # ... of the thread that took the sample (the loop's)
    children: dict[int, float]  # ... of each live child process

    @classmethod
    def now(cls, at: float) -> _CpuSample:
        t = os.times()
        children = _live_children_cpu()
        total = t.user + t.system + t.children_user + t.children_system + sum(children.values())
        return cls(at, total, time.thread_time(), children)


def _live_children_cpu() -> dict[int, float]:
    """CPU seconds of each live child process of this one (Linux /proc; none elsewhere).
    os.times covers waited-for children only: the pool and fakes live on."""
    out: dict[int, float] = {}
    try:
        tick = os.sysconf("SC_CLK_TCK")
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
            children = f.read().split()
    except (OSError, ValueError):
        return out
    for pid in children:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[int(pid)] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        except (OSError, ValueError, IndexError):
            continue  # it ended meanwhile
    return out
