"""A run over samples with partner scripts: each session plays its script against the model, and
its bundle records the script, every turn and every step."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.pcm_ws.server import start_server
from duplexsim.core.audio import read_audio
from duplexsim.core.benchmark import load_benchmark
from duplexsim.profiles.profile import ModelProfile
from duplexsim.replay.sessions import replay_run
from duplexsim.run.runner import RunOptions, execute_run
from tests.helpers.runs import SETTINGS, short_benchmark
from tests.helpers.signals import voiced_signal, write_wav


def partner_benchmark(root: Path) -> Path:
    short_benchmark(root, 1)
    write_wav(root / "audio" / "wait.wav", voiced_signal(0.5, f0=220.0))
    write_wav(root / "audio" / "next.wav", voiced_signal(0.8, f0=200.0))
    line = json.loads((root / "manifest.jsonl").read_text())
    line["partner"] = [
        {"kind": "interrupt", "clip": "audio/wait.wav", "after_onset_ms": 500},
        {"kind": "next_turn", "clip": "audio/next.wav", "gap_ms": 300},
    ]
    (root / "manifest.jsonl").write_text(json.dumps(line) + "\n")
    return root


async def test_a_partner_sample_runs_its_script_and_records_it(tmp_path):
    bench = load_benchmark(partner_benchmark(tmp_path / "b"))
    server = await start_server(behaviour_factory("stop-on-overlap", hangover_s=0.25))
    profile = ModelProfile(name="local", protocol="pcm-ws", url=server.url)
    opts = RunOptions(run_id="r", runs_dir=tmp_path / "runs", settings=SETTINGS, quiet=True)
    try:
        (row,) = await execute_run(bench, profile, opts)
    finally:
        await server.aclose()
    assert row.status == "ok"
    bundle = tmp_path / "runs" / "r" / "sessions" / "s0"
    meta = json.loads((bundle / "meta.json").read_text())
    assert [s["kind"] for s in meta["partner"]] == ["interrupt", "next_turn"]
    interrupt, turn = meta["outcome"]["partner"]
    assert interrupt["fired"] and turn["fired"] and turn["opens_turn"] == 2
    turns = meta["outcome"]["turns"]
    assert [t["turn"] for t in turns] == [0, 1, 2]
    assert turns[0]["offset_s"] < interrupt["clip_end_s"]  # it stopped when talked over
    assert all(t["onset_s"] is not None for t in turns)  # and answered both turns
    events = [json.loads(x) for x in (bundle / "events.jsonl").read_text().splitlines()]
    assert [e["partner"] for e in events if e["kind"] == "partner"] == ["interrupt", "next_turn"]
    sent = read_audio(bundle / "input.wav").samples
    first = round(interrupt["at_s"] * 16000)
    wait = voiced_signal(0.5, f0=220.0)
    assert np.abs(sent[first : first + wait.size] - wait).max() < 1e-3  # PCM16 in the wav
    # replayed, the partner decides again from the recorded model: the same session
    (replayed,) = await replay_run(tmp_path / "runs" / "r", [], concurrency=1)
    assert replayed.recorded["status"] == replayed.replayed["status"] == "ok"
    assert replayed.agrees(tolerance_ms=1.0), replayed
