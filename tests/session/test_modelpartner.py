"""Another model as the user, on the virtual clock, exact to the sample: a scripted examiner on one
side and an echo under test on the other, each hearing the other two frames and the bridge later;
the partner's turns and the model's replies alternate without drift; the turn and time limits
end the session; the partner's own timing counts."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from duplexsim.clients.base import Capabilities
from duplexsim.clients.fakekit.behaviours import make_behaviour, synthetic_voice
from duplexsim.core.errors import ConnectError
from duplexsim.core.partnerturns import PartnerLimits
from duplexsim.core.turns import TurnSettings
from duplexsim.session.engine import SessionOutcome, SessionSettings, run_session
from duplexsim.session.modelpartner import ModelPartner
from duplexsim.session.recordedpartner import RecordedPartner
from tests.helpers.sessions import RATE, SETTINGS, context
from tests.helpers.virtualclock import ScriptedClient, run_virtual

SAMPLE = 1 / RATE
DELAY = 2 * 0.02 + 0.1  # two frames (built one ahead) and the bridge
LINE = synthetic_voice(RATE, 0.8, f0=200.0)
LIMITS = PartnerLimits()


def examiner(rate: int = RATE, **params: object) -> ScriptedClient:
    behaviour = make_behaviour("examiner", rate, hangover_s=0.25, **params)  # type: ignore[arg-type]
    return ScriptedClient(behaviour, rate=rate)


def echo(**kw: object) -> ScriptedClient:
    return ScriptedClient(make_behaviour("echo", RATE, hangover_s=0.25), **kw)  # type: ignore[arg-type]


def session(
    model: ScriptedClient,
    partner: ScriptedClient,
    limits: PartnerLimits = LIMITS,
    settings: SessionSettings = SETTINGS,
    status: str = "ok",
) -> SessionOutcome:
    user = ModelPartner(context(1.0), partner, limits, settings)
    out = run_virtual(run_session(model, user, settings))
    assert out.status == status, out.error
    return out


def first_voiced(x: np.ndarray, from_s: float) -> int:
    lo = round(from_s * RATE)
    return lo + int(np.flatnonzero(x[lo:])[0])


def test_the_partners_turns_and_the_models_replies_alternate_without_drift():
    partner = examiner(lines=6, line_s=0.8, step_s=0.0)
    out = session(echo(), partner, PartnerLimits(turns=5))
    assert out.partner_model["ended_by"] == "turn-limit" and out.check.valid
    assert out.partner_check is not None and out.partner_check.valid
    turns, steps = out.turns[1:], out.partner
    assert [t["turn"] for t in out.turns] == [0, 1, 2, 3, 4, 5]
    assert [(e["opens_turn"], e["step"], e["partner"]) for e in steps] == [
        (k, k - 1, "next_turn") for k in range(1, 6)
    ]
    for turn, step in zip(turns, steps, strict=True):
        # each utterance is heard DELAY after the partner said it, and is the user's turn there
        assert turn["start_s"] == step["at_s"] == pytest.approx(step["partner_onset_s"] + DELAY)
        assert turn["end_s"] == turn["speech_end_s"] == step["clip_end_s"]
        first = first_voiced(out.sent, turn["start_s"] - 0.01)
        assert np.array_equal(out.sent[first : first + LINE.size], LINE)
        assert turn["onset_s"] > turn["speech_end_s"] and turn["end_reason"] == "end-of-turn"
    # one period, to the sample, turn after turn: nothing drifts
    starts = np.array([t["start_s"] for t in turns])
    assert np.ptp(np.diff(starts)) < SAMPLE / 2
    assert np.ptp([t["latency_s"] for t in turns]) < SAMPLE / 2
    assert np.ptp([t["onset_s"] - t["start_s"] for t in turns]) < SAMPLE / 2
    # the partner heard the model's whole stream, DELAY late, sample for sample
    heard = np.concatenate(partner.sent_frames)
    lag = round(DELAY * RATE)
    assert not heard[:lag].any()
    assert np.array_equal(heard[lag:], out.output[: heard.size - lag])
    # the session ends once the reply to the last turn is over
    assert out.sent.size == round(turns[-1]["ended_at_s"] * RATE)


def test_a_conversation_records_both_sides_and_what_the_partner_was():
    out = session(echo(), examiner(lines=2), PartnerLimits(turns=2))
    model = out.partner_model
    assert model["client"]["protocol"] == "scripted" and model["utterances"] == 2
    assert model["delay_s"] == {"to_model": 0.14, "to_partner": 0.14}
    assert model["limits"] == {"turns": 2, "time_s": 60.0}
    sends = [e for e in out.events if e["dir"] == "send"]
    partner_sends = [e for e in out.events if e["dir"] == "partner-send"]
    assert len(partner_sends) == len(sends)  # each frame, one each way
    assert [e["n"] for e in partner_sends] == [e["n"] for e in sends]
    assert all(e["t"] == e["due"] for e in partner_sends)  # on its schedule (virtual clock)
    assert any(e["dir"] == "partner-recv" and e["kind"] == "audio" for e in out.events)
    steps = [e for e in out.events if e["kind"] == "partner"]
    assert [e["opens_turn"] for e in steps] == [1, 2] and all(e["dir"] == "user" for e in steps)


def test_the_turn_limit_mutes_the_partner_and_ends_the_session_after_the_last_reply():
    # the session hears the model out by a hangover longer than the examiner's: its next line
    # comes before the reply to the last turn is over, and is not relayed
    patient = SessionSettings(
        turns=TurnSettings(hangover_s=0.8, max_reply_s=4.0, reply_timeout_s=1.0),
        deadline_margin_s=2.0,
    )
    partner = examiner(lines=5)
    model = echo(end_of_turn=False, continuous=False)
    out = session(model, partner, PartnerLimits(turns=2), patient)
    assert out.partner_model["ended_by"] == "turn-limit"
    assert len(out.turns) == 3 and out.partner_model["utterances"] == 2
    said = partner.behaviour.said  # type: ignore[attr-defined]
    assert said == 3  # its third line was said, and never heard
    last = out.turns[2]
    assert not out.sent[round((last["end_s"] + 0.01) * RATE) :].any()  # past its fade
    assert last["ended_at_s"] <= out.sent.size / RATE < last["ended_at_s"] + 0.02


def test_the_time_limit_ends_the_session_where_it_falls_and_cuts_the_utterance_under_way():
    out = session(echo(), examiner(), PartnerLimits(turns=5, time_s=3.5))
    assert out.partner_model["ended_by"] == "time-limit"
    assert out.sent.size == round(3.5 * RATE)
    (step,) = out.partner
    assert step["why"] == "the partner model spoke (cut by the session's end)"
    assert step["clip_end_s"] == 3.5 and step["decided_s"] is None
    cut = out.turns[1]
    assert cut["start_s"] == step["at_s"] and cut["end_s"] is None and cut["latency_s"] is None


def test_a_reply_the_time_limit_cuts_is_truncated_by_it():
    out = session(echo(), examiner(), PartnerLimits(turns=5, time_s=2.0))
    assert out.timing.onset_s < 2.0 and out.truncated == "time-limit"
    assert out.partner == [] and len(out.turns) == 1


def test_a_partner_with_nothing_more_to_say_ends_the_session_a_reply_timeout_later():
    out = session(echo(), examiner(lines=1), PartnerLimits(turns=5))
    assert out.partner_model["ended_by"] == "partner-silent"
    last = out.turns[1]
    wait = DELAY + SETTINGS.turns.reply_timeout_s + DELAY  # heard, answered, heard back
    assert out.sent.size == pytest.approx((last["ended_at_s"] + wait) * RATE, abs=320)


def test_a_partner_that_hangs_up_ends_it_once_the_reply_is_over():
    partner = ScriptedClient(make_behaviour("examiner", RATE, hangover_s=0.25), close_at_s=3.5)
    out = session(echo(), partner, PartnerLimits(turns=5))
    assert out.partner_model["ended_by"] == "partner-closed"
    # cut where its stream ended
    assert out.partner[0]["clip_end_s"] == pytest.approx(3.5 + DELAY, abs=SAMPLE)
    assert out.turns[1]["end_reason"] is not None


def test_rates_apart_are_resampled_and_the_delay_stays_exact():
    out = session(echo(), examiner(24000, lines=2), PartnerLimits(turns=2))
    up = out.partner_model["delay_s"]["to_model"]
    assert up > DELAY  # the resampler's own lag on top
    for turn, step in zip(out.turns[1:], out.partner, strict=True):
        assert turn["start_s"] == pytest.approx(step["partner_onset_s"] + up, abs=1e-6)
        # the model hears the voice resampled: its speech's end moves by a VAD frame at most
        assert turn["latency_s"] == pytest.approx(0.25, abs=0.03)


class CommittingEcho(ScriptedClient):
    """A model that needs each user turn committed."""

    def __init__(self) -> None:
        super().__init__(make_behaviour("echo", RATE, hangover_s=0.25))
        self.commits: list[float] = []

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(RATE, RATE, manual_commit=True, end_of_turn_signal=True,
                            continuous_output=True)  # fmt: skip

    async def commit_turn(self) -> None:
        assert self.t0 is not None
        self.commits.append(self.clock() - self.t0)


def test_a_model_that_needs_commits_gets_one_per_turn_once_it_is_over():
    model = CommittingEcho()
    out = session(model, examiner(lines=2), PartnerLimits(turns=2))
    assert len(model.commits) == 3  # the context's, and each utterance's
    for commit, step in zip(model.commits[1:], out.partner, strict=True):
        # told as the frame that heard the end is built, a frame ahead of it
        assert commit == pytest.approx(step["decided_s"] - 0.02)


class SlowPartner(ScriptedClient):
    async def send_audio(self, samples: np.ndarray) -> None:
        if len(self.sent_frames) == 50:
            await asyncio.sleep(0.03)
        await super().send_audio(samples)


def test_a_partner_side_that_missed_its_schedule_spoils_the_sessions_timing():
    slow = SlowPartner(make_behaviour("examiner", RATE, hangover_s=0.25, lines=1))
    out = session(echo(), slow, PartnerLimits(turns=1))
    assert out.partner_check is not None and not out.partner_check.valid
    assert out.check.invalid is not None and out.check.invalid.startswith("partner send max")


class Unreachable(ScriptedClient):
    async def connect(self) -> None:
        raise ConnectError("connection refused")


def test_a_partner_that_cannot_connect_fails_the_session_and_says_whose_it_was():
    out = session(echo(), Unreachable(make_behaviour("silent", RATE)), status="failed")
    assert out.error == "partner: connection refused" and out.retryable


@pytest.mark.parametrize("limits", [PartnerLimits(turns=3), PartnerLimits(turns=5, time_s=3.5)])
def test_played_again_from_what_the_model_heard_the_session_decides_the_same(limits):
    out = session(echo(), examiner(lines=4), limits)
    again = RecordedPartner(
        context(1.0), out.sent, RATE, out.partner, out.partner_model["ended_by"]
    )
    replayed = run_virtual(run_session(echo(), again, SETTINGS))
    # the same to the microsecond the recording keeps its times to
    assert replayed.turns == [
        {k: pytest.approx(v, abs=2e-6) if isinstance(v, float) else v for k, v in t.items()}
        for t in out.turns
    ]
    assert replayed.partner == out.partner
    assert replayed.sent.size == out.sent.size and replayed.truncated == out.truncated
