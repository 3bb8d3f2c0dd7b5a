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
