from __future__ import annotations

import pytest

from duplexsim.core.partnermetrics import StepResult, step_results, summarise_steps


def turn(k, *, start, end, speech_end=None, onset=None, offset=None, reason="vad-hangover"):
    latency = None if onset is None or speech_end is None else onset - speech_end
    return {
        "turn": k,
        "start_s": start,
        "end_s": end,
        "speech_end_s": speech_end,
        "onset_s": onset,
        "offset_s": offset,
        "latency_s": latency,
        "duration_s": None if onset is None else offset - onset,
        "overlap_s": 0.0,
        "end_reason": reason,
    }


def fired(step, kind, at, end, turn=0, opens=None):
    e = {"step": step, "partner": kind, "fired": True, "turn": turn, "at_s": at, "clip_end_s": end}
    if opens is not None:
        e["opens_turn"] = opens
    return e


CONTEXT = turn(0, start=0.0, end=1.3, speech_end=1.2, onset=1.5, offset=2.2, reason="talked-over")


def interrupted(offset, reason="talked-over", answer=None):
    reply = CONTEXT | {"offset_s": offset, "end_reason": reason}
    after = turn(
        1,
        start=2.0,
        end=2.5,
        speech_end=2.45,
        onset=answer,
        offset=None if answer is None else answer + 1,
    )
    return [reply, after], [fired(0, "interrupt", 2.0, 2.5, opens=1)]


def test_a_stop_before_the_interruption_ends_is_a_stop_with_its_latency():
    turns, events = interrupted(2.04, answer=2.8)
    (r,) = step_results(turns, events, [])
    assert (r.stopped, r.answered, r.resumed) == (True, True, False)
    assert r.stop_latency_s == pytest.approx(0.04)
    assert r.response_latency_s == pytest.approx(2.8 - 2.45)
    assert r.turn == 1


def test_a_model_in_a_pause_it_never_left_stopped_at_once():
    turns, events = interrupted(1.9)
    (r,) = step_results(turns, events, [])
    assert r.stopped and r.stop_latency_s == 0.0 and not r.answered


@pytest.mark.parametrize(
    ("offset", "reason"),
    [(2.95, "end-of-turn"), (4.0, "vad-hangover"), (2.3, None)],  # None: still talking at the end
)
def test_talking_past_the_interruption_or_to_the_end_is_no_stop(offset, reason):
    turns, events = interrupted(offset, reason)
    (r,) = step_results(turns, events, [])
    assert (r.stopped, r.resumed) == (False, True) and r.stop_latency_s is None


def test_a_stop_within_a_yield_gap_of_the_interruptions_end_counts():
    turns, events = interrupted(2.94)  # its speech ended at 2.45
    assert step_results(turns, events, [])[0].stopped


@pytest.mark.parametrize(
    ("speech", "kept", "gap"),
    [
        ([[1.5, 4.0]], True, 0.0),  # talking right through it
        ([[1.5, 2.6], [3.3, 4.0]], True, 0.3),  # took its reply up again 0.3 s after
        ([[1.5, 2.6], [3.6, 4.0]], False, 0.6),  # 0.6 s: it had stopped
        ([[1.5, 2.6]], False, None),  # never again
    ],
)
def test_a_backchannel_kept_the_floor_when_the_model_spoke_on_within_a_yield_gap(speech, kept, gap):
    reply = CONTEXT | {"offset_s": speech[-1][1], "end_reason": "vad-hangover"}
    (r,) = step_results([reply], [fired(0, "backchannel", 2.7, 3.0)], speech)
    assert r.kept_floor is kept
    assert r.floor_gap_s == (None if gap is None else pytest.approx(gap))


def test_speech_after_the_reply_ended_does_not_keep_the_floor():
    reply = CONTEXT | {"offset_s": 2.6, "end_reason": "vad-hangover"}
    (r,) = step_results([reply], [fired(0, "backchannel", 2.7, 3.0)], [[1.5, 2.6], [3.2, 4.0]])
    assert not r.kept_floor


def test_next_turns_report_reply_latency_and_overlap():
    turns = [CONTEXT, turn(1, start=3.0, end=4.0, speech_end=3.9, onset=4.3, offset=5.0)]
    (r,) = step_results(turns, [fired(0, "next_turn", 3.0, 4.0, opens=1)], [])
    assert r.replied and r.latency_s == pytest.approx(0.4) and r.overlap_s == 0.0
    silent = [CONTEXT, turn(1, start=3.0, end=4.0, speech_end=3.9, reason="no-reply")]
    (r,) = step_results(silent, [fired(0, "next_turn", 3.0, 4.0, opens=1)], [])
    assert not r.replied and r.latency_s is None


@pytest.mark.parametrize(
    ("speech", "took", "speaking"),
    [
        ([[6.8, 8.0]], True, False),  # answered it, at length
        ([[6.8, 7.3]], False, False),  # a short "hm?": no take-over
        ([[7.6, 9.0]], False, False),  # more than a second after it ended
        ([[4.5, 8.0]], False, True),  # was talking already
        ([], False, False),
    ],
)
def test_a_distractor_is_taken_for_a_turn_by_speech_of_a_second_soon_after(speech, took, speaking):
    (r,) = step_results([CONTEXT], [fired(0, "distractor", 6.0, 6.5)], speech)
    assert r.took_turn is took and r.speaking_at_start is speaking


def test_a_reply_to_the_users_turn_is_not_taken_for_the_distractors():
    # a distractor over the end of the context: the model's reply after the context is its due
    (r,) = step_results([CONTEXT], [fired(0, "distractor", 1.0, 1.4)], [[1.5, 2.6]])
    assert r.took_turn is False


def test_unfired_steps_are_not_measured():
    skipped = {"step": 0, "partner": "interrupt", "fired": False, "turn": 0, "why": "no reply"}
    assert step_results([CONTEXT], [skipped], []) == []


def test_summaries_by_task_count_rates_and_medians():
    rs = [
        StepResult(0, "interrupt", 1.0, stopped=True, stop_latency_s=0.2, answered=True,
                   response_latency_s=0.5, resumed=False),
        StepResult(0, "interrupt", 1.0, stopped=True, stop_latency_s=0.4, answered=False,
                   resumed=False),
        StepResult(0, "interrupt", 1.0, stopped=False, answered=False, resumed=True),
        StepResult(1, "backchannel", 2.0, kept_floor=True, floor_gap_s=0.0),
        StepResult(2, "next_turn", 3.0, replied=True, latency_s=0.3, overlap_s=0.1),
        StepResult(3, "distractor", 4.0, speaking_at_start=False, took_turn=False),
    ]  # fmt: skip
    (s,) = summarise_steps({"interruption": rs}, {"interruption": {"interrupt": 2}})
    d = s.to_dict()
    assert (s.interrupts, s.stopped, s.answered, s.resumed) == (3, 2, 1, 1)
    assert s.stop_latency_s == pytest.approx(0.3) and s.response_latency_s == 0.5
    assert d["stop_rate"] == pytest.approx(2 / 3) and d["kept_floor_rate"] == 1.0
    assert d["reply_rate"] == 1.0 and d["took_turn_rate"] == 0.0
    assert d["skipped"] == {"interrupt": 2}
    assert StepResult.from_dict(rs[0].to_dict()) == rs[0]
