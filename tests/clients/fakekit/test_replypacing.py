"""Reply pacing: a burst at once, then SPEEDUP x the timeline, in chunks; the wake-up position
of each chunk is exactly where it falls due."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from duplexsim.clients.fakekit.replypacing import (
    BURST_S,
    CHUNK_S,
    SPEEDUP,
    PacedReply,
    lead_in,
)

RATE = 16000


def reply(seconds: float, *, out_rate: int = RATE, chunk_s: float = CHUNK_S) -> PacedReply:
    pcm = bytes(2 * round(seconds * out_rate))
    return PacedReply.split(
        pcm, out_rate, start=1000, end=1000 + 5 * RATE, rate=RATE, chunk_s=chunk_s
    )


def test_split_cuts_chunks_of_chunk_s_at_the_output_rate() -> None:
    r = reply(0.25, out_rate=24000)
    assert [len(c) for c in r.chunks] == [4800, 4800, 2400]
    assert (r.start, r.end, r.rate, r.sent) == (1000, 1000 + 5 * RATE, RATE, 0)
    assert [len(c) for c in reply(0.1, chunk_s=0.04).chunks] == [1280, 1280, 640]


def test_the_burst_goes_at_once_and_nothing_before_the_start_adds_to_it() -> None:
    r = reply(3.0)
    assert r.take_due(0) == range(0, round(BURST_S / CHUNK_S))  # before the start: the burst
    assert r.take_due(1000) == range(10, 10)
    assert r.sent == 10 and not r.generated


def test_after_the_burst_chunks_come_speedup_times_faster_than_the_timeline() -> None:
    r = reply(3.0)
    r.take_due(1000)
    elapsed = 0.5  # s of timeline: 0.5 x 4 = 2 s more of reply
    assert r.take_due(1000 + round(elapsed * RATE)) == range(
        10, 10 + round(SPEEDUP * elapsed / CHUNK_S)
    )
    assert r.take_due(10**9) == range(30, 30)  # never past the last chunk
    assert r.generated and r.bytes_sent == sum(len(c) for c in r.chunks)


@pytest.mark.parametrize("chunk_s", [0.1, 0.04])
def test_chunks_due_are_exactly_the_burst_and_speedup_times_the_timeline(chunk_s: float) -> None:
    """Exact to the sample, against rational arithmetic: a position where the count is a whole
    number in exact terms never sends one more for a rounding error."""
    r = reply(4.0, chunk_s=chunk_s)
    burst, speedup, chunk = (Fraction(str(x)) for x in (BURST_S, SPEEDUP, chunk_s))
    for elapsed in range(0, RATE):
        r.sent = 0
        exact = math.ceil((burst + speedup * Fraction(elapsed, RATE)) / chunk)
        assert r.take_due(r.start + elapsed).stop == min(len(r.chunks), exact), elapsed


@pytest.mark.parametrize("chunk_s", [0.1, 0.04])
def test_the_next_wake_up_always_finds_a_chunk_due(chunk_s: float) -> None:
    r = reply(4.0, chunk_s=chunk_s)
    r.take_due(r.start)
    while not r.generated:
        sent = r.sent
        assert r.take_due(r.next_due()).start == sent and r.sent > sent  # never a wasted wake-up
    assert r.next_due() == r.end


def test_lead_in_is_the_silence_from_the_chunk_start_to_the_first_sample() -> None:
    assert lead_in(1160, 1000, 16000, 24000) == bytes(2 * 240)
    assert lead_in(900, 1000, 16000, 48000) == b""  # a start already passed leads with nothing
