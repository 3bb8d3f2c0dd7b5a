"""Reference behaviours: exact, pure, media time only."""

from __future__ import annotations

import numpy as np
import pytest

from duplexsim.clients.fakekit.behaviours import (
    BEHAVIOURS,
    Behaviour,
    Step,
    behaviour_factory,
    make_behaviour,
    synthetic_voice,
)
from duplexsim.clients.fakekit.behaviours.kinds import utterance
from duplexsim.core.errors import ConfigError
from duplexsim.core.vad import frame_flags, speech_bounds

RATE = 16000


def clip(*parts: tuple[str, float], rate: int = RATE, f0: float = 150.0) -> np.ndarray:
    """Concatenate ("speech" | "silence", seconds) parts into one input clip."""
    out = [
        synthetic_voice(rate, s, f0=f0) if kind == "speech" else np.zeros(round(s * rate))
        for kind, s in parts
    ]
    return np.concatenate(out).astype(np.float32)


def run(b: Behaviour, x: np.ndarray, chunk: int) -> tuple[np.ndarray, list[tuple[int, Step]]]:
    """Feed ``x`` in chunks; the concatenated output and each (chunk start, step)."""
    steps = [(i, b.push(x[i : i + chunk])) for i in range(0, x.size, chunk)]
    for i, step in steps:
        assert step.audio.dtype == np.float32
        assert step.audio.size == min(chunk, x.size - i)
    return np.concatenate([s.audio for _, s in steps]), steps


def bounds(x: np.ndarray, rate: int = RATE) -> tuple[int, int]:
    found = speech_bounds(x, rate)
    assert found is not None
    return round(found[0] * rate), round(found[1] * rate)


def first_nonzero(x: np.ndarray) -> int:
    hits = np.flatnonzero(x)
    assert hits.size, "no output at all"
    return int(hits[0])


@pytest.mark.parametrize("rate", [8000, 16000, 24000, 48000])
def test_synthetic_voice_is_speech_to_webrtcvad(rate: int) -> None:
    voice = synthetic_voice(rate, 2.0)
    assert voice.dtype == np.float32 and voice.size == 2 * rate
    assert np.max(np.abs(voice)) == pytest.approx(0.3, abs=1e-6)
    assert frame_flags(voice, rate).mean() > 0.95
    assert np.array_equal(voice, synthetic_voice(rate, 2.0))  # deterministic


@pytest.mark.parametrize("chunk", [320, 333, 1])
def test_silent_returns_zeros_and_still_reports_speech_edges(chunk: int) -> None:
    x = clip(("silence", 0.3), ("speech", 0.6), ("silence", 0.8))
    out, steps = run(make_behaviour("silent", RATE), x, chunk)
    assert out.size == x.size and not out.any()
    assert sum(s.speech_started for _, s in steps) == 1
    assert sum(s.speech_stopped for _, s in steps) == 1
    assert not any(s.reply_started or s.reply_done for _, s in steps)


def test_empty_push_returns_empty_step() -> None:
    step = make_behaviour("echo", RATE).push(np.zeros(0, dtype=np.float32))
    assert step.audio.size == 0 and not step.speech_started


@pytest.mark.parametrize("chunk", [320, 480, 333])
def test_echo_replays_the_speech_right_after_the_hangover(chunk: int) -> None:
    x = clip(("silence", 0.5), ("speech", 1.0), ("silence", 2.5))
    onset, end = bounds(x)
    b = make_behaviour("echo", RATE)
    out, steps = run(b, x, chunk)
    start = first_nonzero(out)
    # the decision falls at the end of the VAD frame that completes the hangover
    assert end + 0.6 * RATE <= start <= end + 0.6 * RATE + 160 + chunk
    assert np.array_equal(out[start : start + end - onset], x[onset:end])
    assert not out[start + end - onset :].any()
    assert b.turns[0].end == end and b.turns[0].onset == onset
    assert sum(s.reply_started for _, s in steps) == sum(s.reply_done for _, s in steps) == 1


