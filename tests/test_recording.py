"""Recording bundles: written whole or not at all, and the leftovers of a killed run removed."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from simulator.core.records import EventRecords
from simulator.core.timing import SendStats, TimingCheck
from simulator.recording import remove_unfinished, write_bundle
from simulator.session import SessionOutcome

FILES = {"input.wav", "output.wav", "stereo.wav", "events.jsonl", "meta.json"}


def outcome(seconds: float = 2.0) -> SessionOutcome:
    rng = np.random.default_rng(7)
    records = EventRecords()
    for n in range(int(seconds * 50)):
        records.add_send(n, n * 0.02 + 0.0003, n * 0.02, 320)
    records.add_received(0.51, 480, 0.5, None, False)
    records.add_event(0.6, {"kind": "speech_started"})
    send = SendStats(frames=int(seconds * 50), p50_ms=0.3, p99_ms=0.3, max_ms=0.3)
    return SessionOutcome(
        status="ok",
        end_reason="vad",
        timing=None,
        send=send,
        check=TimingCheck(send, 0.1, 0.0, None),
        input_rate=16000,
        output_rate=24000,
        sent=(rng.standard_normal(int(seconds * 16000)) * 0.1).astype(np.float32),
        output=(rng.standard_normal(int(seconds * 24000)) * 0.1).astype(np.float32),
        records=records,
        bytes_sent=64000,
        bytes_received=960,
    )


def contents(folder: Path) -> dict[str, object]:
    got: dict[str, object] = {}
    for name in ("input.wav", "output.wav", "stereo.wav"):
        data, rate = sf.read(folder / name, dtype="int16")
        got[name] = (rate, data.tobytes())
    got["events.jsonl"] = (folder / "events.jsonl").read_text()
    got["meta.json"] = json.loads((folder / "meta.json").read_text())
    return got


def test_bundle_holds_every_file_and_nothing_else(tmp_path):
    write_bundle(tmp_path / "s0", outcome(), {"run_id": "r"})
    assert {p.name for p in (tmp_path / "s0").iterdir()} == FILES
    assert [p.name for p in tmp_path.iterdir()] == ["s0"]
    got = contents(tmp_path / "s0")
    assert got["meta.json"]["run_id"] == "r" and got["meta.json"]["output_rate"] == 24000
    assert len(got["events.jsonl"].splitlines()) == 100 + 1 + 1  # sends, audio, one event


def test_failed_write_keeps_the_older_attempt_and_leaves_nothing_behind(tmp_path):
    folder = tmp_path / "s0"
    write_bundle(folder, outcome(1.0), {"attempt": 1})
    with pytest.raises(TypeError):
        write_bundle(folder, outcome(2.0), {"attempt": 2, 1j: "a key JSON cannot take"})
    assert json.loads((folder / "meta.json").read_text())["attempt"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["s0"]


def test_a_new_attempt_replaces_the_older_one(tmp_path):
    folder = tmp_path / "s0"
    write_bundle(folder, outcome(1.0), {"attempt": 1})
    write_bundle(folder, outcome(2.0), {"attempt": 2})
    assert json.loads((folder / "meta.json").read_text())["attempt"] == 2
    assert sf.info(folder / "input.wav").frames == 32000
    assert [p.name for p in tmp_path.iterdir()] == ["s0"]


def test_unfinished_folders_of_the_given_samples_are_removed(tmp_path):
    names = [
        "s1",  # a finished bundle
        ".s1.ab_cd3x9",  # a temporary of s1
        ".s1.old",  # s1's older attempt, mid-replacement
        ".s1.b.k2j4h6g8",  # a temporary of sample "s1.b", not of s1
        ".s2.qwertyui",  # another shard's sample, maybe being written now
        ".s1.toolong123",  # not a name mkdtemp makes
    ]
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "input.wav").write_bytes(b"x")
    # and a temporary named as write_bundle names it (tempfile's own random part)
    real = Path(tempfile.mkdtemp(prefix=".s3.", dir=tmp_path))
    assert remove_unfinished(tmp_path, ["s1", "s3"]) == 3
    assert not real.exists()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([".s1.b.k2j4h6g8", ".s1.toolong123", ".s2.qwertyui", "s1"])
    assert remove_unfinished(tmp_path / "missing", ["s1"]) == 0
