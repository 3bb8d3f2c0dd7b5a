"""``duplexsim talk`` against the fake audio backend: a fake microphone speaks a clip to the echo
model; the turn is recorded like any session and can be scored and reported."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from duplexsim.cli import main
from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.pcm_ws.server import start_server
from duplexsim.core.errors import ConfigError
from duplexsim.core.runbench import RunBenchmark
from duplexsim.core.runfolder import RunFolder
from duplexsim.core.vad import VadConfig
from duplexsim.live.audio_io import AudioOptions, fake
from duplexsim.live.talk import Microphone, MicTurn, TalkOptions, _open_store, talk
from duplexsim.profiles.profile import resolve_model
from duplexsim.replay.sessions import replay_run
from duplexsim.run.store import ResultRow, read_results
from duplexsim.runscores.score import _reference_job, collect_clips
from duplexsim.session import eventloop
from tests.helpers.paths import REPO
from tests.helpers.sessions import settings
from tests.helpers.signals import voiced_signal, write_wav

RATE = 16000
SETTINGS = settings(
    max_reply_s=3.0, reply_timeout_s=2.0, stall_timeout_s=1.0, deadline_margin_s=3.0
)


@pytest.fixture(autouse=True)
def _fresh_fake():
    fake.reset()
    yield
    fake.reset()


def spoken_clip() -> np.ndarray:
    """0.2 s silence, 1 s of speech: the person's speech ends at 1.2 s."""
    x = np.zeros(round(1.2 * RATE), np.float32)
    x[round(0.2 * RATE) :] = voiced_signal(1.0)
    return x


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64))))


def peak_hz(x: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(x * np.hanning(x.size)))
    return float(np.fft.rfftfreq(x.size, 1 / RATE)[np.argmax(spectrum)])


async def talk_to_echo(tmp_path, **kw):
    server = await start_server(behaviour_factory("echo"))
    try:
        opts = TalkOptions(
            run_id="t",
            runs_dir=tmp_path,
            settings=SETTINGS,
            audio=AudioOptions(backend="fake", rate=RATE, latency_ms=50),
            **kw,
        )
        lines: list[str] = []
        rows = await talk(resolve_model(server.url), opts, say=lines.append)
        return rows, lines
    finally:
        await server.aclose()


def test_talk_records_a_turn_that_plays_scores_and_reports(tmp_path):
    clip = spoken_clip()
    fake.set_microphone(clip, RATE, tail_s=1.5)  # the input ends during the reply: one turn
    rows, lines = eventloop.run(talk_to_echo(tmp_path))
    assert [r.sample_id for r in rows] == ["talk-001"]
    row = rows[0]
    assert row.status == "ok", row.error
    assert row.speech_end_s == pytest.approx(1.2, abs=0.02)
    assert 0.4 < row.latency_s < 1.2  # the echo model answers after its own 0.6 s hangover
    assert any(line.startswith("talk-001: replied after") for line in lines)

    bundle = tmp_path / "t" / "sessions" / "talk-001"
    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["source"] == "microphone" and meta["sample"]["reference"] is None
    assert meta["model"]["protocol"] == meta["client"]["protocol"] == "pcm-ws"
    assert meta["settings"]["turns"]["hangover_s"] == 0.5
    assert meta["talk"]["end_of_turn_ms"] == 800 and meta["talk"]["audio_backend"] == "fake"
    assert meta["talk"]["turn_end_s"] == pytest.approx(2.0, abs=0.1)  # 1.2 s + the 0.8 s pause

    # input.wav: the microphone's audio (the clip, then its silence) on the session timeline
    sent, rate = sf.read(bundle / "input.wav", dtype="float32")
    assert rate == RATE and sent.size > clip.size
    np.testing.assert_allclose(sent[: clip.size], clip, atol=1e-4)
    assert np.abs(sent[clip.size :]).max() == 0.0
    # output.wav: the echo of the speech, in the same voice, from the measured onset
    output, _ = sf.read(bundle / "output.wav", dtype="float32")
    onset = round(row.onset_s * RATE)
    speech = clip[round(0.2 * RATE) :]
    echo = output[onset : onset + speech.size]
    assert peak_hz(echo) == pytest.approx(140.0, abs=3.0)  # voiced_signal's f0
    # in one piece, as long and as loud, where the session kept its timing: chunks are placed
    # at their arrival, so a stall of this machine's longer than the bridge splits the reply (a
    # first piece too short to be speech before the onset, a gap within), and the session then
    # says its timing is invalid; on time, only sub-millisecond gaps (the timeline is not
    # sample-identical to the speech)
    if row.timing_valid:
        assert np.abs(output[:onset]).max() < 0.01
        assert row.reply_duration_s == pytest.approx(1.0, abs=0.05)
        assert rms(echo) == pytest.approx(rms(speech), rel=0.1)

    # the speaker played the model, and only the model (never the person's own voice): what it
    # played is the recording wherever it played anything, and all of it where the session
    # kept its timing (audio placed further behind than the player's latency is not heard)
    [speaker] = fake.outputs()
    played = speaker.audio()
    n = min(played.size, output.size)
    heard = played[:n] != 0
    np.testing.assert_allclose(played[:n][heard], output[:n][heard], atol=1e-4)
    if row.timing_valid:
        assert n > output.size - speaker.block
        np.testing.assert_allclose(played[:n], output[:n], atol=1e-4)

    # score: the reply only (there is no reference); report: timing, no MIRRORING sample
    jobs, problems = collect_clips(tmp_path / "t")
    assert [j.key for j in jobs] == ["reply/talk-001"] and not problems
    assert main(["score", str(tmp_path / "t")]) == 0
    cache = json.loads((tmp_path / "t" / "scores" / "prosody.json").read_text())
    assert list(cache["items"]) == ["reply/talk-001"]
    assert main(["report", str(tmp_path / "t"), "--out", str(tmp_path / "report")]) == 0
    [run] = json.loads((tmp_path / "report" / "leaderboard.json").read_text())["runs"]
    assert run["metrics"]["n"] == 0 and run["unscored"] == {}  # nothing to mirror, nothing missing
    assert run["timing"]["replied"] == 1

    # replay: the user's turn as it was sent, the model's audio at its recorded arrivals
    [replayed] = eventloop.run(replay_run(tmp_path / "t", [], concurrency=1))
    assert replayed.agrees(5.0), (replayed.recorded, replayed.replayed)
    # view: a page for the talk session
    assert main(["view", str(tmp_path / "t"), "--out", str(tmp_path / "view")]) == 0
    assert (tmp_path / "view" / "sessions" / "talk-001.html").is_file()


