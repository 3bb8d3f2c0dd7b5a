"""What the machine may have added to a latency, on the virtual clock: late sends between the
user's speech end and the reply's onset, and the stalls of a co-located model server as the reply
left, add up to the session's latency bound; over the budget the session is timing-invalid."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from duplexsim.core.stalls import StallLog
from duplexsim.core.timing import LatencyWindow, TimingBudget, check_timing
from duplexsim.run.rows import outcome_row
from duplexsim.session.engine import SessionOutcome, run_session
from tests.helpers.sessions import SETTINGS, context, echo
from tests.helpers.virtualclock import ScriptedClient, run_virtual

FRAME_S = 0.02
SPEECH_END_S = 1.2  # context(): 0.2 s silence, 1.0 s speech


class SpyStalls(StallLog):
    """A stall log that notes the windows it is asked about."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[float, float]] = []

    def worst(self, lo: float, hi: float) -> float:
        self.asked.append((lo, hi))
        return super().worst(lo, hi)


class SlowSend(ScriptedClient):
    """A client whose send of frame ``slow_frame`` returns ``slow_s`` late."""

    def __init__(self, slow_frame: int, slow_s: float, **kw: object) -> None:
        base = echo(0.5)
        super().__init__(base.behaviour, **kw)  # type: ignore[arg-type]
        self.slow_frame = slow_frame
        self.slow_s = slow_s

    async def send_audio(self, samples: np.ndarray) -> None:
        if len(self.sent_frames) == self.slow_frame:
            await asyncio.sleep(self.slow_s)
        await super().send_audio(samples)


def session(client: ScriptedClient, server: StallLog | None = None) -> SessionOutcome:
    return run_virtual(run_session(client, context(), SETTINGS, server_stalls=server))


def onset_instant() -> float:
    """The loop-clock instant the reply's onset chunk was stamped (the end of the window the
    session asks the server's stalls about), from a first run: the virtual clock makes every
    run the same."""
    spy = SpyStalls()
    out = session(echo(0.5), spy)
    assert out.check.valid and spy.asked
    lo, hi = spy.asked[-1]
    assert hi - lo == pytest.approx(0.002)  # no loop stall: the stamp's slack, twice
    return hi


def test_an_undisturbed_session_has_a_zero_bound() -> None:
    out = session(echo(0.5), StallLog())
    assert out.check.valid and out.check.latency_bound_ms == 0.0


def test_a_server_stall_as_the_reply_leaves_invalidates_the_latency() -> None:
    at = onset_instant()
    stalled = StallLog()
    stalled.note(at - 0.007, at - 0.001)
    out = session(echo(0.5), stalled)
    assert out.status == "ok" and not out.check.valid
    assert out.check.invalid == (
        "latency window 6.0 ms > 5 ms (send 0.0, loop 0.0, model server 6.0)"
    )
    assert out.check.latency_bound_ms == pytest.approx(6.0)
    # the latency itself is what it is: the mark says it cannot be vouched for
    assert out.timing is not None and out.timing.latency_s == pytest.approx(0.5, abs=1 / 16000)


def test_a_server_stall_long_before_the_reply_does_not_matter() -> None:
    at = onset_instant()
    earlier = StallLog()
    earlier.note(at - 0.4, at - 0.3)  # 100 ms, while the user's turn was still ending
    out = session(echo(0.5), earlier)
    assert out.check.valid and out.check.latency_bound_ms == 0.0


def test_a_late_send_between_speech_end_and_onset_counts() -> None:
    after_end = round(SPEECH_END_S / FRAME_S) + 3  # a silent frame the model must hear
    out = session(SlowSend(after_end, 0.007))
    assert out.check.send.max_ms == pytest.approx(7.0, abs=1e-6)
    assert out.check.send.p99_ms < 5.0  # the session's schedule held: only the window says no
    assert out.check.invalid == "latency window 7.0 ms > 5 ms (send 7.0, loop 0.0)"


def test_a_late_send_before_the_turn_ended_does_not_count() -> None:
    out = session(SlowSend(10, 0.007))
    assert out.check.valid and out.check.latency_bound_ms == 0.0


