"""Admission control: the decision (pure), and the headroom figures a loop gives it."""

from __future__ import annotations

import asyncio
import time

from simulator.admission import AdmissionLimits, Headroom, admit

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
        await asyncio.sleep(0.2)
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
