"""The reply tracker as a partner reads it: every turn's reply from one stream of speech frames,
how far the model's speech is decided, and the replies that ended, each once."""

from __future__ import annotations

import numpy as np
import pytest

from duplexsim.core.replytracker import ReplyTracker
from duplexsim.core.turns import TurnSettings
from duplexsim.core.vad import VadConfig
from tests.helpers.signals import voiced_signal

RATE = 16000
CHUNK = RATE // 50
TURNS = TurnSettings(hangover_s=1.0, max_reply_s=6.0, reply_timeout_s=2.0)


def feed(t: ReplyTracker, x: np.ndarray, start_s: float) -> None:
    """``x`` in 20 ms chunks arriving when due (silence sent as silence), ticked after each."""
    for i in range(0, x.size, CHUNK):
        now = start_s + i / RATE
        chunk = x[i : i + CHUNK]
        t.place(chunk, now, None, silent=not chunk.any())
        t.tick(now + CHUNK / RATE)


def test_speech_after_a_talked_over_reply_stops_answers_the_new_turn():
    t = ReplyTracker(RATE, TURNS, VadConfig())
    t.every_frame = True
    t.context_ended(0.5)
    silence = np.zeros(round(0.6 * RATE), np.float32)
    feed(t, np.zeros(RATE, np.float32), 0.0)
    feed(t, voiced_signal(1.0), 1.0)  # the reply, from 1.0 s
    assert t.open_turn(1.5, 2.0, speech_end_s=1.95) == 1
    feed(t, silence, 2.0)  # it stopped at 2.0: 0.6 s silent
    feed(t, voiced_signal(1.0), 2.6)  # and answers the turn
    feed(t, np.zeros(round(1.5 * RATE), np.float32), 3.6)
    first, second = t.reply(0), t.reply(1)
    assert first.ended_at_s == pytest.approx(2.0, abs=0.02)  # where its speech stopped
    assert second.onset_s == pytest.approx(2.6, abs=0.005) and second.ended_at_s is not None
    assert [k for k, _ in t.ended_turns()] == [0, 1] and t.ended_turns() == []
    assert t.heard_s == pytest.approx(5.1, abs=0.03)  # the silence the model sent counts


def test_a_stream_that_sends_nothing_is_heard_up_to_now_less_the_bridge():
    t = ReplyTracker(RATE, TURNS, VadConfig(), continuous=False, bridge_s=0.1)
    t.every_frame = True
    t.context_ended(0.0)
    x = voiced_signal(0.5)
    for i in range(0, x.size, CHUNK):
        t.place(x[i : i + CHUNK], i / RATE, None, silent=False)
        t.tick((i + CHUNK) / RATE)
    assert t.heard_s <= 0.5 + 0.01  # its last frames may go on
    t.tick(1.0)  # nothing came: time passing is its silence, but a late chunk may bridge
    assert t.heard_s == pytest.approx(0.9)
