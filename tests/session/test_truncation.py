"""Replies cut short: the session says why (its deadline, a server that closed while the model
spoke, the maximum length), on the virtual clock and exact to the sample, and the flag reaches the
result row, the bundle, the run summary and the report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from duplexsim.clients.fakekit.behaviours import Behaviour, behaviour_factory
from duplexsim.clients.pcm_ws.server import start_server
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.runfolder import RunFolder
from duplexsim.core.turns import TurnSettings
from duplexsim.core.vad import StreamingVad, VadConfig, frame_flags
from duplexsim.profiles.profile import ModelProfile
from duplexsim.report.data import build_report
from duplexsim.report.write import write_report
from duplexsim.run.runner import RunOptions, execute_run
from duplexsim.run.store import read_results
from duplexsim.run.summary import render_summaries, summarise_rows
from duplexsim.session.engine import SessionOutcome, SessionSettings, run_session
from tests.helpers.sessions import SETTINGS, SlowSend, context
from tests.helpers.signals import voiced_signal, write_wav
from tests.helpers.timing import LENIENT
from tests.helpers.virtualclock import ScriptedClient, run_virtual


def read_meta(folder: Path):
    """A bundle's typed meta.json, read as every command reads it."""
    return RunFolder(folder).meta(folder)


# the context's speech is 0.2-1.2 s; the model echoes it 0.5 s after its end: 1.7-2.7 s
ONSET_S, REPLY_END_S = 1.7, 2.7
EDGE = 10 ** (VadConfig().edge_dbfs / 20)


def echo(rate: int = 16000) -> Behaviour:
    return behaviour_factory("delayed-echo", latency_s=0.5, hangover_s=0.25)(rate)


def placed_until_s(out: SessionOutcome) -> float:
    """End of the model's audio on the timeline."""
    return (np.flatnonzero(out.output)[-1] + 1) / out.output_rate


def heard_until_s(out: SessionOutcome) -> float:
    """End of the model's audio at the level that marks a speech edge (a reply measured to the
    sample ends there)."""
    return (np.flatnonzero(np.abs(out.output) >= EDGE)[-1] + 1) / out.output_rate


def closing(close_at_s: float, rate: int = 16000, **kw: object) -> SessionOutcome:
    """A session whose server closes the connection at ``close_at_s`` on the timeline."""
    client = ScriptedClient(echo(rate), rate=rate, close_at_s=close_at_s, **kw)  # type: ignore[arg-type]
    return run_virtual(run_session(client, context(), SETTINGS))


def uncut() -> SessionOutcome:
    return run_virtual(run_session(ScriptedClient(echo()), context(), SETTINGS))


