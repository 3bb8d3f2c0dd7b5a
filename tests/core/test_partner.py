from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from duplexsim.core.partner import (
    DISTRACTOR_LISTEN_S,
    Backchannel,
    Distractor,
    Interrupt,
    NextTurn,
    Partner,
    PartnerScript,
    ReplyState,
    script_bound_s,
)

FRAME = 0.02
NONE = ReplyState(None, None, None)


@dataclass
class View:
    heard_s: float = 0.0
    replies: dict[int, ReplyState] = field(default_factory=dict)

    def reply(self, turn: int) -> ReplyState:
        return self.replies.get(turn, NONE)


def frame(n: int) -> tuple[float, float]:
    return n * FRAME, (n + 1) * FRAME


def script(*steps, clips=(1.0, 0.3, 2.0)) -> PartnerScript:
    return PartnerScript(tuple(steps), tuple(clips))


def test_interrupt_fires_at_onset_plus_x_inside_the_frame_that_holds_it():
    p = Partner(script(Interrupt(clip=0, after_onset_s=0.5)), context_end_s=3.0)
    view = View(replies={0: ReplyState(4.013, 4.2, None)})
    assert p.decide(view, *frame(224)) == []  # [4.48, 4.50): 4.513 is in the next frame
    (event,) = p.decide(view, *frame(225))
    assert event.at_s == pytest.approx(4.513) and event.late_s == 0.0
    assert event.fired and event.kind == "interrupt" and event.turn == 0
    assert event.opened is not None and event.opened.turn == 1
    assert event.opened.end_s == pytest.approx(4.513 + 1.0)
    assert event.why == "the model had spoken 500 ms"
    assert p.turn == 1


def test_interrupt_known_too_late_fires_at_the_frame_start():
    p = Partner(script(Interrupt(clip=0, after_onset_s=0.01)), context_end_s=0.0)
    (event,) = p.decide(View(replies={0: ReplyState(1.0, 1.05, None)}), 1.2, 1.22)
    assert event.at_s == 1.2 and event.due_s == 1.01 and event.late_s == pytest.approx(0.19)


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (ReplyState(1.0, 1.3, 3.3), "the reply ended before it could fire"),
        (ReplyState(None, None, 10.0), "no reply before it could fire"),
    ],
)
def test_interrupt_is_skipped_once_the_reply_is_over(reply, why):
    p = Partner(script(Interrupt(clip=0, after_onset_s=2.0)), context_end_s=0.0)
    (event,) = p.decide(View(replies={0: reply}), 12.0, 12.02)
    assert not event.fired and event.why == why and event.at_s is None
    assert p.armed is None and p.turn == 0


def test_backchannel_at_a_pause_fires_once_the_pause_is_heard_and_opens_no_turn():
    steps = (Backchannel(clip=1, at_pause_s=0.4), NextTurn(clip=0, gap_s=0.2))
    p = Partner(script(*steps), context_end_s=1.0)
    reply = ReplyState(1.5, 2.0, None)
    assert p.decide(View(2.39, {0: reply}), 2.40, 2.42) == []
    (event,) = p.decide(View(2.40, {0: reply}), 2.42, 2.44)
    assert event.kind == "backchannel" and event.at_s == 2.42 and event.due_s == 2.4
    assert event.opened is None and p.turn == 0
    assert event.why == "the model paused 400 ms"


def test_backchannel_after_onset_is_on_the_onset():
    p = Partner(script(Backchannel(clip=1, after_onset_s=1.2)), context_end_s=1.0)
    view = View(2.0, {0: ReplyState(1.5, 2.0, None)})
    assert p.decide(view, 2.68, 2.70) == []
    (event,) = p.decide(view, 2.70, 2.72)
    assert event.at_s == pytest.approx(2.7) and event.why == "the model had spoken 1200 ms"


def test_next_turn_waits_for_the_reply_to_end_then_the_gap():
    p = Partner(script(NextTurn(clip=2, gap_s=0.3)), context_end_s=2.0)
    speaking = View(5.0, {0: ReplyState(2.5, 4.9, None)})
    assert p.decide(speaking, 5.0, 5.02) == []
    ended = View(7.0, {0: ReplyState(2.5, 4.9, 6.9)})
    assert p.decide(ended, 7.18, 7.20) == []  # 6.9 + 0.3 = 7.2, the next frame
    (event,) = p.decide(ended, 7.20, 7.22)
    assert event.at_s == pytest.approx(7.2) and event.late_s == 0.0
    assert event.opened is not None and event.opened.end_s == pytest.approx(9.2)


