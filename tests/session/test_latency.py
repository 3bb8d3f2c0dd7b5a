"""The session's latency window alone: the stall of our loop that ended as the onset's chunk was
stamped, and a co-located server's just before it, with the late sends; none without a reply."""

from __future__ import annotations

from duplexsim.core.records import EventRecords
from duplexsim.core.stalls import StallLog
from duplexsim.core.timing import ReplyTiming, TimingBudget, check_timing
from duplexsim.session.latency import STAMP_SLACK_S, reply_window

T0 = 50.0


def records() -> EventRecords:
    r = EventRecords()
    for n in range(100):  # frame 60 (due 1.2 s, after the speech end) returned 3 ms late
        r.add_send(n, n * 0.02 + (0.003 if n == 60 else 0.0), n * 0.02, 320)
    r.add_received(1.705, 320, 1.70, None, False)  # the onset's chunk, stamped at 1.705 s
    return r


TIMING = ReplyTiming(1.2, 1.70, 2.0, 0.5, 0.3, 0.0)


def stalls(*spans: tuple[float, float]) -> StallLog:
    log = StallLog()
    for lo, hi in spans:
        log.note(T0 + lo, T0 + hi)
    return log


def test_the_window_adds_late_sends_and_the_stalls_at_the_onsets_stamp() -> None:
    loop = stalls((1.700, 1.7045))  # ended just before the stamp: the chunk waited for it
    server = stalls((1.690, 1.6995))  # the fake's, as the chunk left it
    w = reply_window(TIMING, records(), 0.02, 16000, T0, loop, server)
    assert w is not None
    # from the stall's start to the stamp: the chunk may have come in as the stall began
    assert (w.send_ms, w.loop_stall_ms, w.server_stall_ms) == (3.0, 5.0, 9.5)


def test_a_busy_span_that_ran_into_the_stamp_counts_whole() -> None:
    # three stalls with short iterations between them (under the stamp's slack): a reply served
    # on this loop, or read behind other callbacks, waited through all of them
    loop = stalls((1.690, 1.6935), (1.6940, 1.6980), (1.6988, 1.7040))
    w = reply_window(TIMING, records(), 0.02, 16000, T0, loop, None)
    assert w is not None and abs(w.loop_stall_ms - 15.0) < 1e-9
    # a gap longer than the slack: the loop polled its sockets in between
    apart = stalls((1.690, 1.6935), (1.6960, 1.7040))
    w = reply_window(TIMING, records(), 0.02, 16000, T0, apart, None)
    assert w is not None and abs(w.loop_stall_ms - 9.0) < 1e-9


def test_stalls_away_from_the_stamp_do_not_count() -> None:
    loop = stalls((1.0, 1.1), (1.7055 + STAMP_SLACK_S, 1.8))
    w = reply_window(TIMING, records(), 0.02, 16000, T0, loop, None)
    assert w is not None and (w.loop_stall_ms, w.server_stall_ms) == (0.0, None)


def test_no_reply_no_window() -> None:
    none = ReplyTiming(1.2, None, None, None, None, 0.0)
    assert reply_window(none, records(), 0.02, 16000, T0, StallLog(), None) is None


def test_a_loop_that_records_no_stalls_leaves_the_window_not_known() -> None:
    """asyncio's own loop cannot say what it added: the latency is not vouched for."""
    no_log = reply_window(TIMING, records(), 0.02, 16000, T0, None, None)
    quiet = reply_window(TIMING, records(), 0.02, 16000, T0, StallLog(), None)
    assert no_log is not None and quiet is not None
    assert (no_log.loop_stall_ms, no_log.bound_ms, no_log.known) == (None, None, False)
    assert (quiet.loop_stall_ms, quiet.known) == (0.0, True)
    assert no_log.send_ms == quiet.send_ms
    check = check_timing([0.0] * 10, [], 0.0, 0.02, TimingBudget(), no_log)
    assert check.invalid == "latency window not known (send 3.0, loop not recorded)"
    assert check.latency_bound_ms is None and check.faithful and check.paced
    assert check_timing([0.0] * 10, [], 0.0, 0.02, TimingBudget(), quiet).valid


def answering(turnaround_s: float, late_s: float = 0.0) -> EventRecords:
    """A model that answers each 20 ms frame with one as it reads it, ``turnaround_s`` after the
    send returned; the frame its onset answers (85, due 1.70 s) returned ``late_s`` late."""
    r = EventRecords()
    for n in range(100):
        t = n * 0.02 + (late_s if n == 85 else 0.0)
        r.add_send(n, t, n * 0.02, 320)
        r.add_received(t + turnaround_s, 320, t + turnaround_s, None, n < 85)
    return r


def test_a_fake_answering_each_frame_is_late_by_its_frame_and_its_answers_time_only() -> None:
    timing = ReplyTiming(1.2, 1.70 + 0.0015, 2.0, 0.5, 0.3, 0.0)  # the onset's chunk, 85
    # a busy span of 15 ms ran into the stamp and the fake stalled 9 ms just before it, yet the
    # answer came 1.5 ms after its frame left: neither stall moved the reply
    loop = stalls((1.688, 1.6935), (1.6940, 1.6980), (1.6988, 1.7030))
    server = stalls((1.690, 1.699))
    w = reply_window(
        timing, answering(0.0015), 0.02, 16000, T0, loop, server, answers_each_frame=True
    )
    assert w is not None and w.bound_ms is not None
    assert (w.send_ms, w.bound_ms) == (0.0, 1.5)
    assert w.loop_stall_ms == 1.5 and w.server_stall_ms == 0.0  # the loop's part, at most
    # its frame left 2 ms late and its answer took 4 ms: 6 ms, all of it the machine's
    timing = ReplyTiming(1.2, 1.70 + 0.006, 2.0, 0.5, 0.3, 0.0)
    quiet = stalls((1.7045, 1.7055))  # our loop was busy 1.5 ms of those 4
    w = reply_window(
        timing, answering(0.004, 0.002), 0.02, 16000, T0, quiet, server, answers_each_frame=True
    )
    assert w is not None and (w.send_ms, w.loop_stall_ms, w.server_stall_ms) == (2.0, 1.5, 2.5)
    assert not check_timing([0.0] * 10, [], 0.0, 0.02, TimingBudget(), w).valid
    # the fake stalled 3 ms of those 4 after the frame left: that part is the server's
    stalled = stalls((1.7025, 1.7055))
    w = reply_window(
        timing, answering(0.004, 0.002), 0.02, 16000, T0, quiet, stalled, answers_each_frame=True
    )
    assert w is not None and (w.send_ms, w.loop_stall_ms, w.server_stall_ms) == (2.0, 1.0, 3.0)
    # without its server's log the answer's time cannot be told from the model's own
    w = reply_window(timing, answering(0.004, 0.002), 0.02, 16000, T0, quiet, None,
                     answers_each_frame=True)  # fmt: skip
    assert w is not None and w.server_stall_ms is None
