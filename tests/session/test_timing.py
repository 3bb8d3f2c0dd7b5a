"""Session timing on a virtual clock, exact to the sample: placement, onset, end of reply,
truncation, a lagging model, late chunks, a model that streams only noise."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from duplexsim.clients.fakekit.behaviours import behaviour_factory, synthetic_voice
from duplexsim.core.turns import TurnSettings
from duplexsim.run.rows import outcome_row
from duplexsim.run.summary import summarise_rows
from duplexsim.session.engine import SessionOutcome, SessionSettings, run_session
from tests.helpers.sessions import RATE, SETTINGS, SlowSend, context, echo
from tests.helpers.virtualclock import ScriptedClient, run_virtual

SAMPLE = 1 / RATE


def session(client: ScriptedClient, settings: SessionSettings = SETTINGS) -> SessionOutcome:
    return run_virtual(run_session(client, context(), settings))


@pytest.mark.parametrize("latency_s", [0.3, 0.8])
def test_latency_is_exact_to_the_sample(latency_s: float) -> None:
    out = session(echo(latency_s))
    assert out.status == "ok" and out.end_reason == "end-of-turn" and out.truncated is None
    assert out.timing is not None and out.timing.latency_s is not None
    assert abs(out.timing.latency_s - latency_s) <= SAMPLE
    assert out.send.max_ms == 0.0  # the virtual clock is never late


def test_a_model_two_seconds_behind_keeps_its_whole_reply() -> None:
    patient = SessionSettings(turns=TurnSettings(hangover_s=0.5, reply_timeout_s=3.0))
    on_time = session(echo(0.5), patient)
    lagging = session(echo(0.5, delay=lambda k: 2.0), patient)
    assert lagging.status == "ok" and lagging.truncated is None
    assert on_time.timing is not None and lagging.timing is not None
    assert lagging.timing.duration_s == pytest.approx(on_time.timing.duration_s, abs=SAMPLE)
    assert lagging.timing.latency_s == pytest.approx(on_time.timing.latency_s + 2.0, abs=SAMPLE)


def test_a_stream_that_stalls_mid_reply_is_heard_out_in_its_own_time() -> None:
    # the reply plays from 1.7 s; its chunk at 1.9 s is held back 2.5 s, longer than the
    # hangover, and what follows comes after it: the reply goes on in the model's audio, so it
    # is not cut at the stall
    on_time = session(echo(0.5, end_of_turn=False))
    stalled = session(echo(0.5, end_of_turn=False, delay=lambda k: 2.5 if k == 95 else 0.0))
    assert on_time.timing is not None and stalled.timing is not None
    assert stalled.status == "ok" and stalled.end_reason == "vad-hangover"
    assert stalled.timing.onset_s == pytest.approx(on_time.timing.onset_s, abs=SAMPLE)
    assert stalled.timing.duration_s >= on_time.timing.duration_s


def test_a_late_chunk_does_not_move_the_onset_or_split_the_reply() -> None:
    on_time = session(echo(0.5))
    first = round((on_time.timing.onset_s or 0.0) / 0.02)  # type: ignore[union-attr]
    late = session(echo(0.5, delay=lambda k: 0.03 if k == first + 1 else 0.0))
    assert on_time.timing is not None and late.timing is not None
    assert late.timing.onset_s == pytest.approx(on_time.timing.onset_s, abs=SAMPLE)
    assert late.timing.duration_s == pytest.approx(on_time.timing.duration_s, abs=SAMPLE)


def test_a_reply_cut_at_its_maximum_length_is_flagged_truncated() -> None:
    settings = SessionSettings(
        turns=TurnSettings(hangover_s=0.5, max_reply_s=0.4, reply_timeout_s=1.0),
        deadline_margin_s=2.0,
    )
    out = session(echo(0.5), settings)
    assert out.status == "ok" and out.end_reason == "max-length"
    assert out.truncated == "max-length"
    assert out.timing is not None and out.timing.duration_s is not None
    assert out.timing.duration_s <= 0.4 + SAMPLE


def noise(level_dbfs: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    amp = 10 ** (level_dbfs / 20) * np.sqrt(3)  # uniform noise with that RMS

    def add(audio: np.ndarray) -> np.ndarray:
        return (audio + rng.uniform(-amp, amp, audio.size)).astype(np.float32)

    return add


@pytest.mark.parametrize("level", [-30.0, -39.0, -50.0])
def test_a_model_streaming_steady_noise_has_no_reply(level: float) -> None:
    silent = behaviour_factory("silent")(RATE)
    out = session(ScriptedClient(silent, transform=noise(level)))
    assert out.status == "no-reply" and out.end_reason == "no-reply"
    assert out.timing is not None and out.timing.onset_s is None


def test_speech_over_steady_noise_is_found() -> None:
    clean = session(echo(0.5))
    noisy = session(echo(0.5, transform=noise(-45.0)))
    assert clean.timing is not None and noisy.timing is not None
    assert noisy.status == "ok"
    assert noisy.timing.onset_s == pytest.approx(clean.timing.onset_s, abs=0.002)


def test_timing_is_valid_while_the_sends_keep_their_budget() -> None:
    out = session(echo(0.5))
    assert out.check.valid and out.check.invalid is None
    assert (out.check.send.max_ms, out.check.loop_lag_max_ms) == (0.0, 0.0)


def test_a_late_send_before_the_speech_end_spoils_no_figure() -> None:
    # frame 40 (0.8 s) is due before the user's speech ends (1.2 s): the sends behind it catch
    # up on the absolute schedule, so the model hears the end of the turn on time
    behaviour = behaviour_factory("delayed-echo", latency_s=0.5, hangover_s=0.25)(RATE)
    out = session(SlowSend(behaviour, frame=40, stall_s=0.025))
    assert out.status == "ok" and out.timing is not None
    assert out.check.send.max_ms == pytest.approx(25.0, abs=1e-6)
    assert out.check.unpaced == "send max 25.0 ms > 20 ms" and not out.check.paced
    assert out.check.valid and out.check.faithful  # its latency is as good as any
    assert out.check.window is not None and out.check.window.send_ms == 0.0
    # the frames after it were late too (the loop was behind), by less each time
    assert out.check.loop_lag_max_ms == pytest.approx(5.0, abs=1e-6)


def test_a_late_send_inside_the_latency_window_makes_the_session_imprecise_exactly() -> None:
    # frame 70 (1.4 s) is due after the speech end (1.2 s), before the reply's onset (1.7 s)
    behaviour = behaviour_factory("delayed-echo", latency_s=0.5, hangover_s=0.25)(RATE)
    out = session(SlowSend(behaviour, frame=70, stall_s=0.025))
    assert out.status == "ok"  # the reply is still measured; its latency is not vouched for
    assert out.check.window is not None
    assert out.check.window.send_ms == pytest.approx(25.0, abs=1e-6)
    assert out.check.invalid == "latency window 25.0 ms > 5 ms (send 25.0, loop 0.0)"
    assert out.check.faithful


@pytest.mark.parametrize(
    ("receiver_ms", "stall_s", "kept"),
    [(60.0, 0.060, True), (60.0, 0.075, False), (250.0, 0.075, True), (250.0, 0.260, False)],
)
def test_a_frame_late_past_what_the_receiver_absorbs_loses_input_fidelity_exactly(
    receiver_ms: float, stall_s: float, kept: bool
) -> None:
    behaviour = behaviour_factory("delayed-echo", latency_s=0.5, hangover_s=0.25)(RATE)
    client = SlowSend(behaviour, frame=40, stall_s=stall_s, input_jitter_ms=receiver_ms)
    out = session(client)
    late = 1000.0 * stall_s
    assert out.check.send.max_ms == pytest.approx(late, abs=1e-6)
    if kept:
        assert out.check.faithful and out.check.valid  # late, and heard as sent
        return
    why = f"a frame {late:.1f} ms late > {receiver_ms:g} ms"
    assert out.check.unfaithful == why
    assert out.check.invalid == f"input fidelity lost ({why})"  # losing it loses precision
    row = outcome_row("s", "en", "Anger", out, 1, Path("runs/r/sessions/s"), Path("runs/r"))
    assert (row.input_faithful, row.fidelity_lost, row.timing_valid) == (False, why, False)
    assert not row.faithful and not row.precise


def test_a_session_timed_throughout_is_judged_by_every_figure() -> None:
    from duplexsim.core.timing import LatencyWindow, TimingBudget, check_timing

    quiet = LatencyWindow(send_ms=0.0, loop_stall_ms=0.0)
    errors = [0.0] * 99 + [0.025]
    once = check_timing(errors, [0.0], 0.0, 0.02, TimingBudget(), quiet)
    assert once.valid and once.unpaced == "send max 25.0 ms > 20 ms"
    partner = check_timing(errors, [0.0], 0.0, 0.02, TimingBudget(), quiet, throughout=True)
    assert partner.invalid == "send max 25.0 ms > 20 ms"
    no_reply = check_timing(errors, [0.0], 0.0, 0.02, TimingBudget())
    assert no_reply.valid  # no latency to spoil


def test_fidelity_is_never_stricter_than_the_budgets_send_max() -> None:
    from duplexsim.core.timing import TimingBudget, check_timing, input_late_limit_ms

    loose = TimingBudget(send_max_ms=200.0, loop_lag_max_ms=200.0, recv_lag_max_ms=200.0)
    assert input_late_limit_ms(loose) == 200.0
    assert input_late_limit_ms(TimingBudget()) == 60.0
    assert input_late_limit_ms(TimingBudget(), 250.0) == 250.0
    check = check_timing([0.0] * 99 + [0.1], [0.0], 0.0, 0.02, loose)
    assert check.faithful and check.valid  # 100 ms late: within this budget's 200
    own = TimingBudget(input_late_ms=40.0)  # the budget's own limit, whatever the receiver's
    check = check_timing([0.0] * 99 + [0.045], [0.0], 0.0, 0.02, own, receiver_late_ms=250.0)
    assert check.unfaithful == "a frame 45.0 ms late > 40 ms"


def test_the_summary_agrees_with_the_rows_for_a_noise_only_model(tmp_path: Path) -> None:
    silent = behaviour_factory("silent")(RATE)
    outs = [session(ScriptedClient(silent, transform=noise(-39.0, seed))) for seed in range(3)]
    rows = [
        outcome_row(f"s{i}", "en", "", out, 1, tmp_path / f"s{i}", tmp_path)
        for i, out in enumerate(outs)
    ]
    summary = summarise_rows("noise", rows)
    assert [r.status for r in rows] == ["no-reply"] * 3
    assert [r.end_reason for r in rows] == ["no-reply"] * 3
    assert (summary.replied, summary.no_reply, summary.reply_rate) == (0, 3, 0.0)
    assert summary.latency_p50_ms is None and summary.overlapped == 0


def opus_noise(level_dbfs: float):
    """Noise through a continuous Ogg/Opus stream (encoder and decoder kept across chunks), as a
    Moshi server sends its idle output; the decoder's output per chunk varies in size."""
    codec = pytest.importorskip("duplexsim.clients.moshi.codec")
    encoder, decoder = codec.OggOpusEncoder(RATE, 320), codec.OggOpusDecoder(RATE)
    add = noise(level_dbfs)

    def coded(audio: np.ndarray) -> np.ndarray:
        return decoder.decode(encoder.encode(add(audio)))

    return coded


