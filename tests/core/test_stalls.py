"""The stall log (pure) and its one decoder of outside bytes: a fake server's report lines."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duplexsim.core.stalls import MIN_STALL_S, StallLog, parse_stall_line, stall_line
from duplexsim.session import eventloop
from tests.helpers.waits import async_wait_until


def test_short_stalls_are_not_kept() -> None:
    log = StallLog()
    log.note(1.0, 1.0 + MIN_STALL_S / 2)
    assert len(log) == 0 and log.worst(0.0, 10.0) == 0.0


def test_worst_is_the_longest_stall_overlapping_the_window() -> None:
    log = StallLog()
    log.note(1.000, 1.003)  # 3 ms
    log.note(1.010, 1.018)  # 8 ms
    log.note(1.050, 1.051)  # 1 ms
    assert log.worst(1.0, 1.005) == pytest.approx(0.003)
    assert log.worst(1.004, 1.009) == 0.0  # between stalls
    assert log.worst(1.017, 1.060) == pytest.approx(0.008)  # overlaps the 8 ms one's end
    assert log.worst(1.052, 2.0) == 0.0


def test_overlapping_stalls_merge() -> None:
    log = StallLog()
    log.note(1.000, 1.004)
    log.note(1.003, 1.006)  # a late wake-up inside a busy span, say
    assert len(log) == 1 and log.worst(1.0, 1.0) == pytest.approx(0.006)


def test_old_stalls_are_let_go_and_the_count_is_bounded() -> None:
    log = StallLog(keep_s=10.0, max_stalls=3)
    for k in range(5):
        log.note(float(k), k + 0.001)
    assert len(log) == 3 and log.noted == 5
    log.note(100.0, 100.001)
    assert len(log) == 1  # everything older than keep_s before it is gone


def test_since_gives_the_stalls_ending_after_a_time() -> None:
    log = StallLog()
    log.note(1.0, 1.001)
    log.note(2.0, 2.001)
    assert log.since(1.5) == [(2.0, 2.001)]
    assert log.since(0.0) == [(1.0, 1.001), (2.0, 2.001)]
    assert log.since(3.0) == []


def test_a_line_round_trips() -> None:
    assert parse_stall_line(stall_line(12.5, 12.5061)) == (12.5, 12.5061)


@pytest.mark.parametrize(
    "line",
    ["", "stall", "stall 1 2 3", "stall a b", "stall 2 1", "stall -1 1", "stall 1 inf",
     "stall nan nan", "stall 0 1e9", "serving echo over pcm-ws on ws://x", "STALL 1 2"],
)  # fmt: skip
def test_other_lines_are_not_stalls(line: str) -> None:
    assert parse_stall_line(line) is None


@given(st.text(max_size=200))
def test_any_line_parses_or_is_refused_without_raising(line: str) -> None:
    stall = parse_stall_line(line)
    if stall is not None:
        start, end = stall
        assert 0.0 <= start <= end < float("inf")


@pytest.mark.skipif(eventloop.FineTimeoutSelector is None, reason="epoll is Linux only")
def test_the_loop_records_a_callback_that_holds_it() -> None:
    import time

    async def main() -> tuple[float, float, float]:
        log = eventloop.stall_log()
        assert log is not None
        await asyncio.sleep(0.01)  # a callback of its own, after a wait of the loop's
        start = time.monotonic()
        while time.monotonic() - start < 0.008:  # a callback that runs 8 ms
            pass
        end = time.monotonic()
        await asyncio.sleep(0.01)  # the loop's next wait notes the callback that held it
        return log.worst(start, end), start, end

    worst, start, end = eventloop.run(main())
    assert end - start <= worst < end - start + 0.005


def test_a_loop_not_made_here_has_no_log() -> None:
    async def main() -> object:
        return eventloop.stall_log()

    assert asyncio.run(main()) is None


def test_run_queue_wait_is_per_thread_and_never_negative() -> None:
    import threading

    from duplexsim.session.eventloop import RunQueueWait

    wait = RunQueueWait()
    try:
        assert wait.since_last() == 0.0  # the first call opens the counter in this thread
        total = 0.0
        for _ in range(5):
            got = wait.since_last()
            assert got >= 0.0
            total += got
        assert total < 1.0
        elsewhere: list[float] = []
        t = threading.Thread(target=lambda: elsewhere.append(wait.since_last()))
        t.start()
        t.join()
        assert elsewhere == [0.0]  # another thread's figures are not this one's
    finally:
        wait.close()


async def test_a_fake_reports_its_stalls_to_the_run_that_started_it() -> None:
    import os
    import signal
    import time

    from duplexsim.run.fakes import FakeModelProcess

    async with FakeModelProcess("pcm-ws", "silent") as fake:
        assert fake._proc is not None
        # time for its loop to arm its 50 ms report timer, just after it says it serves: a loop
        # stopped while it waits with no timer due sees no stall. Nothing it says marks that.
        await asyncio.sleep(0.2)
        stopped = time.monotonic()
        os.kill(fake._proc.pid, signal.SIGSTOP)  # the server's loop cannot run for 0.3 s
        time.sleep(0.3)
        os.kill(fake._proc.pid, signal.SIGCONT)
        resumed = time.monotonic()
        await async_wait_until(
            lambda: fake.stalls.worst(stopped, resumed) >= 0.2, what="the stall's report"
        )
        # its wait ended up to 0.3 s late (it sleeps at most 50 ms between reports)
        assert 0.2 <= fake.stalls.worst(stopped, resumed) <= resumed - stopped + 0.1


async def test_a_fake_report_is_read_line_by_line_and_anything_else_ignored() -> None:
    from duplexsim.run.fakes import FakeModelProcess

    fake = FakeModelProcess("pcm-ws", "silent")
    reader = asyncio.StreamReader(limit=1024)
    reader.feed_data(b"stall 1.0 1.002\n")
    reader.feed_data(b"x" * 5000 + b"\n")  # past the reader's limit
    reader.feed_data(b"\xff\xfe garbage\nstall 2 1\nstall 3.0 3.004\n")
    reader.feed_data(b"stall 4.0 4.001")  # the last line, cut off at exit
    reader.feed_eof()
    await asyncio.wait_for(fake._read_stalls(reader), 5)
    assert fake.stalls.since(0.0) == [(1.0, 1.002), (3.0, 3.004), (4.0, 4.001)]


async def test_a_served_fake_reports_the_spans_its_servers_held_answers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``serve --report-stalls`` passes on a WebRTC fake's held frames with its loop's stalls,
    each once, in time order."""
    from duplexsim.cli.serve_cmd import STALL_REPORT_S, _report_stalls

    held = StallLog()
    held.note(5.0, 5.004)
    reporter = asyncio.create_task(_report_stalls([held]))
    await asyncio.sleep(2.5 * STALL_REPORT_S)
    held.note(6.0, 6.002)
    await asyncio.sleep(2.5 * STALL_REPORT_S)
    reporter.cancel()
    lines = [parse_stall_line(line) for line in capsys.readouterr().out.splitlines()]
    held_spans = [(5.0, 5.004), (6.0, 6.002)]
    assert [stall for stall in lines if stall in held_spans] == held_spans  # with the loop's