def test_talk_cli_with_a_fake_microphone_file(tmp_path):
    mic = write_wav(tmp_path / "mic.wav", spoken_clip())
    result = subprocess.run(
        [
            *(sys.executable, "-m", "duplexsim", "talk", "--model", "fake:echo"),
            *("--run-id", "cli", "--runs-dir", str(tmp_path / "runs")),
            *("--audio-backend", f"fake:{mic}"),
            *("--hangover", "0.5", "--reply-timeout", "2", "--max-reply", "3"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "talk-001: replied after" in result.stdout
    assert "1 turn(s) recorded" in result.stdout  # the microphone file ended: talk stopped
    meta, rows = read_results(tmp_path / "runs" / "cli")
    assert meta["benchmark"] == "microphone" and meta["model"]["name"] == "fake-echo"
    assert [(r.sample_id, r.status, r.emotion) for r in rows] == [("talk-001", "ok", "")]


async def _turn(mic_signal, *, max_turn_s=10.0, stop=False):
    device = fake.FakeInput(48000, 960, mic_signal, tail_s=2.0)
    device.sleep = lambda s: None  # no real-time pacing: the test runs at CPU speed
    mic = Microphone(device)
    turn = MicTurn(mic, end_of_turn_s=0.8, max_turn_s=max_turn_s, vad=VadConfig())
    turn.stop_requested = stop
    try:
        await turn.start(24000, 480)
        frames = []
        while not turn.turn_ended:
            frames.append(await turn.read())
        return turn, np.concatenate(frames)
    finally:
        mic.close()


def test_turn_ends_after_a_pause_resampled_to_the_session_rate():
    speech = np.zeros(round(1.2 * 48000), np.float32)
    speech[round(0.2 * 48000) :] = voiced_signal(1.0, 48000)
    turn, sent = eventloop.run(_turn(speech))
    assert turn.heard_speech and not turn.input_ended
    assert sent.size / 24000 == pytest.approx(1.2 + 0.8, abs=0.05)
    assert np.abs(sent[: round(0.19 * 24000)]).max() < 0.01 < np.abs(sent[24000:28800]).max()


def test_turn_ends_at_its_longest_or_when_stopped():
    turn, sent = eventloop.run(_turn(np.zeros(48000 * 3, np.float32), max_turn_s=0.5))
    assert not turn.heard_speech and sent.size == 12000
    turn, sent = eventloop.run(_turn(np.zeros(48000, np.float32), stop=True))  # Ctrl-C
    assert sent.size == 480
    turn, sent = eventloop.run(_turn(np.zeros(0, np.float32)))  # the input ended at once
    assert turn.input_ended


def test_talk_continues_a_run_and_refuses_another_models(tmp_path):
    echo, other = resolve_model("fake:echo"), resolve_model("fake:silent")
    opts = TalkOptions(run_id="r", runs_dir=tmp_path)
    store, first = _open_store(opts, echo)
    assert first == 1
    for sample_id in ("talk-001", "talk-007"):
        store.put(result_row(sample_id, emotion="", bundle=None))
    store.close()
    store, first = _open_store(opts, echo)
    store.close()
    assert first == 8
    with pytest.raises(ConfigError, match="already holds other results"):
        _open_store(opts, other)
    with pytest.raises(ConfigError, match="--turns"):
        TalkOptions(run_id="r", runs_dir=tmp_path, turns=0)


def result_row(sample_id: str, *, emotion: str, bundle: str | None) -> ResultRow:
    return ResultRow(
        sample_id, "ok", "vad-hangover", None, 1, "", emotion, *[None] * 11, bundle, ""
    )


def test_a_bundle_without_a_reference_key_is_still_an_error(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "meta.json").write_text(json.dumps({"sample": {"id": "x"}}))
    with pytest.raises(ConfigError, match="records no context path"):
        run = RunFolder(tmp_path)
        _reference_job(run, result_row("x", emotion="Anger", bundle="b"), RunBenchmark(run, {}))


def test_ctrl_c_ends_the_turn_records_it_and_stops(tmp_path):
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "duplexsim", "talk", "--model", "fake:echo"),
            *("--run-id", "sig", "--runs-dir", str(tmp_path), "--audio-backend", "fake"),
            *("--reply-timeout", "0.5"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("talking to fake-echo")  # devices are open
        assert "talk-001: speak now" in proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "stopping after this turn" in out and "1 turn(s) recorded" in out
    _, rows = read_results(tmp_path / "sig")
    assert [(r.sample_id, r.status) for r in rows] == [("talk-001", "no-reply")]