def test_echo_keeps_only_the_last_echo_s_trimmed_to_a_voiced_sample() -> None:
    x = clip(("silence", 0.3), ("speech", 2.0), ("silence", 2.0))
    _, end = bounds(x)
    out, _ = run(make_behaviour("echo", RATE, echo_s=1.0), x, 320)
    window = x[end - RATE : end]
    lead, _ = bounds(window)
    start = first_nonzero(out)
    assert np.array_equal(out[start : start + RATE - lead], window[lead:])
    assert np.count_nonzero(out) <= RATE


@pytest.mark.parametrize("rate", [16000, 24000])
@pytest.mark.parametrize("chunk", [320, 480, 333, 1001, 7])
def test_delayed_echo_starts_at_exactly_end_plus_latency(rate: int, chunk: int) -> None:
    x = clip(("silence", 0.5), ("speech", 1.0), ("silence", 2.5), rate=rate)
    onset, end = bounds(x, rate)
    out, _ = run(make_behaviour("delayed-echo", rate, latency_s=0.8), x, chunk)
    start = first_nonzero(out)
    assert start == end + round(0.8 * rate)
    assert np.array_equal(out[start : start + end - onset], x[onset:end])


def test_delayed_echo_below_the_hangover_starts_when_the_turn_end_is_decided() -> None:
    x = clip(("silence", 0.5), ("speech", 1.0), ("silence", 2.0))
    _, end = bounds(x)
    b = make_behaviour("delayed-echo", RATE, latency_s=0.2)
    out, _ = run(b, x, 320)
    assert first_nonzero(out) == b.turns[0].decided
    assert end + 0.6 * RATE <= b.turns[0].decided <= end + 0.6 * RATE + 2 * 160


@pytest.mark.parametrize("chunk", [320, 333])
def test_barge_in_talks_over_the_user(chunk: int) -> None:
    x = clip(("silence", 0.25), ("speech", 2.5), ("silence", 1.0))
    onset, end = bounds(x)
    out, steps = run(make_behaviour("barge-in", RATE, barge_after_s=1.5), x, chunk)
    start = first_nonzero(out)
    assert start == onset + round(1.5 * RATE) < end
    assert frame_flags(x[start - 800 : start + 800], RATE).all()  # the user is still talking
    heard = out[start:]  # the clip ends before the 2 s utterance does
    assert np.array_equal(heard, synthetic_voice(RATE, 2.0)[: heard.size])
    assert sum(s.reply_started for _, s in steps) == 1


def test_neutral_plays_the_given_utterance_after_the_turn() -> None:
    utterance = synthetic_voice(RATE, 0.7, f0=220.0)
    x = clip(("silence", 0.3), ("speech", 0.8), ("silence", 2.0))
    _, end = bounds(x)
    out, steps = run(make_behaviour("neutral", RATE, utterance=utterance), x, 320)
    start = first_nonzero(out)
    assert start > end + 0.6 * RATE
    assert np.array_equal(out[start : start + utterance.size], utterance)
    assert not out[start + utterance.size :].any()
    assert [s.reply_done for _, s in steps].count(True) == 1


def test_neutral_defaults_to_two_seconds_of_synthetic_voice() -> None:
    x = clip(("silence", 0.3), ("speech", 0.8), ("silence", 3.0))
    out, _ = run(make_behaviour("neutral", RATE), x, 320)
    start = first_nonzero(out)
    assert np.array_equal(out[start : start + 2 * RATE], synthetic_voice(RATE, 2.0))


def test_answers_each_turn_in_a_multi_turn_exchange() -> None:
    x = clip(("silence", 0.3), ("speech", 0.8), ("silence", 2.5), ("speech", 0.6), ("silence", 2.2))
    b = make_behaviour("delayed-echo", RATE, latency_s=0.8)
    out, steps = run(b, x, 320)
    assert len(b.turns) == 2
    for turn in b.turns:
        start = turn.end + round(0.8 * RATE)
        assert out[start] != 0 and not out[start - 1]
    assert sum(s.speech_started for _, s in steps) == 2
    assert sum(s.reply_started for _, s in steps) == sum(s.reply_done for _, s in steps) == 2


