"""Admission control: the decision (pure), the window that learns how many sessions keep pace
(pure, on given times), and the figures a loop gives them."""

from __future__ import annotations

import asyncio
import math
import sys

import pytest

from duplexsim.run.admission import (
    FLOOR,
    SETTLE_S,
    AdmissionLimits,
    Headroom,
    PaceWindow,
    admit,
)
from tests.helpers.waits import async_wait_until

LIMITS = AdmissionLimits(cpu_share=0.7)


def test_a_session_starts_under_the_window_while_cpu_is_left_and_always_below_the_floor() -> None:
    assert admit(0, 1, cpu_share=1.0, limits=LIMITS)  # none running: always one
    assert admit(FLOOR - 1, 1, cpu_share=1.0, limits=LIMITS)  # another job's load: not ours
    assert admit(5, 8, cpu_share=0.5, limits=LIMITS)
    assert not admit(8, 8, cpu_share=0.0, limits=LIMITS)  # the window
    assert not admit(5, 8, cpu_share=0.8, limits=LIMITS)  # no CPU left
    # one loop (ours, or a fake server's) busy most of the time, however idle the other cores
    assert not admit(5, 8, cpu_share=0.3, limits=LIMITS, loop_share=0.65)
    assert admit(5, 8, cpu_share=0.3, limits=LIMITS, loop_share=0.5)
    assert admit(FLOOR - 1, 8, cpu_share=0.3, limits=LIMITS, loop_share=1.0)


def play(
    w: PaceWindow,
    rounds: int,
    lost_share: float | None = None,
    *,
    capacity: float = math.inf,
    machine: float = 0.0,
    unfaithful_above: float = math.inf,
    t0: float = 0.0,
) -> list[int]:
    """``rounds`` rounds at the window's size: a round's sessions lose precision at ``machine``
    plus ``lost_share`` once the load is past ``capacity``; the window after each round."""
    sizes = []
    t = t0
    for _ in range(rounds):
        size = w.sessions
        t += 1.0
        for _ in range(size):
            w.started(t, size)
        n = max(8, math.ceil(size / 2))
        share = machine + (lost_share or 0.0 if size > capacity else 0.0)
        lost = round(share * n)
        for k in range(n):
            w.ended(t, precise=k >= lost, faithful=size <= unfaithful_above)
            if w.sessions != size or w._round is None:
                break
        sizes.append(w.sessions)
    return sizes


def test_the_window_doubles_while_rounds_keep_pace() -> None:
    w = PaceWindow(size=8.0)
    assert play(w, 3) == [16, 32, 64]
    assert w.good == 32 and w.bad == math.inf


def test_a_round_is_judged_only_once_enough_of_it_ended() -> None:
    w = PaceWindow(size=32.0)
    for _ in range(32):
        w.started(1.0, 32)
    for _ in range(15):
        w.ended(1.0, precise=True, faithful=True)
    assert w.sessions == 32 and not w.rounds  # half the window has not ended yet
    w.ended(1.0, precise=True, faithful=True)
    assert w.sessions == 64 and len(w.rounds) == 1
    w.ended(0.5, precise=False, faithful=False)  # started under an earlier window: no evidence
    assert w.sessions == 64 and len(w.rounds) == 1


def test_one_stray_imprecise_session_does_not_fail_a_round() -> None:
    w = PaceWindow(size=16.0)
    assert play(w, 1, 1 / 8, capacity=0) == [32]  # one of eight: a stray
    # three of sixteen: doubted, run again; three again: the load, back halfway
    assert play(w, 2, 3 / 16, capacity=0) == [32, 24]


def test_a_round_that_lost_precision_once_is_run_again_before_its_load_is_believed() -> None:
    # the first round: three of its eight ended sessions lost precision to one burst (the runs'
    # start-up, a stall of the machine); the same load runs again, keeps pace, and it doubles
    w = PaceWindow()
    assert play(w, 1, 3 / 8, capacity=0) == [16]
    assert w.doubted == 16 and w.bad == math.inf and w.good == 0
    assert play(w, 2) == [32, 64]
    assert w.doubted == 0 and w.good == 32 and w.bad == math.inf
    assert w.describe()["doubted"] is None


