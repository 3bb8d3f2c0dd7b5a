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
from duplexsim.core.emotions import EMOTION_NAMES, HEAD_NAMES
from duplexsim.profiles.profile import ModelProfile
from duplexsim.replay.sessions import replay_run
from duplexsim.report.data import build_report, turn_rows
from duplexsim.report.tables import terminal_report
from duplexsim.run.runner import RunOptions, execute_run
from duplexsim.runscores.cache import cache_path
from duplexsim.runscores.score import collect_clips
from duplexsim.viewer import write_view
from duplexsim.viewer.data import load_run, load_session
from tests.helpers.runs import SETTINGS, short_benchmark
from tests.helpers.signals import voiced_signal, write_wav
from tests.helpers.timing import vouched


def scores(run_dir: Path, keys: list[str]) -> None:
    """A score cache where every reply and reference peaks at Sadness."""
    top = [0.1] * 12
    top[EMOTION_NAMES.index("Sadness")] = 0.9
    items = {
        f"{kind}/{k}": {"digest": "x", "values": top}
        for k in keys
        for kind in ("reply", "reference")
    }
    path = cache_path(run_dir, "prosody")
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"version": 1, "scorer": "prosody", "dimensions": HEAD_NAMES, "items": items}
    path.write_text(json.dumps(data), encoding="utf-8")


def partner_benchmark(root: Path) -> Path:
    short_benchmark(root, 1)
    write_wav(root / "audio" / "wait.wav", voiced_signal(0.5, f0=220.0))
    write_wav(root / "audio" / "next.wav", voiced_signal(0.8, f0=200.0))
    line = json.loads((root / "manifest.jsonl").read_text())
    line["task"] = "interruption"
    line["partner"] = [
        {"kind": "interrupt", "clip": "audio/wait.wav", "after_onset_ms": 500},
        {
            "kind": "next_turn",
            "clip": "audio/next.wav",
            "gap_ms": 300,
            "emotion": "Sadness",
            "reference": "audio/s0.ref.wav",
        },
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
    # what the model did at each step is in the row, by task in the report
    scores(tmp_path / "runs" / "r", ["s0", "s0.turn2"])
    report = build_report(tmp_path / "runs" / "r", "prosody")
    assert report.metrics.n == 2  # the conversation's two scored replies: two samples
    (summary,) = report.partner
    assert (summary.task, summary.interrupts, summary.stopped, summary.answered) == (
        "interruption",
        1,
        1,
        1,
    )
    assert (summary.next_turns, summary.replied) == (1, 1)
    assert summary.stop_latency_s > 0
    if vouched(row):  # how soon it stopped, as this machine kept time
        assert summary.stop_latency_s < 0.1
    assert "partner by task:" in terminal_report([report])
    assert report.to_dict()["partner_by_task"][0]["stop_rate"] == 1.0
    # the next turn names an emotion: it is a sample of its own, scored like the others
    (turn,) = turn_rows([row])
    assert (turn.sample_id, turn.emotion, turn.status) == ("s0.turn2", "Sadness", "ok")
    keys = {job.key for job in collect_clips(tmp_path / "runs" / "r")[0]}
    assert {"reply/s0", "reference/s0", "reply/s0.turn2", "reference/s0.turn2"} <= keys
    # the viewer draws the partner's steps on the user's lane
    view = load_session(load_run(tmp_path / "runs" / "r"), "s0")
    assert [(p.kind, p.turn) for p in view.partner] == [("interrupt", 1), ("next_turn", 2)]
    assert view.partner[0].at_s == interrupt["at_s"]
    assert view.partner[1].reply_onset_s == turns[2]["onset_s"]
    page = write_view(tmp_path / "runs" / "r", tmp_path / "view", sample="s0", scorer="prosody")
    text = page.read_text()
    assert "partner: interruption" in text and '"partner":[[' in text.replace(" ", "")