def test_a_turn_that_ends_during_a_reply_gets_no_reply_of_its_own() -> None:
    utterance = synthetic_voice(RATE, 2.5, f0=220.0)
    x = clip(("silence", 0.3), ("speech", 0.6), ("silence", 1.0), ("speech", 0.4), ("silence", 3))
    b = make_behaviour("neutral", RATE, utterance=utterance)
    out, steps = run(b, x, 320)
    assert len(b.turns) == 2
    assert sum(s.reply_started for _, s in steps) == 1
    assert np.count_nonzero(out) <= utterance.size


def test_unknown_behaviour_names_the_known_ones() -> None:
    with pytest.raises(ConfigError) as err:
        make_behaviour("parrot", RATE)
    for name in BEHAVIOURS:
        assert name in str(err.value)
    assert set(BEHAVIOURS) == {
        "echo",
        "silent",
        "neutral",
        "delayed-echo",
        "barge-in",
        "talk-through",
        "stop-on-overlap",
        "examiner",
    }


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("echo", {"echo_s": 0}),
        ("delayed-echo", {"latency_s": -1}),
        ("silent", {"bogus": 1}),
        ("talk-through", {"utterance_s": 0}),
        ("stop-on-overlap", {"pause_s": -1}),
        ("examiner", {"lines": 0}),
        ("examiner", {"line_s": 0}),
    ],
)
def test_bad_parameters_are_config_errors(name: str, params: dict[str, float]) -> None:
    with pytest.raises(ConfigError, match=name):
        make_behaviour(name, RATE, **params)
    with pytest.raises(ConfigError):
        behaviour_factory(name, **params)


def test_factory_makes_fresh_behaviours_at_the_asked_rate() -> None:
    make = behaviour_factory("echo", echo_s=1.0)
    a, b = make(24000), make(24000)
    assert a is not b and a.rate == 24000


def test_an_interrupted_reply_stops_and_the_next_turn_gets_its_own() -> None:
    b = make_behaviour("neutral", RATE, hangover_s=0.25, utterance=synthetic_voice(RATE, 4.0))
    run(b, clip(("silence", 0.3), ("speech", 1.0), ("silence", 0.6)), 320)
    assert b.replying
    b.interrupt()  # the server stopped it: the user talked over it
    assert not b.replying and b.scheduled_reply is None
    _, steps = run(b, clip(("speech", 0.8), ("silence", 0.6)), 320)
    assert sum(s.reply_started for _, s in steps) == 1  # the new turn is answered
    assert len(b.turns) == 2


def _talked_over(name: str) -> tuple[np.ndarray, list[tuple[int, Step]], Behaviour]:
    """A turn, its reply (2 s from about 1.6 s), and 0.5 s of the user over it at 2.5 s."""
    b = make_behaviour(name, RATE)
    x = clip(("speech", 1.0), ("silence", 1.5), ("speech", 0.5), ("silence", 3.0))
    out, steps = run(b, x, 320)
    return out, steps, b


def test_talk_through_never_stops_and_leaves_the_turn_over_it_unanswered() -> None:
    out, steps, b = _talked_over("talk-through")
    start = first_nonzero(out)
    assert np.count_nonzero(out) == pytest.approx(2 * RATE, abs=10)  # the whole utterance
    assert np.flatnonzero(out)[-1] - start == pytest.approx(2.4 * RATE, abs=10)  # its breath
    assert len(b.turns) == 2 and sum(s.reply_started for _, s in steps) == 1