@pytest.mark.parametrize("rate", [16000, 24000, 48000])
@pytest.mark.parametrize("extra", [0, 77])
def test_a_stream_that_ends_in_speech_is_speech_to_its_last_frame_once_finished(
    rate: int, extra: int
) -> None:
    # 20 ms chunks, the last one short by ``extra`` samples past a whole frame or not: the
    # resampler holds about 21 ms back and a partial frame waits for more, until the stream is
    # over; then the VAD agrees with whole-clip detection of the recording (silence after it)
    x = np.zeros(rate + extra, np.float32)
    x[rate // 5 :] = voiced_signal((x.size - rate // 5) / rate, rate)
    vad = StreamingVad(rate)
    ends = [hi for i in range(0, x.size, rate // 50) for _, hi in vad.speech(x[i : i + rate // 50])]
    ends += [hi for _, hi in vad.finish()]
    padded = np.concatenate((x, np.zeros(rate // 10, np.float32)))
    assert max(ends) == np.flatnonzero(frame_flags(padded, rate))[-1] + 1
    assert max(ends) * VadConfig().frame_s >= x.size / rate


@pytest.mark.parametrize("rate", [16000, 24000])
def test_a_reply_going_on_at_the_deadline_is_kept_and_measured_up_to_the_cut(rate: int) -> None:
    # the send of the frame due at 2.0 s never returns (a peer that stopped reading): the
    # session's deadline passes mid-reply, the model's audio on the timeline up to 2.0 s
    client = SlowSend(echo(rate), rate=rate, frame=100, stall_s=60.0)
    out = run_virtual(run_session(client, context(), SETTINGS))
    assert (out.status, out.end_reason, out.truncated) == ("ok", "deadline", "deadline")
    assert out.error is None
    assert out.wall_s == pytest.approx(SETTINGS.deadline_s(1.3, client.config.connect_timeout_s))
    assert placed_until_s(out) == pytest.approx(2.0, abs=0.1 / rate)
    assert out.timing is not None
    assert out.timing.onset_s == pytest.approx(ONSET_S, abs=1.5 / rate)
    # to the sample, at 24 kHz too (the VAD's resampler holds the last 21 ms until the end)
    assert out.timing.offset_s == pytest.approx(heard_until_s(out), abs=1.5 / rate)


@pytest.mark.parametrize("rate", [16000, 24000])
@pytest.mark.parametrize("continuous", [True, False], ids=["continuous", "audio-only"])
@pytest.mark.parametrize("close_at_s", [2.2, 2.2137, REPLY_END_S])
def test_a_server_closing_while_the_model_speaks_cuts_the_reply(
    rate: int, continuous: bool, close_at_s: float
) -> None:
    # 2.2137 s ends the stream inside a VAD frame; at 2.7 s it ends exactly at its last speech
    out = closing(close_at_s, rate, continuous=continuous, end_of_turn=False)
    assert (out.status, out.end_reason, out.truncated) == ("ok", "server-closed", "server-closed")
    assert placed_until_s(out) == pytest.approx(close_at_s, abs=1.5 / rate)
    assert out.timing is not None
    assert out.timing.onset_s == pytest.approx(ONSET_S, abs=1.5 / rate)
    assert out.timing.offset_s == pytest.approx(heard_until_s(out), abs=1.5 / rate)


@pytest.mark.parametrize("continuous", [True, False], ids=["continuous", "audio-only"])
@pytest.mark.parametrize("close_at_s", [2.75, 2.9])
def test_a_server_closing_in_the_silence_after_the_reply_does_not_cut_it(
    continuous: bool, close_at_s: float
) -> None:
    # before the hangover (0.5 s) ends the reply; the silence is sent (continuous) or not
    out = closing(close_at_s, continuous=continuous, end_of_turn=False)
    whole = uncut()
    assert (out.status, out.end_reason, out.truncated) == ("ok", "server-closed", None)
    assert out.timing is not None and whole.timing is not None
    assert out.timing.duration_s == whole.timing.duration_s


def test_a_server_closing_with_its_end_of_turn_does_not_cut_the_reply() -> None:
    # the whole reply, its end-of-turn and the close reach the session in one poll, at 2.82 s
    settings = SessionSettings(
        turns=TurnSettings(hangover_s=0.5, max_reply_s=4.0, reply_timeout_s=3.0),
        deadline_margin_s=2.0,
    )
    first = round(ONSET_S / 0.02)
    client = ScriptedClient(
        echo(), close_at_s=2.81, delay=lambda k: 2.805 - 0.02 * k if k >= first else 0.0
    )
    out = run_virtual(run_session(client, context(), settings))
    whole = uncut()
    assert (out.status, out.end_reason, out.truncated) == ("ok", "end-of-turn", None)
    assert out.timing is not None and whole.timing is not None
    assert out.timing.onset_s == pytest.approx(2.805, abs=1e-6)  # played from its arrival
    assert out.timing.duration_s == pytest.approx(whole.timing.duration_s, abs=1e-9)


def timing_only_benchmark(root: Path, speech_s: dict[str, float]) -> Path:
    lines = []
    for sample_id, seconds in speech_s.items():
        x = np.zeros(int((seconds + 0.4) * 16000), np.float32)
        x[3200 : 3200 + round(seconds * 16000)] = voiced_signal(seconds)
        write_wav(root / "audio" / f"{sample_id}.wav", x)
        lines.append({"id": sample_id, "language": "en", "context": f"audio/{sample_id}.wav"})
    (root / "manifest.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return root


async def test_a_truncated_reply_is_flagged_in_the_row_bundle_summary_and_report(
    tmp_path: Path,
) -> None:
    # s0's echo (1 s) passes the maximum length of 0.6 s, whatever the machine's load; s1's
    # (0.3 s) ends by itself
    bench = load_benchmark(timing_only_benchmark(tmp_path / "b", {"s0": 1.0, "s1": 0.3}))
    settings = SessionSettings(
        turns=TurnSettings(hangover_s=0.5, max_reply_s=0.6, reply_timeout_s=1.0),
        stall_timeout_s=1.0,
        deadline_margin_s=3.0,
        budget=LENIENT,
    )
    server = await start_server(behaviour_factory("delayed-echo", latency_s=0.4, hangover_s=0.25))
    profile = ModelProfile(name="local", protocol="pcm-ws", url=server.url)
    opts = RunOptions(run_id="cut", runs_dir=tmp_path / "runs", settings=settings, quiet=True)
    try:
        await execute_run(bench, profile, opts)
    finally:
        await server.aclose()
    run_dir = tmp_path / "runs" / "cut"
    _, rows = read_results(run_dir)
    flags = {r.sample_id: (r.status, r.end_reason, r.truncated) for r in rows}
    assert flags == {"s0": ("ok", "max-length", "max-length"), "s1": ("ok", flags["s1"][1], None)}
    assert read_meta(run_dir / "sessions" / "s0").outcome["truncated"] == "max-length"
    assert read_meta(run_dir / "sessions" / "s1").outcome["truncated"] is None
    summary = summarise_rows("cut", rows)
    assert (summary.replied, summary.truncated) == (2, 1)
    assert "truncated" in render_summaries([summary]).splitlines()[0]
    report = build_report(run_dir, None)
    assert report.timing.truncated == 1
    paths = write_report([report], tmp_path / "report")
    data = json.loads(paths["json"].read_text())
    assert data["runs"][0]["timing"]["truncated"] == 1
    assert "- cut: N = 0; out of N: none; 1 reply truncated" in paths["markdown"].read_text()
    assert "1 reply truncated" in paths["html"].read_text()