def test_opus_coded_low_noise_has_no_reply_and_the_summary_agrees(tmp_path: Path) -> None:
    silent = behaviour_factory("silent")(RATE)
    outs = [
        session(ScriptedClient(silent, transform=opus_noise(level))) for level in (-39.0, -45.0)
    ]
    rows = [outcome_row(f"s{i}", "en", "", o, 1, tmp_path, tmp_path) for i, o in enumerate(outs)]
    assert [(r.status, r.end_reason) for r in rows] == [("no-reply", "no-reply")] * 2
    assert sum(o.output.any() for o in outs) == 2  # the noise was there, heard as no reply
    summary = summarise_rows("opus", rows)
    assert (summary.replied, summary.no_reply, summary.latency_n) == (0, 2, 0)


def test_a_stream_that_resumes_in_real_time_after_a_stall_is_not_cut() -> None:
    # from 1.9 s on every chunk comes 2.5 s late, one per frame as the model makes them: the
    # first one after the stall is alone when the session looks, and is not yet speech
    on_time = session(echo(0.5, end_of_turn=False))
    behind = session(echo(0.5, end_of_turn=False, delay=lambda k: 2.5 if k >= 95 else 0.0))
    assert on_time.timing is not None and behind.timing is not None
    assert behind.status == "ok" and behind.end_reason == "vad-hangover"
    assert behind.timing.onset_s == pytest.approx(on_time.timing.onset_s, abs=SAMPLE)
    # the whole reply, with the stall inside it as the listener heard it
    assert behind.timing.duration_s == pytest.approx(on_time.timing.duration_s + 2.5, abs=0.01)