def test_stop_on_overlap_stops_where_it_hears_the_user_then_answers_that_turn() -> None:
    out, steps, b = _talked_over("stop-on-overlap")
    heard = next(i for i, s in steps if s.speech_started and i > RATE)  # the user over it
    voiced = np.flatnonzero(out)
    first_reply = voiced[voiced < 3 * RATE]
    assert 2.5 * RATE < first_reply[-1] + 1 <= heard + 320  # cut in the chunk that heard it
    assert sum(s.reply_started for _, s in steps) == 2  # and it answered the interruption
    assert sum(s.reply_done for _, s in steps) == 2
    second = voiced[voiced > 3 * RATE]
    assert second[0] >= b.turns[1].end  # after the turn that made it stop


def test_an_utterance_with_a_pause_is_silent_there() -> None:
    voice = utterance(RATE, 2.0, pause_at_s=1.0, pause_s=0.6)
    assert voice.size == round(2.6 * RATE)
    assert not voice[RATE : RATE + round(0.6 * RATE)].any()
    assert voice[: RATE - 200].any() and voice[round(1.6 * RATE) + 200 :].any()
    b = make_behaviour("talk-through", RATE, utterance_s=2.0, pause_at_s=1.0, pause_s=0.6)
    assert np.array_equal(b.utterance, voice)


class _WholeTurnPass(Behaviour):
    """A behaviour that finds its turn's edges with one pass over the whole turn at its end."""

    def _new_turn_vad(self, lo: int) -> None:  # type: ignore[override]
        return None


@pytest.mark.parametrize("chunk", [320, 160, 437])
def test_a_turn_classified_as_it_comes_ends_where_a_pass_over_it_ends(chunk: int) -> None:
    """Every demo context (real speech, pauses, several runs): the turns found with the frames
    classified as they came are the ones a pass over the whole turn finds, to the sample, and
    so is the echo the model sends."""
    from pathlib import Path

    from duplexsim.clients.fakekit.behaviours.kinds import Echo
    from duplexsim.core.audio import read_audio
    from tests.helpers.paths import DEMO

    class EchoWhole(_WholeTurnPass, Echo):
        pass

    contexts = sorted((Path(DEMO) / "audio").glob("*.context.ogg"))[::3]
    assert len(contexts) >= 15
    for path in contexts:
        x = read_audio(path, sample_rate=RATE).samples
        x = np.concatenate([x, np.zeros(2 * RATE, np.float32)])  # the hangover passes
        streamed, whole = Echo(RATE, hangover_s=1.0), EchoWhole(RATE, hangover_s=1.0)
        out_streamed, _ = run(streamed, x, chunk)
        out_whole, _ = run(whole, x, chunk)
        assert streamed.turns and streamed.turns == whole.turns, path.name
        assert np.array_equal(out_streamed, out_whole), path.name


def test_the_examiner_talks_waits_for_a_reply_and_talks_again() -> None:
    x = clip(
        ("silence", 0.3), ("speech", 0.8), ("silence", 2.0), ("speech", 0.5), ("silence", 2.4),
        ("speech", 0.6), ("silence", 2.0),
    )  # fmt: skip
    b = make_behaviour("examiner", RATE, lines=2, line_s=0.5, step_s=0.3)
    out, steps = run(b, x, 320)
    assert len(b.turns) == 3
    lines = [synthetic_voice(RATE, 0.5, f0=200.0), synthetic_voice(RATE, 0.8, f0=200.0)]
    starts = [s.reply_started for _, s in steps]
    assert starts.count(True) == 2  # its two lines; the third turn gets nothing: it is done
    for turn, line in zip(b.turns, lines, strict=False):
        at = turn.decided  # as soon as the turn is over
        assert not out[at - 1] and np.array_equal(out[at : at + line.size], line)
    assert not out[b.turns[2].decided :].any()


def test_an_examiner_that_opens_says_its_first_line_at_once() -> None:
    b = make_behaviour("examiner", RATE, lines=1, line_s=0.5, opens=True)
    out, steps = run(b, np.zeros(RATE, np.float32), 320)
    assert steps[0][1].reply_started
    assert np.array_equal(out[: RATE // 2], synthetic_voice(RATE, 0.5, f0=200.0))
    assert not out[RATE // 2 :].any()
