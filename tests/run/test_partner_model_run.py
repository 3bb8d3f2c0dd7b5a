"""Runs with another model as the user (``run --partner``), over real loopback connections: a
scripted examiner on every fake protocol as the partner, an echo under test; each bundle holds
both sides and every turn; the partner's instructions reach it where its protocol takes them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.registry import (
    client_class,
    client_protocols,
    fake_server_factory,
    server_protocols,
)
from duplexsim.core.audio import read_audio
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.errors import ConfigError
from duplexsim.core.extras import MissingExtra
from duplexsim.core.partnerturns import PartnerLimits
from duplexsim.core.turns import TurnSettings
from duplexsim.export.fdb import export_fdb
from duplexsim.profiles.profile import ModelProfile
from duplexsim.replay.sessions import replay_run
from duplexsim.report.data import build_report
from duplexsim.run.partnerrun import PartnerOptions
from duplexsim.run.runner import RunOptions, execute_run
from duplexsim.viewer.data import load_run, load_session
from tests.helpers.runs import SETTINGS, short_benchmark

PROTOCOLS = sorted(set(client_protocols()) & set(server_protocols()))
TOLD = "You are a customer ordering breakfast. Keep it short."
# a partner over WebRTC on a loaded machine may take a while to be heard
PATIENT = replace(
    SETTINGS, turns=TurnSettings(hangover_s=0.5, max_reply_s=3.0, reply_timeout_s=2.0)
)


@asynccontextmanager
async def fake(protocol: str, behaviour: str, **params: object) -> AsyncIterator[ModelProfile]:
    """A fake model in this process, as a profile; skipped where its extra is missing."""
    try:
        start = fake_server_factory(protocol)
        client_class(protocol)
    except MissingExtra as exc:
        pytest.skip(str(exc))
    server = await start(behaviour_factory(behaviour, **params))
    try:
        yield ModelProfile(
            name=f"fake-{behaviour}", protocol=protocol, url=server.url, fake_behaviour=behaviour
        )
    finally:
        await server.aclose()


def bench(root: Path, n: int = 2, instructions: str | None = TOLD) -> Path:
    short_benchmark(root, n)
    lines = [json.loads(x) for x in (root / "manifest.jsonl").read_text().splitlines()]
    for line in lines:
        del line["emotion"], line["reference"]  # timed only: nothing here to mirror
        line["task"] = "conversation"
        if instructions is not None:
            line["partner_instructions"] = instructions
    (root / "manifest.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return root


def options(tmp_path: Path, partner: ModelProfile, turns: int = 1, **kw: object) -> RunOptions:
    return RunOptions(
        run_id="r",
        runs_dir=tmp_path / "runs",
        concurrency=2,
        admission=False,  # both sessions at once, whatever this machine's load
        settings=PATIENT,
        quiet=True,
        partner=PartnerOptions(partner, PartnerLimits(turns=turns, time_s=20.0), **kw),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_every_fake_protocol_can_play_the_partner(tmp_path, protocol):
    async with (
        fake("pcm-ws", "echo", hangover_s=0.3) as model,
        fake(protocol, "examiner", hangover_s=0.3, lines=2, line_s=0.5) as partner,
    ):
        rows = await execute_run(
            load_benchmark(bench(tmp_path / "b")), model, options(tmp_path, partner)
        )
    for row in rows:
        assert row.status == "ok", row.error
        meta = json.loads((tmp_path / "runs" / "r" / row.bundle / "meta.json").read_text())
        outcome, about = meta["outcome"], meta["partner_model"]
        client = outcome["partner_model"]["client"]
        assert client["protocol"] == protocol
        assert outcome["partner_model"]["ended_by"] == "turn-limit"
        first, second = outcome["turns"]
        assert second["start_s"] > first["offset_s"]  # the partner spoke after the reply
        assert second["onset_s"] > second["speech_end_s"]  # and the model answered it
        option = client_class(protocol).instructions_option
        assert about["instructions_option"] == option
        if option is not None:
            assert client["options"][option] == TOLD
        (step,) = json.loads(row.partner)["steps"]
        assert (step["kind"], step["turn"], step["replied"]) == ("next_turn", 1, True)


async def test_a_conversation_of_turns_is_recorded_timed_and_shown(tmp_path):
    async with (
        fake("pcm-ws", "echo", hangover_s=0.3) as model,
        fake("pcm-ws", "examiner", hangover_s=0.3, lines=5, line_s=0.5) as partner,
    ):
        opts = options(tmp_path, partner, turns=3)
        (row,) = await execute_run(load_benchmark(bench(tmp_path / "b", 1)), model, opts)
    assert row.status == "ok", row.error
    bundle = tmp_path / "runs" / "r" / "sessions" / "s0"
    meta = json.loads((bundle / "meta.json").read_text())
    assert [t["turn"] for t in meta["outcome"]["turns"]] == [0, 1, 2, 3]
    assert meta["partner_model"]["instructions"] == TOLD
    assert meta["partner_model"]["instructions_from"] == "sample"
    events = [json.loads(x) for x in (bundle / "events.jsonl").read_text().splitlines()]
    dirs = {e["dir"] for e in events}
    assert {"send", "recv", "partner-send", "partner-recv", "user"} <= dirs
    # both sides' timing is in the bundle; the session's holds them both
    assert meta["outcome"]["partner_check"]["send"]["frames"] > 0
    # each of the partner's turns is a next turn of the report's partner table
    (summary,) = build_report(tmp_path / "runs" / "r", None).partner
    assert (summary.task, summary.next_turns, summary.replied) == ("conversation", 3, 3)
    # played again, what the model heard and the partner's turns where they were: the same
    (replayed,) = await replay_run(tmp_path / "runs" / "r", [], concurrency=1)
    assert replayed.agrees(tolerance_ms=1.0), replayed
    # exported as Full-Duplex-Bench reads it: the input is what the model heard, partner and all
    export_fdb(tmp_path / "runs" / "r", tmp_path / "fdb")
    exported = read_audio(tmp_path / "fdb" / "s0" / "input.wav").samples
    assert np.array_equal(exported, read_audio(bundle / "input.wav").samples)
    view = load_session(load_run(tmp_path / "runs" / "r"), "s0")
    assert [(p.kind, p.turn) for p in view.partner] == [("next_turn", k) for k in (1, 2, 3)]
    # the run knows its partner: resumed with another one, it refuses
    other = replace(opts, partner=replace(opts.partner, profile=replace(model, name="other")))
    with pytest.raises(ConfigError, match="was run with partner 'fake-examiner'"):
        await execute_run(load_benchmark(tmp_path / "b"), model, other)


async def test_instructions_from_a_file_fill_in_and_a_protocol_without_says_so(tmp_path, capsys):
    async with (
        fake("pcm-ws", "echo", hangover_s=0.3) as model,
        fake("pcm-ws", "examiner", hangover_s=0.3, lines=1, line_s=0.5) as partner,
    ):
        opts = options(tmp_path, partner, instructions="From a file.", instructions_source="t.txt")
        opts = replace(opts, quiet=False)
        (row,) = await execute_run(load_benchmark(bench(tmp_path / "b", 1, None)), model, opts)
    meta = json.loads((tmp_path / "runs" / "r" / row.bundle / "meta.json").read_text())
    about = meta["partner_model"]
    assert (about["instructions"], about["instructions_from"]) == ("From a file.", "t.txt")
    assert about["instructions_option"] is None  # pcm-ws takes none
    assert "partner protocol pcm-ws takes no instructions" in capsys.readouterr().err


async def test_samples_with_a_script_of_their_own_are_refused(tmp_path):
    root = bench(tmp_path / "b", 1)
    line = json.loads((root / "manifest.jsonl").read_text())
    line["partner"] = [{"kind": "next_turn", "clip": line["context"], "gap_ms": 100}]
    (root / "manifest.jsonl").write_text(json.dumps(line) + "\n")
    partner = ModelProfile(name="p", protocol="pcm-ws", fake_behaviour="examiner")
    with pytest.raises(ConfigError, match="carry a partner script of their own: s0"):
        await execute_run(load_benchmark(root), partner, options(tmp_path, partner))
