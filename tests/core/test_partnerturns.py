"""A partner model's utterances as the user's turns: pure, on the two conversations' own frames."""

from __future__ import annotations

import math

import pytest

from duplexsim.core.conversation import Conversation
from duplexsim.core.partnerturns import PartnerLimits, PartnerTurns
from duplexsim.core.turns import TurnSettings

FRAME = 0.01  # the VAD's
DELAY = 0.12
TWO = PartnerLimits(turns=2, time_s=30.0)


def speak(conv: Conversation, start_s: float, end_s: float) -> None:
    for k in range(round(start_s / FRAME), round(end_s / FRAME)):
        conv.voiced(k * FRAME, (k + 1) * FRAME)


def hear(conv: Conversation, now_s: float) -> None:
    conv.heard(now_s)
    conv.tick(now_s, lambda last: None)  # time passing is its silence


def pair(limits: PartnerLimits = TWO) -> PartnerTurns:
    model = Conversation(TurnSettings(hangover_s=0.3, max_reply_s=4.0, reply_timeout_s=1.0))
    partner = Conversation(TurnSettings(hangover_s=0.3, max_reply_s=4.0, reply_timeout_s=math.inf))
    model.set_context_end(1.0)
    return PartnerTurns(partner, model, limits, DELAY, reply_timeout_s=1.0, back_s=0.1)


def frames(turns: PartnerTurns, start_s: float, end_s: float) -> None:
    """The session's frames of 20 ms from ``start_s`` to ``end_s``, both sides heard up to each."""
    for k in range(round(start_s / 0.02), round(end_s / 0.02)):
        a = k * 0.02
        hear(turns.partner, a)
        hear(turns.model, a)
        turns.decide(a, a + 0.02)


def first_exchange(turns: PartnerTurns) -> None:
    """The model answers the context [1.2, 2.0); the partner speaks [2.5, 3.0)."""
    speak(turns.model, 1.2, 2.0)
    speak(turns.partner, 2.5, 3.0)


def test_an_utterance_is_a_user_turn_from_where_it_is_heard_to_where_its_speech_ends():
    turns = pair()
    first_exchange(turns)
    frames(turns, 0.0, 2.62)
    assert len(turns.model.turns) == 1  # the partner began at 2.5: heard from 2.62 on
    frames(turns, 2.62, 2.64)
    (k,) = turns.opened
    turn = turns.model.turns[k]
    assert (k, turn.start_s, turn.end_s) == (1, 2.5 + DELAY, math.inf)
    frames(turns, 2.64, 3.3)
    assert turns.ended == 0  # its end is decided a hangover after its last speech
    frames(turns, 3.3, 3.32)
    assert turns.ended == 1
    assert turn.end_s == turn.speech_end_s == pytest.approx(3.0 + DELAY)
    assert turns.partner.turns[1].start_s == pytest.approx(3.3)  # it listens again


def test_past_the_turn_limit_the_partner_is_muted_and_opens_no_turn():
    turns = pair(PartnerLimits(turns=1, time_s=30.0))
    first_exchange(turns)
    frames(turns, 0.0, 3.4)
    assert turns.muted_from_s == pytest.approx(3.3)  # where its last utterance ended
    speak(turns.partner, 3.5, 4.0)
    frames(turns, 3.4, 5.0)
    assert turns.opened == [1] and len(turns.model.turns) == 2


def test_the_session_is_over_once_the_last_turns_reply_is():
    turns = pair(PartnerLimits(turns=1, time_s=30.0))
    first_exchange(turns)
    frames(turns, 0.0, 3.4)
    assert not turns.finished(3.4)  # the reply to the partner's turn has not come yet
    speak(turns.model, 3.5, 4.0)
    frames(turns, 3.4, 4.3)
    assert not turns.finished(4.3)
    frames(turns, 4.3, 4.32)
    assert turns.finished(4.32) and turns.end_reason == "turn-limit"


def test_the_time_limit_ends_it_whatever_is_under_way():
    turns = pair(PartnerLimits(turns=5, time_s=2.8))
    first_exchange(turns)
    frames(turns, 0.0, 2.78)
    assert not turns.finished(2.78)
    assert turns.finished(2.8) and turns.end_reason == "time-limit"
    (cut,) = turns.settle(2.8, lambda j: None)
    assert (cut.cut, cut.end_s, cut.decided_s) == (True, 2.8, None)
    assert cut.to_dict()["why"] == "the partner model spoke (cut by the session's end)"


def test_a_silent_partner_ends_it_a_reply_timeout_after_it_heard_the_last_reply():
    turns = pair()
    speak(turns.model, 1.2, 2.0)
    frames(turns, 0.0, 3.52)
    assert turns.model.turns[0].ended_at_s == pytest.approx(2.3)
    # heard 0.1 s later, it had 1 s to answer, which would be heard DELAY later
    assert not turns.finished(3.50)
    assert turns.finished(3.52) and turns.end_reason == "partner-silent"


def test_a_partner_that_hung_up_ends_it_once_every_reply_is_over():
    turns = pair()
    speak(turns.model, 1.2, 2.0)
    frames(turns, 0.0, 2.4)
    turns.closed = True
    assert turns.finished(2.4) and turns.end_reason == "partner-closed"


def test_settled_utterances_take_their_refined_ends_and_read_as_next_turns():
    turns = pair()
    first_exchange(turns)
    frames(turns, 0.0, 3.4)
    (u,) = turns.settle(3.4, lambda j: 2.9931)
    assert (u.index, u.turn, u.cut, u.decided_s) == (0, 1, False, pytest.approx(3.3))
    assert u.end_s == pytest.approx(2.9931 + DELAY)
    assert turns.model.turns[1].speech_end_s == pytest.approx(2.9931 + DELAY)
    d = u.to_dict()
    assert (d["partner"], d["fired"], d["turn"], d["opens_turn"], d["by"]) == (
        "next_turn", True, 0, 1, "model",
    )  # fmt: skip
    assert d["at_s"] == pytest.approx(2.62) and d["partner_onset_s"] == pytest.approx(2.5)


@pytest.mark.parametrize(("turns", "time_s"), [(0, 10.0), (1, 0.0), (1, math.inf)])
def test_limits_are_checked(turns, time_s):
    with pytest.raises(ValueError, match="partner's"):
        PartnerLimits(turns, time_s)


def test_the_last_speech_frame_of_an_utterance_its_protocol_ended_early_is_no_new_one():
    turns = pair()
    speak(turns.model, 1.2, 2.0)
    speak(turns.partner, 2.5, 2.95)
    frames(turns, 0.0, 2.96)
    turns.partner.end_of_turn(2.955)  # its protocol: the utterance is over, mid-frame
    frames(turns, 2.96, 2.98)
    turns.partner.voiced(2.95, 2.96)  # the VAD's last, partial frame, decided after
    frames(turns, 2.98, 4.0)
    assert turns.partner.turns[1].start_s == pytest.approx(2.96)
    assert turns.partner.turns[1].detector.onset_s is None and turns.opened == [1]
