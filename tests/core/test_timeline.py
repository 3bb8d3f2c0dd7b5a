from __future__ import annotations

import functools
import operator

import numpy as np
import pytest

from duplexsim.core.retry import RetryPolicy
from duplexsim.core.timeline import OutputTrack, Schedule, inaudible
from duplexsim.core.timing import measure_reply, send_stats, speech_end
from duplexsim.core.turns import EndReason, ReplyDetector, TurnSettings
from duplexsim.run.runner import in_shard, parse_shard
from tests.helpers.signals import voiced_signal


def test_schedule_is_absolute():
    s = Schedule(0.02)
    assert [s.due(n) for n in (0, 1, 50, 3000)] == [0.0, 0.02, 1.0, 60.0]
    assert s.frames_for(321, 320) == 2 and s.frames_for(320, 320) == 1 and s.frames_for(0, 320) == 0


def test_placement_at_arrival_and_back_to_back_for_bursts():
    track = OutputTrack(rate=1000)
    a = track.place(np.ones(100, np.float32), arrival_s=0.5)
    assert a.start_s == 0.5 and a.queued_s == 0.0
    # a burst: both arrive at 0.55 but the second plays after the first
    b = track.place(np.full(200, 2, np.float32), arrival_s=0.55)
    c = track.place(np.full(100, 3, np.float32), arrival_s=0.55, offset_s=0.9)
    assert (b.start_s, c.start_s) == (0.6, 0.8)
    assert c.queued_s == pytest.approx(0.25) and c.offset_s == 0.9
    # after a gap, placement follows arrival again
    d = track.place(np.full(10, 4, np.float32), arrival_s=2.0)
    assert d.start_s == 2.0
    audio = track.audio(min_duration_s=3.0)
    assert audio.size == 3000
    assert audio[499] == 0 and audio[500] == 1 and audio[600] == 2 and audio[800] == 3
    assert audio[900:2000].sum() == 0 and audio[2000] == 4


def test_placement_grows_beyond_initial_buffer_and_clamps_negative_arrival():
    track = OutputTrack(rate=100, initial_s=0.1)
    track.place(np.ones(5, np.float32), arrival_s=-0.2)
    track.place(np.ones(50, np.float32), arrival_s=1.0)
    audio = track.audio()
    assert audio.size == 150 and audio[:5].sum() == 5 and audio[100:150].sum() == 50


def _detector(**kw: float) -> ReplyDetector:
    return ReplyDetector(
        TurnSettings(hangover_s=2.0, max_reply_s=5.0, reply_timeout_s=3.0), context_end_s=10.0, **kw
    )


def test_detector_no_reply_after_timeout():
    d = _detector()
    assert d.tick(12.99) is None
    assert d.tick(13.0) is EndReason.NO_REPLY and d.onset_s is None


def test_detector_hangover_after_last_voiced_frame():
    d = _detector()
    for k in range(1050, 1100):  # 10.5 s .. 11.0 s voiced in 10 ms frames
        d.voiced(k / 100, (k + 1) / 100)
    assert d.onset_s == 10.5 and d.last_voiced_end_s == 11.0
    assert d.tick(12.99) is None
    assert d.tick(13.0) is EndReason.HANGOVER and d.ended_at_s == 13.0


def test_detector_max_length_and_end_of_turn():
    d = _detector()
    for k in range(1100, 1700):
        d.voiced(k / 100, (k + 1) / 100)
        d.tick((k + 1) / 100)
    assert d.ended is EndReason.MAX_LENGTH and d.ended_at_s == pytest.approx(16.0)
    e = _detector()
    e.end_of_turn(10.2)  # before any speech: ignored
    assert e.ended is None
    e.voiced(10.3, 10.31)
    e.end_of_turn(10.4)
    assert e.ended is EndReason.END_OF_TURN


def test_detector_ignores_chatter_before_window_and_never_ends_inside_context():
    d = _detector(window_start_s=6.0)
    d.voiced(1.0, 1.5)  # early chatter
    assert d.onset_s is None
    d.voiced(8.0, 8.2)  # barge-in during A's final turn
    assert d.onset_s == 8.0
    assert d.tick(9.9) is None  # hangover passed, but the context is still streaming
    assert d.tick(10.1) is None
    assert d.tick(10.2) is EndReason.HANGOVER


def test_end_of_turn_inside_the_context_does_not_end_the_session():
    d = _detector(window_start_s=6.0)
    d.voiced(8.0, 8.5)  # the model answered a pause in A's final turn
    d.end_of_turn(8.6)  # ... and its turn ended while A still talks
    assert d.ended is None and d.tick(9.99) is None
    assert d.tick(10.49) is None and d.tick(10.5) is EndReason.HANGOVER  # 8.5 + 2.0
    e = _detector()
    e.voiced(9.0, 9.5)
    e.end_of_turn(10.0)  # at the context's end: it counts
    assert e.ended is EndReason.END_OF_TURN


def test_speech_end_and_reply_latency_exact():
    rate = 16000
    context = np.zeros(rate * 3, np.float32)
    context[8000 : 8000 + 16000] = voiced_signal(1.0)  # speech 0.5 .. 1.5 s
    end = speech_end(context, rate)
    assert end == pytest.approx(1.5, abs=1e-3)
    out = np.zeros(rate * 4, np.float32)
    out[int(2.3 * rate) : int(3.1 * rate)] = voiced_signal(0.8)
    t = measure_reply(out, rate, speech_end_s=end)
    assert t.onset_s == pytest.approx(2.3, abs=1e-3)
    assert t.latency_s == pytest.approx(0.8, abs=2e-3)
    assert t.duration_s == pytest.approx(0.8, abs=2e-3)
    assert t.overlap_s == 0.0


