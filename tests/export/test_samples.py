"""Exports of a run: the per-sample log (JSON lines, CSV) and Full-Duplex-Bench's layout."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.helpers.cli import duplexsim
from tests.helpers.signals import voiced_signal, write_wav
from tests.helpers.timing import LENIENT_ARGS

RATE = 24000  # not the model's 16 kHz: the FDB export must come back to the input's rate


@pytest.fixture(scope="module")
def scored_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("export")
    lines = []
    for i, emotion in enumerate(("Anger", "Sadness")):
        context = np.concatenate([voiced_signal(1.2, RATE), np.zeros(3 * RATE, np.float32)])
        write_wav(root / "bench" / f"c{i}.wav", context, RATE)
        write_wav(root / "bench" / f"r{i}.wav", voiced_signal(0.8, f0=220.0))
        lines.append(
            {"id": f"s{i}", "language": "en", "emotion": emotion}
            | {"context": f"c{i}.wav", "reference": f"r{i}.wav"}
        )
    (root / "bench" / "manifest.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    run = duplexsim(
        "run", "--model", "fake:echo", "--benchmark", str(root / "bench"), "--run-id", "e",
        "--runs-dir", str(root / "runs"), "--quiet", *LENIENT_ARGS,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert duplexsim("score", str(root / "runs" / "e")).returncode == 0
    return root / "runs" / "e"


def test_samples_jsonl_joins_result_timing_scores_and_paths(scored_run):
    result = duplexsim("export", "samples", str(scored_run))
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["sample_id"] for r in records] == ["s0", "s1"]
    first = records[0]
    assert first["run_id"] == "e" and first["model"] == "fake-echo"
    assert first["status"] == "ok" and first["emotion"] == "Anger"
    assert first["latency_s"] is not None and first["send_p99_ms"] is not None
    assert Path(first["paths"]["output"]).is_file() and first["paths"]["context"].endswith("c0.wav")
    # what it used and cost: a local fake bills nothing, and says so
    assert first["audio_sent_s"] > 4.0 and first["connected_s"] >= first["audio_sent_s"] - 0.05
    assert first["cost"]["amount"] == 0.0 and "not billed" in first["cost"]["basis"]
    prosody = first["scores"]["prosody"]
    assert set(prosody["reply"]) >= {"Anger", "Sadness"} and prosody["reference"]
    # the reply is judged whatever its timing's precision; only a session whose model did not
    # hear the stream as sent (a frame seconds late under this budget) is out of N, and says so
    if first["validity"]["input_fidelity"]:
        assert prosody["out_of_n"] is None and prosody["reply_top"] is not None
        assert prosody["match"] == (prosody["reply_top"] == "Anger")
    else:
        assert prosody["out_of_n"] == "input fidelity lost" and prosody["reply_top"] is None
    assert first["validity"]["precision"] == (
        first["timing_valid"] is not False and first["validity"]["input_fidelity"]
    )


def test_samples_csv_has_one_flat_row_per_sample(scored_run, tmp_path):
    out = tmp_path / "log.csv"
    result = duplexsim("export", "samples", str(scored_run), "--format", "csv", "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert [r["sample_id"] for r in rows] == ["s0", "s1"]
    assert {"latency_s", "paths.output", "scores.prosody.reply.Anger"} <= set(rows[0])


def test_fdb_export_is_on_the_input_timeline_at_its_rate_and_length(scored_run, tmp_path):
    result = duplexsim("export", "fdb", str(scored_run), str(tmp_path / "fdb"))
    assert result.returncode == 0, result.stderr
    assert "2 sessions written" in result.stdout
    for sid in ("s0", "s1"):
        given, rate_in = sf.read(tmp_path / "fdb" / sid / "input.wav", dtype="float32")
        reply, rate_out = sf.read(tmp_path / "fdb" / sid / "output.wav", dtype="float32")
        assert rate_in == rate_out == RATE and len(given) == len(reply) == round(4.2 * RATE)
        # the echo answers after Speaker A stops: silent while A speaks, audible after
        assert np.abs(reply[:RATE]).max() < 0.01 and np.abs(reply[round(1.5 * RATE) :]).max() > 0.05


def test_export_of_what_is_not_a_run_is_one_line(tmp_path):
    result = duplexsim("export", "samples", str(tmp_path))
    assert result.returncode == 2 and "not a run directory" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_exported_matches_are_the_reports(scored_run):
    from duplexsim.report.data import build_report

    result = duplexsim("export", "samples", str(scored_run))
    records = [json.loads(line) for line in result.stdout.splitlines()]
    report = build_report(scored_run, "prosody")
    counted = [r for r in records if r["scores"]["prosody"]["out_of_n"] is None]
    assert len(counted) == report.metrics.n
    matches = sum(bool(r["scores"]["prosody"]["match"]) for r in counted)
    assert matches / report.metrics.n == pytest.approx(report.metrics.match_rate)