def test_a_doubted_load_that_fails_again_is_believed_and_a_known_one_at_once() -> None:
    w = PaceWindow(size=32.0)
    assert play(w, 2, 0.3, capacity=20) == [32, 16]  # doubted, then believed: 32 failed
    assert w.bad == 32 and w.doubted == 0
    sizes = play(w, 3, 0.3, capacity=20)  # 16 keeps pace; 24 (below 32, not known) is doubted
    assert sizes == [24, 24, 20], sizes
    w2 = PaceWindow(size=24.0, bad=24.0)
    assert play(w2, 1, 0.3, capacity=20) == [12]  # a load known to fail: no doubt, halved


def test_a_round_that_lost_fidelity_is_never_doubted() -> None:
    w = PaceWindow()
    w.started(1.0, 16)
    w.ended(1.0, precise=False, faithful=False)
    assert w.doubted == 0 and w.bad == 16 and w.sessions == 8


@pytest.mark.parametrize("capacity", [6, 11, 23, 40])
def test_the_window_converges_on_what_the_machine_paces_and_stays(capacity: int) -> None:
    w = PaceWindow()
    sizes = play(w, 40, 0.3, capacity=capacity)
    settled = sizes[12:]
    # it converges within a step of the capacity ...
    assert all(capacity * 0.8 <= s <= capacity * 1.3 + 1 for s in settled), sizes
    # ... and stays there: no halving and regrowing, only an occasional try a little higher
    assert min(settled) >= capacity * 0.8 and w.good <= capacity
    lost = sum(s > capacity for s in settled)
    assert lost <= len(settled) / 3, sizes


def test_a_session_that_lost_fidelity_fails_its_round_at_once() -> None:
    w = PaceWindow(size=16.0)
    w.started(1.0, 16)
    w.ended(1.0, precise=False, faithful=False)
    assert w.rounds == [(16.0, 1, 1, 1, False)] and w.bad == 16 and w.sessions == 8
    sizes = play(w, 30, capacity=math.inf, unfaithful_above=12, t0=2.0)[8:]
    # it settles on the most that keep fidelity, trying one more now and then
    assert max(sizes) <= 13 and sizes.count(12) >= 0.8 * len(sizes), sizes


def test_what_the_machine_loses_by_itself_does_not_keep_sessions_waiting() -> None:
    # another job makes half of all sessions imprecise whatever the load: the window must not
    # sit at the floor (that only leaves the machine idle); it goes up to what our own load
    # breaks (here nothing does)
    w = PaceWindow()
    sizes = play(w, 25, machine=0.5)
    assert min(sizes) >= FLOOR and sizes[-1] >= 64, sizes
    assert w.machine > 0.2  # what every load loses: the machine's


def test_a_machine_that_got_busier_is_followed_down_and_a_quieter_one_up() -> None:
    w = PaceWindow()
    play(w, 30, 0.3, capacity=30)
    assert 24 <= w.sessions <= 40
    play(w, 30, 0.3, capacity=10, t0=100.0)
    assert 8 <= w.sessions <= 13 and w.good <= 10
    sizes = play(w, 60, 0.3, capacity=30, t0=200.0)
    assert sizes[-1] >= 24, sizes  # tried a little higher from time to time, it finds room


def test_the_window_never_holds_back_below_the_floor() -> None:
    w = PaceWindow(size=8.0)
    sizes = play(w, 10, 1.0, capacity=0)  # every session loses precision at every load
    assert min(sizes) >= FLOOR


def test_the_window_only_grows_while_it_is_what_holds_the_run_back() -> None:
    w = PaceWindow(size=16.0)
    for _ in range(5):
        w.started(1.0, 3)  # a ceiling of 3 held the run back
    for _ in range(8):
        w.ended(1.0, precise=True, faithful=True)
    assert w.sessions == 16 and w.good == 3