def test_next_turn_after_a_timeout_plays_over_the_model():
    p = Partner(script(NextTurn(clip=0, gap_s=0.3, timeout_s=2.0)), context_end_s=3.0)
    view = View(5.0, {0: ReplyState(3.5, 5.0, None)})
    assert p.decide(view, 4.98, 5.0) == []
    (event,) = p.decide(view, 5.0, 5.02)
    assert event.at_s == 5.0 and event.why == "timeout: 2000 ms after the user's turn"


def test_next_turn_never_starts_before_the_users_turn_ends():
    p = Partner(script(NextTurn(clip=0, gap_s=0.0)), context_end_s=3.0)
    view = View(1.0, {0: ReplyState(None, None, 0.5)})  # ended (no reply) inside the context
    assert p.decide(view, 2.98, 3.0) == []
    (event,) = p.decide(view, 3.0, 3.02)
    assert event.at_s == 3.0 and event.why == "0 ms after no reply"


def test_turns_chain_each_step_watching_the_latest_turns_reply():
    steps = (NextTurn(clip=0, gap_s=0.1), NextTurn(clip=0, gap_s=0.1), NextTurn(clip=0, gap_s=0.1))
    p = Partner(script(*steps), context_end_s=1.0)
    view = View(replies={0: ReplyState(1.2, 2.0, 4.0)})
    (a,) = p.decide(view, 4.1, 4.12)
    assert a.opened.turn == 1 and p.turn == 1
    assert p.decide(view, 6.0, 6.02) == []  # turn 1's reply is not over
    view.replies[1] = ReplyState(5.5, 6.0, 8.0)
    (b,) = p.decide(view, 8.1, 8.12)
    assert (b.turn, b.opened.turn) == (1, 2)


def test_a_step_armed_by_a_skip_can_fire_in_the_same_frame():
    steps = (Interrupt(clip=0, after_onset_s=3.0), NextTurn(clip=0, gap_s=0.0))
    p = Partner(script(*steps), context_end_s=1.0)
    skipped, fired = p.decide(View(replies={0: ReplyState(1.2, 2.0, 4.0)}), 4.0, 4.02)
    assert not skipped.fired and fired.fired and fired.at_s == 4.0


def test_distractor_plays_at_its_time_whatever_the_order():
    steps = (NextTurn(clip=0, gap_s=0.1), Distractor(clip=2, at_s=1.005))
    p = Partner(script(*steps), context_end_s=5.0)
    assert p.decide(View(), 0.98, 1.0) == []
    (event,) = p.decide(View(), 1.0, 1.02)
    assert event.kind == "distractor" and event.at_s == 1.005 and event.opened is None
    assert p.armed == steps[0]


def test_finished_once_every_step_ran_every_clip_played_and_the_last_reply_ended():
    p = Partner(script(NextTurn(clip=2, gap_s=0.0)), context_end_s=1.0)
    view = View(replies={0: ReplyState(1.1, 2.0, 3.0)})
    assert not p.finished(view, 3.0)
    p.decide(view, 3.0, 3.02)  # turn 1: 3.0 to 5.0
    view.replies[1] = ReplyState(5.2, 6.0, 8.0)
    assert not p.finished(View(replies={0: view.replies[0]}), 9.0)
    assert p.finished(view, 8.0)


def test_events_record_why_and_when():
    p = Partner(script(Interrupt(clip=0, after_onset_s=0.5)), context_end_s=0.0)
    (event,) = p.decide(View(replies={0: ReplyState(1.0, 1.4, None)}), 1.5, 1.52)
    assert event.to_dict() == {
        "step": 0,
        "partner": "interrupt",
        "fired": True,
        "why": "the model had spoken 500 ms",
        "turn": 0,
        "clip": 0,
        "at_s": 1.5,
        "due_s": 1.5,
        "late_s": 0.0,
        "clip_end_s": 2.5,
        "opens_turn": 1,
    }
    assert p.events == [event]


def test_script_refuses_unknown_clips_and_ambiguous_backchannels():
    with pytest.raises(ValueError, match="clip 3"):
        PartnerScript((Interrupt(clip=3, after_onset_s=1.0),), (1.0,))
    with pytest.raises(ValueError, match="exactly one"):
        Backchannel(clip=0, at_pause_s=0.3, after_onset_s=1.0)


def test_bound_covers_every_wait_and_clip():
    s = script(Interrupt(clip=0, after_onset_s=1.0), NextTurn(clip=2, gap_s=0.5, timeout_s=3.0))
    # interrupt: a reply's worth + 1 s clip; next turn: 0.5 + 3 + 2 s clip; the last reply
    assert script_bound_s(s, 10.0) == pytest.approx(10 + 1 + 0.5 + 3 + 2 + 10)
    late = script(Distractor(clip=2, at_s=100.0))
    assert script_bound_s(late, 10.0) == 102.0 + DISTRACTOR_LISTEN_S
