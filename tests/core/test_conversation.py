from __future__ import annotations

import pytest

from duplexsim.core.conversation import TALKED_OVER, Conversation
from duplexsim.core.turns import EndReason, TurnSettings

SETTINGS = TurnSettings(hangover_s=1.0, max_reply_s=20.0, reply_timeout_s=5.0)
F = 0.01


def speak(c: Conversation, start: float, end: float) -> None:
    """Voiced 10 ms frames over [start, end), then the VAD has heard up to ``end``."""
    n0, n1 = round(start / F), round(end / F)
    for k in range(n0, n1):
        c.voiced(k * F, (k + 1) * F)
    c.heard(end)


def now(c: Conversation, t: float) -> list[tuple[int, str]]:
    c.heard(t)
    return c.tick(t, lambda last: None)


def test_one_turn_is_the_reply_detector():
    c = Conversation(SETTINGS)
    c.set_context_end(2.0)
    speak(c, 2.5, 4.0)
    assert now(c, 4.99) == []
    assert now(c, 5.0) == [(0, "vad-hangover")]
    assert c.reply(0).onset_s == 2.5 and c.reply(0).ended_at_s == pytest.approx(5.0)
    assert c.first is c.turns[0].detector


def test_a_talked_over_reply_stops_at_its_first_yield_gap_and_the_rest_answers_the_new_turn():
    c = Conversation(SETTINGS)
    c.set_context_end(2.0)
    speak(c, 2.5, 4.0)
    turn = c.open_turn(3.5, 4.5, speech_end_s=4.4)
    speak(c, 4.0, 4.3)  # talks on over the user for 0.3 s: a pause of 0.4 s is not a stop
    speak(c, 4.7, 5.0)
    assert c.turns[0].open and c.reply(turn).onset_s is None
    speak(c, 5.5, 6.5)  # 0.5 s silent: it stopped at 5.0; this answers turn 1
    assert c.turns[0].stopped_s == 5.0 and c.turns[0].end_reason == TALKED_OVER
    assert c.reply(0).ended_at_s == 5.0
    assert c.reply(turn).onset_s == 5.5 and c.reply(turn).last_voiced_end_s == 6.5
    assert now(c, 7.5) == [(0, "talked-over"), (1, "vad-hangover")]


def test_silence_heard_stops_a_talked_over_reply_without_more_speech():
    c = Conversation(SETTINGS)
    c.set_context_end(1.0)
    speak(c, 1.5, 3.0)
    c.open_turn(2.8, 3.6)
    c.heard(3.49)
    assert c.turns[0].open
    c.heard(3.5)
    assert c.turns[0].stopped_s == 3.0


def test_a_model_that_talks_through_keeps_the_floor_and_never_answers():
    c = Conversation(SETTINGS)
    c.set_context_end(1.0)
    speak(c, 1.5, 3.0)
    c.open_turn(2.0, 2.5)
    speak(c, 3.0, 9.0)
    assert c.turns[0].open and c.reply(0).last_voiced_end_s == 9.0
    assert now(c, 7.5) == [(1, "no-reply")]  # 2.5 + the 5 s reply timeout
    assert c.reply(1).onset_s is None


def test_a_turn_opened_before_the_reply_began_leaves_it_without_reply():
    c = Conversation(SETTINGS)
    c.set_context_end(1.0)
    c.open_turn(1.2, 2.0)
    assert c.turns[0].stopped_s == 1.2 and c.reply(0).onset_s is None
    speak(c, 2.2, 3.0)
    assert c.reply(1).onset_s == 2.2


def test_next_turn_after_the_reply_ended_is_not_talked_over():
    c = Conversation(SETTINGS)
    c.set_context_end(1.0)
    speak(c, 1.5, 2.0)
    assert now(c, 3.0) == [(0, "vad-hangover")]
    c.open_turn(3.2, 4.0)
    assert c.turns[0].talked_over_s is None and c.turns[0].end_reason == "vad-hangover"
    speak(c, 3.0, 3.1)  # before the turn: nobody's reply
    speak(c, 4.3, 5.0)
    assert c.reply(1).onset_s == 4.3


def test_end_of_turn_goes_to_the_reply_speaking():
    c = Conversation(SETTINGS)
    c.set_context_end(1.0)
    speak(c, 1.5, 3.0)
    c.open_turn(2.0, 2.5)
    c.end_of_turn(3.0)
    assert c.turns[0].detector.ended is EndReason.END_OF_TURN
    assert c.turns[1].open


def test_onsets_are_refined_once():
    calls = []

    def refine(t: float, end: float) -> float:
        calls.append(t)
        return t - 0.0042

    c = Conversation(SETTINGS, refine=refine)
    c.set_context_end(1.0)
    speak(c, 1.5, 2.0)
    assert c.reply(0).onset_s == pytest.approx(1.4958)
    assert c.onset_s(0) == pytest.approx(1.4958) and calls == [1.5]


def test_pending_asks_every_open_reply():
    c = Conversation(SETTINGS)
    c.set_context_end(1.0)
    speak(c, 1.5, 2.0)
    assert not c.pending(2.5, lambda last: None)
    assert c.pending(3.0, lambda last: None)


def test_the_models_speech_is_kept_whole_its_pauses_merged():
    c = Conversation(SETTINGS)
    c.set_context_end(1.0)
    speak(c, 1.5, 2.0)
    speak(c, 2.4, 3.0)  # a 0.4 s pause: the same speech
    speak(c, 3.5, 4.0)  # 0.5 s: a new stretch
    c.open_turn(4.5, 5.0)
    speak(c, 5.2, 5.5)
    assert c.speech == [[1.5, 3.0], [3.5, 4.0], [5.2, 5.5]]


def test_a_talked_over_replys_tail_heard_after_its_end_of_turn_stays_its_own():
    c = Conversation(SETTINGS)
    c.set_context_end(1.0)
    speak(c, 1.5, 3.0)
    c.open_turn(2.5, 3.5)
    c.end_of_turn(3.0)  # the protocol says the reply is over before the VAD heard its end
    speak(c, 3.0, 3.02)
    assert c.reply(1).onset_s is None
    speak(c, 3.6, 4.0)  # after a yield gap: the answer
    assert c.reply(1).onset_s == 3.6
