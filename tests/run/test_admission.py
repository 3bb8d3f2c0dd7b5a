"""Admission control: the decision (pure), and the headroom figures a loop gives it."""

from __future__ import annotations

import asyncio
import time

from duplexsim.run.admission import AdmissionLimits, Headroom, admit
from tests.helpers.waits import async_wait_until

LIMITS = AdmissionLimits(loop_lag_ms=2.0, cpu_share=0.7)


def test_a_session_starts_only_under_the_ceiling_and_while_there_is_room() -> None:
    assert admit(0, 8, lag_ms=50.0, cpu_share=1.0, limits=LIMITS)  # none running: always one
    assert admit(3, 8, lag_ms=1.0, cpu_share=0.5, limits=LIMITS)
    assert not admit(8, 8, lag_ms=0.0, cpu_share=0.0, limits=LIMITS)  # the ceiling
    assert not admit(3, 8, lag_ms=2.5, cpu_share=0.5, limits=LIMITS)  # the loop lags
    assert not admit(3, 8, lag_ms=1.0, cpu_share=0.8, limits=LIMITS)  # no CPU left


async def test_a_loop_kept_busy_shows_its_lag_and_closes_the_door() -> None:
    headroom = Headroom(LIMITS)
    headroom.start()
    try:
        await asyncio.sleep(0.2)  # the figures of a quiet loop, over a few of its samples
        quiet_lag, _ = headroom.figures()
        for _ in range(30):  # 10 ms of the loop's time taken every 20 ms
            end = time.perf_counter() + 0.01
            while time.perf_counter() < end:
                pass
            await asyncio.sleep(0.01)
        busy_lag, share = headroom.figures()
        headroom.in_flight = 1
        assert busy_lag > max(quiet_lag, 2.0)
        assert share > 0.0  # the busy loop's CPU shows (how much depends on the machine's load)
        assert not admit(headroom.in_flight, 8, busy_lag, share, LIMITS)
    finally:
        await headroom.stop()


def test_the_window_doubles_per_round_and_halves_when_the_load_breaks_budgets() -> None:
    from duplexsim.run.admission import ValidWindow

    w = ValidWindow(size=4.0)
    for k in range(4):  # a round: the running sessions end valid, a full window each time
        w.ended(True, started_at=0.0, now=1.0 + k, in_flight=w.sessions)
    assert w.sessions == 8
    w.ended(False, started_at=2.0, now=9.0, in_flight=8)
    assert w.sessions == 8  # one invalid session among five: a stray, not the load
    w.ended(False, started_at=2.0, now=10.0, in_flight=8)
    assert w.sessions == 4 and w.cut_at == 10.0  # two of six: the load
    # sessions that started before the cut ran under the old window: they say nothing new
    for k in range(3):
        w.ended(False, started_at=9.0, now=11.0 + k, in_flight=4)
    assert w.sessions == 4
    for _ in range(4):
        w.ended(True, started_at=10.5, now=15.0, in_flight=w.sessions)
    assert w.sessions == 8
    for k in range(2):  # started after the cut, and two of six: halve again
        w.ended(False, started_at=10.5, now=16.0 + k, in_flight=8)
    assert w.sessions == 4
    for k in range(20):
        w.ended(False, started_at=20.0 + k, now=21.0 + k, in_flight=1)
    assert w.size == 1.0  # never below one: a run always progresses


def test_stray_invalid_sessions_do_not_shrink_the_window() -> None:
    from duplexsim.run.admission import ValidWindow

    w = ValidWindow(size=8.0)
    for k in range(200):  # one in ten invalid, whatever the load
        w.ended(k % 10 != 9, started_at=float(k), now=k + 1.0, in_flight=w.sessions)
    assert w.sessions >= 100


def test_the_window_grows_only_while_it_is_what_holds_the_run_back() -> None:
    from duplexsim.run.admission import ValidWindow

    w = ValidWindow(size=8.0)
    for _ in range(20):
        w.ended(True, started_at=0.0, now=1.0, in_flight=3)  # a ceiling of 3 held it back
    assert w.sessions == 8


def test_a_session_waits_for_the_window() -> None:
    assert admit(3, 8, 0.0, 0.0, LIMITS, window=4)
    assert not admit(4, 8, 0.0, 0.0, LIMITS, window=4)
    assert admit(0, 8, 0.0, 0.0, LIMITS, window=1)  # none running: always one


async def test_a_retry_gives_its_room_back_while_it_waits() -> None:
    headroom = Headroom(LIMITS)
    headroom.start()
    try:
        async with headroom.slot(4) as slot:
            assert headroom.in_flight == 1
            waiting = asyncio.create_task(slot.retake(0.2))
            await async_wait_until(lambda: not slot.held, what="the slot given back")
            assert headroom.in_flight == 0 and not waiting.done()
            await waiting
            assert headroom.in_flight == 1 and slot.held
        assert headroom.in_flight == 0
    finally:
        await headroom.stop()