def voice_with_a_hole(hole_at_s: float = 0.04, hole_s: float = 0.02) -> np.ndarray:
    """0.2 s silence, 1 s of synthetic voice with ``hole_s`` of silence ``hole_at_s`` into it,
    0.1 s silence. The voice starts on a syllable's quiet rise: its levels spread 6 dB only
    about 100 ms in, so the VAD frame of the hole falls inside a run that does not count yet
    (webrtcvad drops loud frames of a coded voice there the same way)."""
    voice = synthetic_voice(RATE, 1.0)
    a = round(hole_at_s * RATE)
    voice[a : a + round(hole_s * RATE)] = 0.0
    x = np.zeros(round(1.3 * RATE), np.float32)
    x[round(0.2 * RATE) : round(1.2 * RATE)] = voice
    return x


@pytest.mark.parametrize("late_ms", range(10))
def test_an_unvoiced_frame_in_the_replys_first_syllable_does_not_move_its_onset(
    late_ms: int,
) -> None:
    # the reply lands anywhere within a 10 ms VAD frame; wherever it does, its onset is its
    # first sample (before the gap rule: the frame after the hole, 50-60 ms late)
    late_s = late_ms / 1000
    client = echo(0.5, delay=lambda k: late_s)
    out = run_virtual(run_session(client, voice_with_a_hole(), SETTINGS))
    assert out.status == "ok" and out.timing is not None and out.timing.latency_s is not None
    [turn] = client.behaviour.turns
    assert out.timing.speech_end_s == pytest.approx(turn.end_s, abs=SAMPLE)
    assert out.timing.latency_s == pytest.approx(0.5 + late_s, abs=SAMPLE)
