"""Recording bundles: written whole or not at all, read back typed (old versions too), read and
written by one module only, and the leftovers of a killed run removed."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from duplexsim.core.bundle import BUNDLE_VERSION, BundleMeta, SampleRef
from duplexsim.core.errors import ConfigError
from duplexsim.core.records import EventRecords
from duplexsim.core.runfolder import RunFolder
from duplexsim.core.timing import SendStats, TimingCheck
from duplexsim.run.recording import record_session, remove_unfinished
from duplexsim.session.engine import SessionOutcome
from tests.helpers.paths import REPO


def read_meta(folder: Path):
    """A bundle's typed meta.json, read as every command reads it."""
    return RunFolder(folder).meta(folder)


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


def meta(run_id: str = "r", attempts: int = 1, **extra: object) -> BundleMeta:
    sample = SampleRef("s0", "benchmark", "en", "Anger", "/b/s0.c.wav", "/b/s0.r.wav", 1.5)
    return BundleMeta(sample, run_id, {"name": "m"}, {}, {}, attempts=attempts, extra=extra)


def contents(folder: Path) -> dict[str, object]:
    got: dict[str, object] = {}
    for name in ("input.wav", "output.wav", "stereo.wav"):
        data, rate = sf.read(folder / name, dtype="int16")
        got[name] = (rate, data.tobytes())
    got["events.jsonl"] = (folder / "events.jsonl").read_text()
    got["meta.json"] = json.loads((folder / "meta.json").read_text())
    return got


def test_bundle_holds_every_file_and_nothing_else(tmp_path):
    record_session(tmp_path / "s0", outcome(), meta())
    assert {p.name for p in (tmp_path / "s0").iterdir()} == FILES
    assert [p.name for p in tmp_path.iterdir()] == ["s0"]
    got = contents(tmp_path / "s0")
    assert got["meta.json"]["run_id"] == "r" and got["meta.json"]["output_rate"] == 24000
    assert got["meta.json"]["kind"] == "benchmark"
    assert got["meta.json"]["bundle_version"] == BUNDLE_VERSION
    assert len(got["events.jsonl"].splitlines()) == 100 + 1 + 1  # sends, audio, one event


def test_a_bundle_reads_back_as_written(tmp_path):
    record_session(tmp_path / "s0", outcome(), meta(source="x"))
    back = read_meta(tmp_path / "s0")
    assert back.sample == meta().sample and back.kind == "benchmark"
    assert back.status == "ok" and back.outcome["bytes_sent"] == 64000
    assert back.outcome["send"]["p99_ms"] == 0.3 and back.extra == {"source": "x"}
    assert (back.input_rate, back.output_rate) == (16000, 24000)


def test_failed_write_keeps_the_older_attempt_and_leaves_nothing_behind(tmp_path):
    folder = tmp_path / "s0"
    record_session(folder, outcome(1.0), meta(attempts=1))
    with pytest.raises(TypeError):
        record_session(folder, outcome(2.0), meta(attempts=2, **{"x": {1j: "no JSON key"}}))
    assert json.loads((folder / "meta.json").read_text())["attempts"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["s0"]


def test_a_new_attempt_replaces_the_older_one(tmp_path):
    folder = tmp_path / "s0"
    record_session(folder, outcome(1.0), meta(attempts=1))
    record_session(folder, outcome(2.0), meta(attempts=2))
    assert json.loads((folder / "meta.json").read_text())["attempts"] == 2
    assert sf.info(folder / "input.wav").frames == 32000
    assert [p.name for p in tmp_path.iterdir()] == ["s0"]


V1_TALK = {
    "bundle_version": 1,
    "source": "microphone",
    "sample": {"id": "talk-001", "language": None, "emotion": None, "context": None,
               "reference": None, "context_turn_start_s": 0.0},
    "run_id": "t", "model": {"name": "m"}, "settings": {}, "attempts": 1,
    "outcome": {"status": "ok", "end_reason": "vad", "timing": None},
}  # fmt: skip


def test_a_version_1_bundle_still_reads_and_a_talk_session_is_live(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "meta.json").write_text(json.dumps(V1_TALK))
    back = read_meta(tmp_path / "t")
    assert back.version == 1 and back.kind == "live" and back.sample.reference is None
    assert back.extra == {"source": "microphone"}
    v1_bench = V1_TALK | {"sample": {"id": "a", "context": "/c.wav", "reference": "/r.wav"}}
    (tmp_path / "t" / "meta.json").write_text(json.dumps(v1_bench))
    assert read_meta(tmp_path / "t").kind == "benchmark"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"kind": "dream"}, "kind"),
        ({"sample": {"id": "a", "reference": "/r.wav"}}, "no context path"),
        ({"settings": [1]}, "settings"),
        ({"attempts": "two"}, "attempts"),
        ({"bundle_version": 99}, "newer"),
    ],
)
def test_a_bad_meta_is_one_error_naming_the_field(tmp_path, change, field):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "meta.json").write_text(json.dumps(V1_TALK | change))
    with pytest.raises(ConfigError, match=field):
        read_meta(tmp_path / "t")


def test_only_the_bundle_module_names_the_bundle_files():
    """Every reader and writer of bundles goes through duplexsim.core.bundle: no other module
    spells out one of its file names."""
    root = REPO
    names = re.compile(r"[\"'](meta\.json|events\.jsonl|input\.wav|output\.wav|stereo\.wav)[\"']")
    offenders = [
        str(path.relative_to(root))
        for folder in ("simulator", "clients", "scoring")
        for path in (root / folder).rglob("*.py")
        if path.name != "bundle.py" and names.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


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