def test_reply_overlap_and_window():
    rate = 16000
    out = np.zeros(rate * 4, np.float32)
    out[int(0.2 * rate) : int(0.4 * rate)] = voiced_signal(0.2)  # chatter, outside the window
    out[int(1.0 * rate) : int(2.0 * rate)] = voiced_signal(1.0)
    t = measure_reply(out, rate, speech_end_s=1.5, window_start_s=0.5)
    assert t.onset_s == pytest.approx(1.0, abs=1e-3)
    assert t.latency_s == pytest.approx(-0.5, abs=2e-3)
    assert t.overlap_s == pytest.approx(0.5, abs=2e-3)
    none = measure_reply(out, rate, speech_end_s=1.5, window_start_s=2.5)
    assert none.onset_s is None and none.latency_s is None and none.overlap_s == 0.0


def test_send_stats():
    s = send_stats([0.001] * 99 + [0.004])
    assert s.frames == 100 and s.p50_ms == pytest.approx(1.0) and s.max_ms == pytest.approx(4.0)
    assert send_stats([]).frames == 0


def test_retry_policy():
    p = RetryPolicy(max_attempts=3, base_s=1.0, max_s=10.0, jitter=0.0)
    assert p.delay(1, retryable=True) == 1.0
    assert p.delay(2, retryable=True) == 2.0
    assert p.delay(3, retryable=True) is None
    assert p.delay(1, retryable=False) is None
    assert p.delay(1, retryable=True, retry_after_s=4.5) == 4.5
    assert p.delay(1, retryable=True, retry_after_s=100) == 10.0


def test_shards_partition_samples():
    ids = [f"s{i}" for i in range(200)]
    parts = [[s for s in ids if in_shard(s, (i, 3))] for i in range(3)]
    assert sorted(functools.reduce(operator.iadd, parts, [])) == sorted(ids)
    assert all(len(p) > 40 for p in parts)
    assert parse_shard("1/3") == (1, 3)


def test_detector_pending_predicts_tick_without_deciding():
    d = _detector()
    d.voiced(10.5, 11.0)
    assert d.pending(12.99) is None
    assert d.pending(13.0) is EndReason.HANGOVER
    assert d.ended is None  # only predicted
    d.voiced(12.9, 13.0)  # late audio keeps the reply alive
    assert d.pending(13.0) is None and d.tick(13.0) is None
    assert d.tick(15.0) is EndReason.HANGOVER


def test_silence_never_holds_back_what_follows():
    track = OutputTrack(rate=1000)
    z = np.zeros(20, np.float32)
    track.place(z, arrival_s=0.0)
    late = track.place(z, arrival_s=0.05)  # one slow frame: due at 0.02, arrived at 0.05
    assert late.silent and late.start_s == 0.05
    # the stream recovers: the next frames are placed at their arrivals, not queued behind it
    nxt = track.place(z, arrival_s=0.041)
    assert nxt.start_s == 0.041
    onset = track.place(np.ones(20, np.float32), arrival_s=0.06)
    assert onset.start_s == 0.06 and not onset.silent and track.end_s == 0.08
    # audible audio still holds back what follows (a burst plays back to back)
    after = track.place(np.ones(20, np.float32), arrival_s=0.061)
    assert after.start_s == 0.08
    audio = track.audio()
    assert audio[:60].sum() == 0 and audio[60:100].sum() == 40


def test_codec_noise_floor_is_silence():
    """Opus decodes digital silence to +-1 LSB: that must not chain chunks like speech."""
    track = OutputTrack(rate=1000)
    lsb = np.full(20, 1 / 32768, np.float32)
    track.place(lsb, arrival_s=0.0)
    late = track.place(-lsb, arrival_s=0.05)
    assert late.silent and track.end_s == 0.0
    assert track.place(lsb, arrival_s=0.041).start_s == 0.041
    quiet = np.full(20, 10 ** (-69 / 20), np.float32)  # just above the floor: audible
    assert not track.place(quiet, arrival_s=0.07).silent and track.end_s == 0.09
    assert inaudible(np.zeros(0, np.float32))


@pytest.mark.parametrize("n", [1, 2, 3, 10, 750, 1001])
def test_sorted_percentile_is_numpys_linear_percentile_exactly(n: int) -> None:
    from duplexsim.core.timing import sorted_percentile

    rng = np.random.default_rng(n)
    values = np.sort(rng.exponential(0.4, n) * rng.choice([-1.0, 1.0], n))
    for q in (0, 1, 25, 50, 90, 99, 99.9, 100):
        assert sorted_percentile(values, q) == float(np.percentile(values, q))


def test_the_stream_after_a_position_counts_the_models_audio_not_the_gaps() -> None:
    from duplexsim.core.timeline import OutputTrack

    track = OutputTrack(1000, bridge_s=0.01)
    speech = np.full(20, 0.5, np.float32)
    track.place(speech, 0.0)  # [0, 20)
    track.place(speech, 0.5)  # 480 late: a gap, placed at its arrival [500, 520)
    track.place(np.zeros(30, np.float32), 0.52)  # silence the model sent after it
    assert track.stream_after_s(0.010) == pytest.approx(0.060)  # 10 + 20 + 30 samples
    assert track.stream_after_s(0.510) == pytest.approx(0.040)
    assert track.stream_end_s == pytest.approx(0.550)  # the audible end and silence since
