"""Full-Duplex-Bench interop: timing-only benchmarks, import of its task folders, its timing
figures (take-over rate, latency over take-overs) in the report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.errors import BenchmarkError
from duplexsim.core.takeover import TimedSample, task_timings
from duplexsim.run.store import read_results
from tests.helpers.cli import duplexsim
from tests.helpers.signals import voiced_signal, write_wav


def test_takeover_rate_and_latency_as_full_duplex_bench_defines_them():
    samples = [
        TimedSample("pause", "ok", 2.0, 0.5),  # a take-over
        TimedSample("pause", "ok", 0.6, 0.2),  # under 1 s: a backchannel, no take-over
        TimedSample("pause", "no-reply", None, None),
        TimedSample("pause", "failed", None, None),  # infrastructure: left out
        TimedSample("turn", "ok", 1.0, -0.3),  # talked over the speaker: latency clamped to 0
        TimedSample("turn", "ok", 3.0, 0.9),
        TimedSample("turn", "ok", 3.0, 5.0, timing_valid=False),  # a take-over; latency unsure
        TimedSample(None, "ok", 3.0, 0.4),
    ]
    by = {t.task: t for t in task_timings(samples)}
    assert list(by) == ["all", "pause", "turn"]
    assert (by["pause"].samples, by["pause"].takeovers) == (3, 1)
    assert by["pause"].takeover_rate == pytest.approx(1 / 3)
    assert by["pause"].latency_s == pytest.approx(0.5)
    assert by["turn"].takeover_rate == 1.0 and by["turn"].takeovers == 3
    assert by["turn"].latency_s == pytest.approx(0.45)
    assert task_timings([TimedSample("x", "no-reply", None, None)])[0].latency_s is None


def _write_manifest(root: Path, lines: list[dict[str, object]]) -> Path:
    (root / "manifest.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return root


def test_emotion_and_reference_are_optional_together(tmp_path):
    write_wav(tmp_path / "c.wav", voiced_signal(1.0))
    bench = load_benchmark(
        _write_manifest(tmp_path, [{"id": "a", "language": "en", "context": "c.wav", "task": "t"}])
    )
    (sample,) = bench.samples
    assert sample.emotion is None and sample.reference is None and sample.task == "t"
    half = {"id": "a", "language": "en", "context": "c.wav", "emotion": "Anger"}
    with pytest.raises(BenchmarkError, match="'emotion' needs 'reference'"):
        load_benchmark(_write_manifest(tmp_path, [half]))
    bad_task = {"id": "a", "language": "en", "context": "c.wav", "task": "Has Space"}
    with pytest.raises(BenchmarkError, match="field 'task': invalid value"):
        load_benchmark(_write_manifest(tmp_path, [bad_task]))


@pytest.fixture
def fdb_tree(tmp_path: Path) -> Path:
    """Full-Duplex-Bench's layout: <task>/<id>/input.wav (with its task's JSON beside it)."""
    root = tmp_path / "fdb"
    speech_then_silence = np.concatenate([voiced_signal(1.2), np.zeros(48000, np.float32)])
    for task, ids in (("candor_pause_handling", ("1", "2")), ("candor_turn_taking", ("7",))):
        for sid in ids:
            write_wav(root / task / sid / "input.wav", speech_then_silence)
            (root / task / sid / "pause.json").write_text("[]")
    (root / "README.md").write_text("not a task")
    return root


def test_import_fdb_writes_a_timing_only_manifest(fdb_tree):
    result = duplexsim("benchmark", "import-fdb", str(fdb_tree))
    assert result.returncode == 0, result.stderr
    assert "3 timing-only samples (candor_pause_handling 2, candor_turn_taking 1)" in result.stdout
    bench = load_benchmark(fdb_tree)
    assert [(s.id, s.task) for s in bench] == [
        ("candor_pause_handling-1", "candor_pause_handling"),
        ("candor_pause_handling-2", "candor_pause_handling"),
        ("candor_turn_taking-7", "candor_turn_taking"),
    ]
    assert bench.samples[0].context == fdb_tree / "candor_pause_handling" / "1" / "input.wav"
    again = duplexsim("benchmark", "import-fdb", str(fdb_tree))
    assert again.returncode == 2 and "pass --force" in again.stderr
    check = duplexsim("benchmark", "check", str(fdb_tree))
    assert "timing only (no emotion or reference): 3 samples" in check.stdout


def test_import_fdb_of_one_task_folder_elsewhere(fdb_tree, tmp_path):
    out = tmp_path / "elsewhere"
    task = fdb_tree / "candor_turn_taking"
    refused = duplexsim("benchmark", "import-fdb", str(task), "--out", str(out))
    assert refused.returncode == 2 and "--allow-outside-paths" in refused.stderr
    assert not (out / "manifest.jsonl").exists()
    result = duplexsim(
        "benchmark", "import-fdb", str(task), "--out", str(out), "--allow-outside-paths"
    )
    assert result.returncode == 0, result.stderr
    (sample,) = load_benchmark(out, allow_outside=True).samples
    assert sample.task == "candor_turn_taking" and sample.context == task / "7" / "input.wav"
    bad = duplexsim(
        "benchmark", "import-fdb", str(task), "--out", str(tmp_path / "b"), "--language", "EN"
    )
    assert bad.returncode == 2 and "field 'language': invalid value 'EN'" in bad.stderr
    assert not any((tmp_path / "b").iterdir())  # nothing half-made is left
    empty = duplexsim("benchmark", "import-fdb", str(tmp_path / "elsewhere"), "--force")
    assert empty.returncode == 2 and "no <task>/<id>/input.wav" in empty.stderr


def test_a_timing_only_benchmark_runs_scores_nothing_and_reports_timing(fdb_tree, tmp_path):
    assert duplexsim("benchmark", "import-fdb", str(fdb_tree)).returncode == 0
    runs = tmp_path / "runs"
    run = duplexsim(
        "run", "--model", "fake:echo", "--benchmark", str(fdb_tree), "--run-id", "f",
        "--runs-dir", str(runs), "--quiet",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    score = duplexsim("score", str(runs / "f"))
    assert score.returncode == 0 and "0 clips scored" in score.stdout
    report = duplexsim("report", str(runs / "f"), "--out", str(tmp_path / "rep"))
    assert report.returncode == 0, report.stderr
    assert "timing by task:" in report.stdout and "NOT COMPARABLE" not in report.stdout
    data = json.loads((tmp_path / "rep" / "leaderboard.json").read_text())["runs"][0]
    by = {t["task"]: t for t in data["timing_by_task"]}
    # the echo repeats each 1.2 s of speech after it ends: a take-over everywhere
    assert by["candor_pause_handling"]["takeover_rate"] == 1.0
    assert by["candor_turn_taking"]["samples"] == 1
    # latency is vouched for only where the session kept its timing (a loaded machine may not)
    _, rows = read_results(runs / "f")
    (turn,) = [r for r in rows if r.sample_id.startswith("candor_turn_taking")]
    if turn.timing_valid:
        assert 0.0 <= by["candor_turn_taking"]["latency_s"] < 3.0
    else:
        assert by["candor_turn_taking"]["latency_s"] is None
    fdb = duplexsim("export", "fdb", str(runs / "f"), str(tmp_path / "out"))
    assert fdb.returncode == 0 and "3 sessions written" in fdb.stdout
