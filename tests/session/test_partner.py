"""A partner that reacts, on the virtual clock, exact to the sample: interruptions on the model's
onset, backchannels at its pauses, next turns on its reply's end, distractors at their time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from duplexsim.clients.fakekit.behaviours import make_behaviour
from duplexsim.core.partnerfield import ScriptEntry
from duplexsim.core.partnermetrics import StepResult, step_results
from duplexsim.core.timing import speech_end
from duplexsim.core.turns import TurnSettings
from duplexsim.session.engine import SessionOutcome, SessionSettings, run_session
from duplexsim.session.partneraudio import PartnerAudio, PartnerClips
from tests.helpers.sessions import RATE, SETTINGS, context
from tests.helpers.signals import voiced_signal
from tests.helpers.virtualclock import ScriptedClient, run_virtual

SAMPLE = 1 / RATE
CLIP = voiced_signal(0.5, f0=220.0)  # the partner's voice: half a second of speech
SHORT = voiced_signal(0.25, f0=220.0)


def entry(kind: str, **params: float) -> ScriptEntry:
    return ScriptEntry(kind=kind, clip=Path(f"{kind}.wav"), clip_s=None, **params)  # type: ignore[arg-type]


def partner(*steps: tuple[ScriptEntry, np.ndarray], speech_s: float = 1.0) -> PartnerAudio:
    clips = [c for _, c in steps]
    ends = [speech_end(c, RATE) for c in clips]
    return PartnerAudio(
        context(speech_s), PartnerClips([e for e, _ in steps], clips, ends), SETTINGS.turns
    )


def model(name: str, **params: object) -> ScriptedClient:
    return ScriptedClient(make_behaviour(name, RATE, hangover_s=0.25, **params))  # type: ignore[arg-type]


def session(
    client: ScriptedClient,
    user: PartnerAudio,
    settings: SessionSettings = SETTINGS,
    status: str = "ok",
) -> SessionOutcome:
    out = run_virtual(run_session(client, user, settings))
    assert out.status == status, out.error
    assert out.check.valid
    return out


def clip_at(sent: np.ndarray, at_s: float, clip: np.ndarray) -> bool:
    """``clip`` is in ``sent`` from the sample at ``at_s`` on, and nothing of it a sample sooner."""
    first = round(at_s * RATE)
    return sent[first - 1] == 0.0 and np.array_equal(sent[first : first + clip.size], clip)


@pytest.mark.parametrize("after_ms", [300, 500, 777])
def test_an_interruption_fires_x_ms_after_the_models_onset_to_the_sample(after_ms):
    out = session(
        model("talk-through"), partner((entry("interrupt", after_onset_s=after_ms / 1000), CLIP))
    )
    (event,) = out.partner
    onset = out.turns[0]["onset_s"]
    assert onset == out.timing.onset_s  # the partner's onset is the session's
    assert event["fired"] and event["late_s"] == 0.0
    assert abs(event["at_s"] - (onset + after_ms / 1000)) <= SAMPLE
    assert np.array_equal(out.sent[round(event["at_s"] * RATE) :][: CLIP.size], CLIP)
    assert event["why"] == f"the model had spoken {after_ms} ms"
    logged = [e for e in out.events if e["kind"] == "partner"]
    assert logged == [{"t": logged[0]["t"], "dir": "user", "kind": "partner", **event}]


def test_a_model_that_ignores_the_interruption_talks_on_and_never_answers_it():
    out = session(model("talk-through"), partner((entry("interrupt", after_onset_s=0.5), CLIP)))
    first, second = out.turns
    at = out.partner[0]["at_s"]
    assert first["talked_over_s"] == at and first["stopped_s"] is None
    assert first["duration_s"] == pytest.approx(2.4, abs=0.02)  # its whole utterance
    assert first["offset_s"] > second["end_s"]  # on past the interruption
    assert second["start_s"] == at and second["end_s"] == pytest.approx(at + 0.5, abs=SAMPLE)
    assert second["onset_s"] is None and second["end_reason"] == "no-reply"


def test_a_model_that_stops_when_talked_over_stops_then_answers_the_interruption():
    out = session(model("stop-on-overlap"), partner((entry("interrupt", after_onset_s=0.5), CLIP)))
    first, second = out.turns
    at = out.partner[0]["at_s"]
    # it hears the interruption once its VAD has a 30 ms run, and stops in that 20 ms frame
    # (the offset is where its voice last reaches the edge level: its syllables fade)
    assert at < first["offset_s"] <= at + 0.03 + 0.02 + 0.01
    assert second["onset_s"] is not None and second["onset_s"] > second["end_s"]
    # it answers once the interruption's speech is over by its hangover (0.25 s)
    assert second["latency_s"] == pytest.approx(0.25, abs=0.04)


def test_a_backchannel_at_a_pause_does_not_end_the_reply():
    patient = SessionSettings(
        turns=TurnSettings(hangover_s=1.0, max_reply_s=6.0, reply_timeout_s=1.0)
    )
    client = model("talk-through", utterance_s=2.0, pause_at_s=1.0, pause_s=0.8)
    out = session(client, partner((entry("backchannel", at_pause_s=0.3), SHORT)), patient)
    (event,) = out.partner
    (turn,) = out.turns  # a backchannel is no turn
    pause_start = turn["onset_s"] + 1.0
    assert pause_start + 0.3 <= event["at_s"] <= pause_start + 0.3 + 0.02 + 0.01
    assert event["due_s"] == pytest.approx(pause_start + 0.3, abs=0.01)  # on the VAD's frames
    assert turn["duration_s"] == pytest.approx(2.8, abs=0.02)  # both halves: one reply
    assert [e for e in out.events if e["kind"] == "reply_end"] == [
        e for e in out.events if e["kind"] == "reply_end" and "turn" not in e
    ]
    assert clip_at(out.sent, event["at_s"], SHORT)


def test_a_next_turn_waits_for_the_replys_end_and_the_gap():
    out = session(model("talk-through"), partner((entry("next_turn", gap_s=0.3), CLIP)))
    first, second = out.turns
    (event,) = out.partner
    assert event["at_s"] == pytest.approx(first["ended_at_s"] + 0.3, abs=SAMPLE)
    assert event["late_s"] == 0.0 and first["talked_over_s"] is None
    assert clip_at(out.sent, event["at_s"], CLIP)
    assert second["onset_s"] is not None and second["latency_s"] == pytest.approx(0.25, abs=0.04)


def test_n_turns_alternate_with_the_models_replies_without_drift():
    n = 5
    steps = [(entry("next_turn", gap_s=0.2), CLIP) for _ in range(n)]
    out = session(model("talk-through"), partner(*steps))
    assert len(out.turns) == n + 1 and [e["opens_turn"] for e in out.partner] == list(
        range(1, n + 1)
    )
    for k, event in enumerate(out.partner):
        before, after = out.turns[k], out.turns[k + 1]
        assert event["at_s"] == pytest.approx(before["ended_at_s"] + 0.2, abs=SAMPLE)
        assert after["start_s"] == event["at_s"]
        assert clip_at(out.sent, event["at_s"], CLIP)
    latencies = [t["latency_s"] for t in out.turns[1:]]
    durations = [t["duration_s"] for t in out.turns]
    # every reply the same model makes to the same clip is the same, to the sample
    assert max(latencies) - min(latencies) <= SAMPLE
    assert max(durations) - min(durations) <= 2 * SAMPLE


def test_a_next_turn_after_a_timeout_plays_over_a_model_still_talking():
    client = model("talk-through", utterance_s=3.0)
    out = session(client, partner((entry("next_turn", gap_s=0.2, timeout_s=1.0), CLIP)))
    first, _ = out.turns
    (event,) = out.partner
    assert event["why"] == "timeout: 1000 ms after the user's turn"
    assert event["at_s"] == pytest.approx(first["end_s"] + 1.0, abs=SAMPLE)
    assert first["talked_over_s"] == event["at_s"]


def test_a_distractor_plays_at_its_time_over_the_context():
    user = partner((entry("distractor", at_s=0.5), SHORT))
    out = session(model("talk-through"), user)
    (event,) = out.partner
    assert event["at_s"] == 0.5 and event["why"] == "at its time"
    first = round(0.5 * RATE)
    expected = np.clip(context()[first : first + SHORT.size] + SHORT, -1, 1)
    assert np.array_equal(out.sent[first : first + SHORT.size], expected)
    assert len(out.turns) == 1


def test_a_skipped_step_is_recorded_with_why():
    user = partner((entry("interrupt", after_onset_s=0.5), CLIP))
    out = session(model("silent"), user, status="no-reply")
    (event,) = out.partner
    assert not event["fired"] and event["why"] == "no reply before it could fire"
    assert out.turns[0]["onset_s"] is None and out.turns[0]["end_reason"] == "no-reply"
    assert not out.sent[round(1.3 * RATE) :].any()  # nothing was played


def results(out: SessionOutcome) -> list[StepResult]:
    return step_results(out.turns, out.partner, out.speech)


def test_an_interruption_measured_a_model_that_ignores_it_does_not_stop():
    user = partner((entry("interrupt", after_onset_s=0.5), CLIP))
    (r,) = results(session(model("talk-through"), user))
    assert (r.stopped, r.answered, r.resumed) == (False, False, True)
    assert r.stop_latency_s is None and r.response_latency_s is None


def test_an_interruption_measured_a_model_that_stops_and_answers():
    user = partner((entry("interrupt", after_onset_s=0.5), CLIP))
    out = session(model("stop-on-overlap"), user)
    (r,) = results(out)
    assert (r.stopped, r.answered, r.resumed) == (True, True, False)
    assert 0.0 < r.stop_latency_s <= 0.06
    assert r.stop_latency_s == pytest.approx(out.turns[0]["offset_s"] - out.partner[0]["at_s"])
    assert r.response_latency_s == pytest.approx(0.25, abs=0.04)


@pytest.mark.parametrize(("name", "kept"), [("talk-through", True), ("stop-on-overlap", False)])
def test_a_backchannel_measured_whether_the_model_kept_the_floor(name, kept):
    # the models breathe 0.4 s after their first second: the backchannel comes 0.2 s into it;
    # the one that stops takes it for a turn, and answers it 0.6 s after (its hangover)
    patient = SessionSettings(
        turns=TurnSettings(hangover_s=1.0, max_reply_s=6.0, reply_timeout_s=1.0)
    )
    client = ScriptedClient(make_behaviour(name, RATE))  # type: ignore[arg-type]
    out = session(client, partner((entry("backchannel", at_pause_s=0.2), SHORT)), patient)
    (r,) = results(out)
    assert r.kept_floor is kept
    if kept:
        assert r.floor_gap_s < 0.5
    else:
        assert r.floor_gap_s is None or r.floor_gap_s >= 0.5


def test_a_distractor_measured_a_model_that_answers_it_took_the_turn():
    # the reply to the next turn is over by 7.6 s
    steps = ((entry("next_turn", gap_s=0.5), CLIP), (entry("distractor", at_s=8.0), CLIP))
    talker = results(session(model("talk-through"), partner(*steps)))
    assert [r.kind for r in talker] == ["next_turn", "distractor"]
    assert talker[1].took_turn is True and talker[1].speaking_at_start is False
    silent = results(session(model("silent"), partner(*steps), status="no-reply"))
    assert silent[1].took_turn is False and silent[0].replied is False


def test_next_turns_are_measured_each():
    steps = [(entry("next_turn", gap_s=0.2), CLIP) for _ in range(3)]
    out = session(model("talk-through"), partner(*steps))
    rs = results(out)
    assert [r.turn for r in rs] == [1, 2, 3] and all(r.replied for r in rs)
    assert [r.latency_s for r in rs] == [t["latency_s"] for t in out.turns[1:]]
