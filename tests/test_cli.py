from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simulator import __version__

REPO = Path(__file__).resolve().parents[1]


def duplexsim(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "simulator", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_clean_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stderr.startswith("duplexsim: error: ")
    for needle in needles:
        assert needle in result.stderr


def test_version_and_help():
    assert duplexsim("--version").stdout.strip() == f"duplexsim {__version__}"
    result = duplexsim("--help")
    assert result.returncode == 0 and "benchmark" in result.stdout


def test_check_valid_benchmark(make_benchmark):
    result = duplexsim("benchmark", "check", str(make_benchmark(n=2)))
    assert result.returncode == 0, result.stderr
    assert "2 samples, 1 languages" in result.stdout


@pytest.mark.parametrize(
    ("mutate", "needles"),
    [
        (
            lambda root: (root / "manifest.jsonl").write_text('{"id": 1}\n'),
            ["manifest.jsonl:1: field 'id': expected a string", "field 'emotion': missing"],
        ),
        (
            lambda root: (root / "audio" / "s0.reference.wav").write_bytes(b""),
            ["manifest.jsonl:1: field 'reference'", "s0.reference.wav", "empty"],
        ),
        (
            lambda root: (root / "audio" / "s1.context.wav").unlink(),
            ["manifest.jsonl:2: field 'context': file not found"],
        ),
    ],
)
def test_check_bad_benchmark_exits_2_without_traceback(make_benchmark, mutate, needles):
    root = make_benchmark(n=2)
    mutate(root)
    assert_clean_error(duplexsim("benchmark", "check", str(root)), *needles)


def test_check_missing_path(tmp_path):
    assert_clean_error(duplexsim("benchmark", "check", str(tmp_path / "nope")), "no such file")


def test_demo_benchmark_covers_12_emotions_and_5_languages():
    result = duplexsim("benchmark", "check", "recordings/demo")
    assert result.returncode == 0, result.stderr
    header = next(line for line in result.stdout.splitlines() if line.startswith("emotion"))
    assert header.split() == ["emotion", "ar", "en", "hi", "it", "tl", "total"]
    assert "12 emotions" in result.stdout
    manifest = (REPO / "recordings/demo/manifest.jsonl").read_text().splitlines()
    assert len(manifest) >= 60
    assert {json.loads(line)["language"] for line in manifest} == {"en", "hi", "ar", "it", "tl"}
