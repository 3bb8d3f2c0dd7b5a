"""The reply tracker alone, exact: fed audio in chunks as a session feeds it, it decides as a
re-measurement of its track does (real speech and the onset cases, plain and Opus), keeps the
reply window, ends the reply by the detector's rules and says why a reply was cut."""

from __future__ import annotations

import numpy as np
import pytest

from duplexsim.core.replytracker import ReplyTracker
from duplexsim.core.timing import measure_reply
from duplexsim.core.turns import EndReason, ReplyWindow, TurnSettings
from duplexsim.core.vad import VadConfig
from tests.helpers.onsetcases import RATE, Case, all_cases
from tests.helpers.signals import voiced_signal

TURNS = TurnSettings(hangover_s=0.5, max_reply_s=4.0, reply_timeout_s=1.0)
CHUNK = RATE // 50  # 20 ms
CASES = all_cases()


def tracker(turns: TurnSettings = TURNS, **kw: object) -> ReplyTracker:
    return ReplyTracker(RATE, turns, VadConfig(), **kw)  # type: ignore[arg-type]


def stream(t: ReplyTracker, x: np.ndarray, *, start_s: float = 0.0) -> None:
    """``x`` in 20 ms chunks, each arriving when it is due, the tracker ticked after each."""
    for i in range(0, x.size, CHUNK):
        now = start_s + i / RATE
        t.place(x[i : i + CHUNK], now, None, silent=False)
        t.tick(now + CHUNK / RATE)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_streaming_decision_is_the_re_measurements(case: Case) -> None:
    t = tracker(TurnSettings(reply_timeout_s=5.0))
    t.context_ended(0.0)
    stream(t, case.audio)
    t.finish()
    output = t.track.audio()
    live = t.timing(None, output)
    again = measure_reply(output, RATE, speech_end_s=None)
    assert live.onset_s == again.onset_s
    if case.onset_s is None:
        assert live.onset_s is None and t.onset_s is None
    else:
        assert live.onset_s is not None and abs(live.onset_s - case.onset_s) <= 0.005


def speech(seconds: float, at_s: float, total_s: float) -> np.ndarray:
    x = np.zeros(round(total_s * RATE), np.float32)
    a = round(at_s * RATE)
    n = min(round(seconds * RATE), x.size - a)
    x[a : a + n] = voiced_signal(seconds, RATE)[:n]
    return x


def test_speech_before_the_window_is_chatter() -> None:
    x = speech(0.3, 0.2, 3.0) + speech(0.5, 1.5, 3.0)
    t = tracker(window_start_s=1.0)
    t.context_ended(1.2)
    stream(t, x)
    t.finish()
    timing = t.timing(1.2, t.track.audio())
    assert timing.onset_s == pytest.approx(1.5, abs=1.5 / RATE)
    assert timing.latency_s == pytest.approx(0.3, abs=1.5 / RATE)
    again = measure_reply(t.track.audio(), RATE, speech_end_s=1.2, window_start_s=1.0)
    assert (again.onset_s, again.latency_s) == (timing.onset_s, timing.latency_s)


def test_the_window_rule_on_frames_and_on_seconds_is_one_rule() -> None:
    w = ReplyWindow(1.0)
    assert w.first_frame(0.01) == 100 and w.clip(90, 100, 0.01) is None
    assert w.clip(90, 101, 0.01) == (100, 101)
    assert not w.keeps(1.0) and w.keeps(1.01)


def test_the_reply_ends_after_the_hangover_in_the_models_own_time() -> None:
    t = tracker()
    t.context_ended(0.5)
    stream(t, speech(0.5, 0.6, 1.2))  # speech to 1.1 s, then the stream's silence to 1.2 s
    assert t.ended is None  # 0.1 s of the model's silence so far, however long we wait
    assert t.tick(5.0) is None
    stream(t, np.zeros(round(0.5 * RATE), np.float32), start_s=1.2)
    assert t.ended is EndReason.HANGOVER
    last = t.detector.last_voiced_end_s
    # at 24 kHz the VAD still holds its last frames (the resampler, a partial frame): they
    # reach the detector only once the stream is over, after the hangover ended the reply
    assert last is not None and 1.1 - 0.031 <= last <= 1.1
    assert t.detector.ended_at_s == pytest.approx(last + 0.5)


def test_a_model_that_sends_nothing_is_silent_as_time_passes() -> None:
    t = tracker(continuous=False)
    t.context_ended(0.5)
    stream(t, speech(0.5, 0.6, 1.1))
    assert t.model_s() is None
    assert t.tick(1.5) is None and t.tick(1.7) is EndReason.HANGOVER


def test_end_of_turn_waits_for_a_burst_to_play_out() -> None:
    t = tracker()
    t.context_ended(0.0)
    burst = voiced_signal(1.0, RATE)
    t.place(burst, 0.5, None, silent=False)  # a second of audio at once, placed 0.5-1.5 s
    t.end_of_turn(0.5)
    assert t.ended is EndReason.END_OF_TURN and t.detector.ended_at_s == pytest.approx(1.5)


def test_no_reply_within_the_timeout() -> None:
    t = tracker()
    t.context_ended(1.0)
    assert t.tick(1.99) is None and t.tick(2.0) is EndReason.NO_REPLY
    assert t.truncated(deadline=False) is None
    assert t.timing(0.5, t.track.audio()).onset_s is None


def test_truncation_by_length_deadline_and_a_close_mid_speech() -> None:
    long = tracker()
    long.context_ended(0.0)
    stream(long, speech(5.0, 0.2, 5.2))
    assert long.ended is EndReason.MAX_LENGTH and long.truncated(deadline=False) == "max-length"
    timing = long.timing(None, long.track.audio())
    assert timing.duration_s is not None and timing.duration_s <= TURNS.max_reply_s + 1 / RATE

    cut = tracker()
    cut.context_ended(0.0)
    stream(cut, speech(1.0, 0.2, 0.8))  # the stream stops mid-speech
    assert cut.truncated(deadline=True) == "deadline"
    cut.closed(seen_s=0.8)
    assert (
        cut.closed_at_s == pytest.approx(0.8) and cut.truncated(deadline=False) == "server-closed"
    )

    after = tracker()
    after.context_ended(0.0)
    stream(after, speech(0.3, 0.2, 0.8))  # silence sent after the speech, then the close
    after.closed(seen_s=0.8)
    assert after.truncated(deadline=False) is None