def test_a_model_that_answers_each_frame_is_late_only_by_the_frame_its_onset_answers() -> None:
    on_time = session(echo(0.5))
    assert on_time.timing is not None and on_time.timing.onset_s is not None
    onset_frame = round(on_time.timing.onset_s / FRAME_S)  # its chunk answers this frame
    after_end = round(SPEECH_END_S / FRAME_S) + 3
    # a frame late after the speech end, before the onset's: it left, late, before the frame
    # the onset answers, which left on time; the reply waited on nothing late
    early = session(SlowSend(after_end, 0.007, answers_each_frame=True), StallLog())
    assert early.check.send.max_ms == pytest.approx(7.0, abs=1e-6)
    assert early.check.valid and early.check.window is not None
    assert early.check.window.send_ms == 0.0
    assert early.timing is not None and early.timing.onset_s == on_time.timing.onset_s
    # the frame the onset answers, late: the reply came that much later, and the window says so
    late = session(SlowSend(onset_frame, 0.007, answers_each_frame=True), StallLog())
    assert late.check.invalid == (
        "latency window 7.0 ms > 5 ms (send 7.0, loop 0.0, model server 0.0)"
    )
    assert late.timing is not None and late.timing.onset_s is not None
    assert late.timing.onset_s == pytest.approx(on_time.timing.onset_s + 0.007, abs=1e-6)


def test_a_model_that_answers_ahead_of_its_input_is_judged_by_every_send_in_the_window() -> None:
    # it claims to answer each frame as it arrives, but its answers come before our frames
    # leave (each 30 ms ahead): the record contradicts it, and the window's sends all count
    ahead = SlowSend(
        round(SPEECH_END_S / FRAME_S) + 3, 0.007, answers_each_frame=True, delay=lambda k: -0.03
    )
    out = session(ahead, StallLog())
    assert (
        out.check.invalid == "latency window 7.0 ms > 5 ms (send 7.0, loop 0.0, model server 0.0)"
    )


def test_a_model_that_answers_each_frame_served_elsewhere_is_judged_by_the_whole_window() -> None:
    # no stall log of its server: a model on this loop or another machine, whose answer's time
    # the session cannot tell apart from the model's own; every send in the window counts
    out = session(SlowSend(round(SPEECH_END_S / FRAME_S) + 3, 0.007, answers_each_frame=True))
    assert out.check.invalid == "latency window 7.0 ms > 5 ms (send 7.0, loop 0.0)"


def test_the_time_a_fakes_answer_took_is_the_machines() -> None:
    # the fake's answers leave 3 ms after each frame arrives (its work, its loop): all of that
    # is this machine's, and with the frame's own lateness over 5 ms the latency is not vouched
    slow = SlowSend(10, 0.0, answers_each_frame=True, delay=lambda k: 0.003)
    assert session(slow, StallLog()).check.latency_bound_ms == pytest.approx(3.0)
    on_time = session(echo(0.5))
    assert on_time.timing is not None and on_time.timing.onset_s is not None
    onset_frame = round(on_time.timing.onset_s / FRAME_S)
    both = SlowSend(onset_frame, 0.0025, answers_each_frame=True, delay=lambda k: 0.003)
    out = session(both, StallLog())
    assert (
        out.check.invalid == "latency window 5.5 ms > 5 ms (send 2.5, loop 0.0, model server 3.0)"
    )


def test_a_session_with_no_reply_has_no_bound() -> None:
    out = run_virtual(run_session(echo(0.5), np.zeros(16000, np.float32), SETTINGS))
    assert out.status == "no-reply" and out.check.latency_bound_ms is None


def test_the_bound_reaches_the_row(tmp_path: Path) -> None:
    at = onset_instant()
    stalled = StallLog()
    stalled.note(at - 0.004, at - 0.001)
    out = session(echo(0.5), stalled)
    (tmp_path / "s").mkdir()
    row = outcome_row("s", "en", "Joy", out, 1, tmp_path / "s", tmp_path)
    assert row.timing_valid and row.latency_bound_ms == pytest.approx(3.0)


def test_the_window_adds_its_parts_against_the_budget() -> None:
    window = LatencyWindow(send_ms=2.0, loop_stall_ms=1.5, server_stall_ms=1.6)
    check = check_timing([0.0] * 10, [0.0] * 10, 0.0, FRAME_S, TimingBudget(), window)
    assert check.latency_bound_ms == pytest.approx(5.1)
    assert check.invalid == ("latency window 5.1 ms > 5 ms (send 2.0, loop 1.5, model server 1.6)")
    roomy = TimingBudget(latency_ms=6.0)
    assert check_timing([0.0], [0.0], 0.0, FRAME_S, roomy, window).valid


class StuckSend(ScriptedClient):
    """A client whose send of frame ``stuck_frame`` never returns."""

    def __init__(self, stuck_frame: int) -> None:
        super().__init__(echo(0.5).behaviour)
        self.stuck_frame = stuck_frame

    async def send_audio(self, samples: np.ndarray) -> None:
        if len(self.sent_frames) == self.stuck_frame:
            await asyncio.Event().wait()
        await super().send_audio(samples)


def test_a_send_that_never_returns_is_recorded_late_at_the_deadline() -> None:
    out = session(StuckSend(30))
    assert out.status == "failed" and out.end_reason == "deadline"
    assert not out.check.valid
    assert out.check.send.max_ms > 1000.0  # stuck from its due time to the session's end