async def test_a_retry_gives_its_room_back_while_it_waits() -> None:
    headroom = Headroom(LIMITS)
    headroom.start()
    try:
        async with headroom.slot() as slot:
            assert headroom.in_flight == 1
            waiting = asyncio.create_task(slot.retake(0.2))
            await async_wait_until(lambda: not slot.held, what="the slot given back")
            assert headroom.in_flight == 0 and not waiting.done()
            await waiting
            assert headroom.in_flight == 1 and slot.held
        assert headroom.in_flight == 0
    finally:
        await headroom.stop()


async def test_the_sessions_at_once_are_averaged_over_time() -> None:
    headroom = Headroom(LIMITS)
    loop = asyncio.get_running_loop()
    headroom._count(+1, 10.0)
    headroom._count(+1, 11.0)  # one for a second, then two for two seconds
    headroom._count(-1, 13.0)
    headroom._count(-1, 14.0)
    assert headroom.mean_in_flight(14.0) == pytest.approx((1 + 4 + 1) / 4)
    assert headroom.mean_in_flight(loop.time()) >= 0.0


async def test_the_cpu_share_of_a_busy_process_shows() -> None:
    headroom = Headroom(LIMITS)
    headroom.start()
    try:
        end = asyncio.get_running_loop().time() + 0.5
        while asyncio.get_running_loop().time() < end:  # busy, yielding now and then
            sum(range(20000))
            await asyncio.sleep(0)
        assert headroom.cpu_share() > 0.0
        assert headroom.loop_share() > 0.3  # this loop's thread was busy most of that time
    finally:
        await headroom.stop()


async def test_a_busy_child_process_shows_as_a_busy_loop() -> None:
    """A co-located fake server is one loop: its share of a core counts, alone."""
    headroom = Headroom(LIMITS)
    headroom.start()
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time\nend = time.time() + 1.5\nwhile time.time() < end: pass"
    )
    try:
        await asyncio.sleep(1.2)  # the loop idle all that time
        assert headroom.loop_share() > 0.3
    finally:
        await child.wait()
        await headroom.stop()


async def test_waiting_sessions_start_in_order_by_one_gate_whatever_their_number() -> None:
    """A full window holds 40 waiters back; the gate decides once per settling time for all
    of them (not once per waiter), and as room comes they start oldest first, spaced."""
    headroom = Headroom(LIMITS)
    headroom.window = PaceWindow(size=float(FLOOR))
    headroom.start()
    started: list[int] = []

    async def session(k: int) -> None:
        await headroom.wait_for_room()
        started.append(k)

    try:
        for _ in range(FLOOR):
            await headroom.wait_for_room()
        loop = asyncio.get_running_loop()
        waiting = [asyncio.create_task(session(k)) for k in range(40)]
        await asyncio.sleep(0.3)
        assert started == [] and headroom.in_flight == FLOOR
        assert 1 <= headroom.refused <= 8  # about 0.3 s / SETTLE_S decisions, not 40 times that
        at = loop.time()
        for _ in range(3):
            headroom.done()
        await async_wait_until(lambda: len(started) == 3, what="three started")
        assert started == [0, 1, 2] and loop.time() - at >= 2 * SETTLE_S
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        assert headroom.in_flight == FLOOR and not headroom._waiters
    finally:
        await headroom.stop()


async def test_a_waiter_cancelled_as_it_is_admitted_gives_its_room_back() -> None:
    headroom = Headroom(LIMITS)
    headroom.start()
    try:
        first = asyncio.create_task(headroom.wait_for_room())
        await asyncio.sleep(0)  # queued; the gate admits it in its first step
        await asyncio.sleep(0)
        assert headroom.in_flight == 1 and not first.done()  # admitted, not yet resumed
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        assert headroom.in_flight == 0
        cancelled = asyncio.create_task(headroom.wait_for_room())  # waits out the settling
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.gather(cancelled, return_exceptions=True)
        assert headroom.in_flight == 0 and not headroom._waiters
        await headroom.wait_for_room()  # the gate goes on for the next one
        assert headroom.in_flight == 1
    finally:
        await headroom.stop()
