from __future__ import annotations

import json
import subprocess
import sys

import pytest

from duplexsim import __version__
from tests.helpers.cli import REPO, duplexsim
from tests.helpers.timing import LENIENT_ARGS


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
            ["manifest.jsonl:1: field 'id': expected a string", "field 'context': missing"],
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


def test_demo_runs_reference_models_end_to_end(tmp_path):
    result = duplexsim(
        "demo",
        "--limit",
        "3",
        "--models",
        "echo,silent",
        "--runs-dir",
        str(tmp_path),
        "--run-prefix",
        "d",
        "--reply-timeout",
        "2",
        "--quiet",
        *LENIENT_ARGS,  # the pipeline is under test, not how loaded this machine is
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    echo = next(line for line in lines if line.startswith("d-echo"))
    silent = next(line for line in lines if line.startswith("d-silent"))
    # the reference models are labelled as fakes wherever the runs are shown
    assert echo.split()[1:7] == ["[fake]", "3", "3", "0", "0", "100%"]
    assert silent.split()[1:7] == ["[fake]", "3", "0", "3", "0", "0%"]
    assert "fake-echo [fake]" in result.stdout
    # what scoring did, one plain line per run (never a Python tuple)
    scored = [line for line in lines if "clips scored" in line]
    assert [line.split(":")[0] for line in scored] == [
        str(tmp_path / "d-echo"),
        str(tmp_path / "d-silent"),
    ]
    assert not any(line.startswith(("(", "('", '("')) for line in lines), result.stdout
    assert "0 unscored" in scored[0]
    # both validities are counted beside the runs, and the samples retried
    header = next(line for line in lines if line.startswith("run "))
    assert "input fidelity" in header and "precision" in header and "retried" in header
    replay = duplexsim("replay", str(tmp_path / "d-echo"))
    assert "3/3 sessions agree" in replay.stdout, replay.stdout + replay.stderr
    # a loaded machine may push a session's own sends over budget: replay then says which and
    # exits 1 (its audit is tested exactly in test_replayaudit)
    over = "sessions with timing problems" in replay.stdout
    assert replay.returncode == (1 if over else 0), replay.stdout + replay.stderr


def test_bad_model_and_options_are_clear_errors(tmp_path, make_benchmark):
    bench = str(make_benchmark(n=1))
    assert_clean_error(duplexsim("run", "--model", "nope", "--benchmark", bench), "unknown model")
    assert_clean_error(
        duplexsim("run", "--model", "fake:echo@carrier-pigeon", "--benchmark", bench),
        "unknown protocol 'carrier-pigeon'",
    )
    assert_clean_error(
        duplexsim("run", "--model", "fake:echo", "--benchmark", bench, "--shard", "3/2"),
        "--shard",
    )
    assert_clean_error(
        duplexsim("run", "--model", "fake:echo", "--benchmark", bench, "--stall-timeout", "0"),
        "--stall-timeout must be > 0",
    )
    assert_clean_error(
        duplexsim("run", "--model", "fake:echo", "--benchmark", bench, "--timing-budget", "5"),
        "--timing-budget must be P99_MS/MAX_MS",
    )
    bad = tmp_path / "bad.toml"
    bad.write_text("protocol = [")
    assert_clean_error(duplexsim("run", "--model", str(bad), "--benchmark", bench), "invalid TOML")
    assert_clean_error(duplexsim("replay", str(tmp_path)), "no recorded sessions")
    assert_clean_error(
        duplexsim("serve-model", "--behaviour", "shouting", "--port", "0"), "unknown behaviour"
    )
    assert_clean_error(
        duplexsim("serve-model", "--host", "0.0.0.0", "--port", "0"), "--allow-remote"
    )


def test_models_list_shows_profiles_without_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-print")
    result = subprocess.run(
        [sys.executable, "-m", "duplexsim", "models", "list"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    from duplexsim.profiles.profile import builtin_profiles, load_profile

    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines() if line.strip()}
    for name, path in builtin_profiles().items():  # every profile, with its protocol
        assert rows[name][1] == load_profile(path).protocol
    assert {"azure-realtime", "azure-voice-live", "qwen-omni-realtime"} <= set(rows)
    assert "OPENAI_API_KEY (set)" in result.stdout
    assert "sk-should-not-print" not in result.stdout
    # a hosted profile says its sessions are paid, and which ones a run retries
    assert rows["gpt-realtime"][-1] == "paid" and rows["moshi-local"][-1] == "local"
    assert "unless you pass --retry-imprecise" in " ".join(result.stdout.split())


def test_profile_without_its_key_fails_before_any_session(tmp_path):
    env_free = {k: v for k, v in __import__("os").environ.items() if k != "OPENAI_API_KEY"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "duplexsim",
            "run",
            "--model",
            "gpt-realtime",
            "--benchmark",
            "recordings/demo",
            "--runs-dir",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env=env_free,
    )
    assert_clean_error(result, "OPENAI_API_KEY is not set")
    assert not any(tmp_path.iterdir())


def test_scoring_service_from_the_command_line(tmp_path):
    """Broker and worker as their own processes; a non-loopback bind without CURVE is refused."""
    refused = subprocess.run(
        [sys.executable, "-m", "duplexsim", "scoring", "serve", "--bind", "tcp://0.0.0.0:5999"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert_clean_error(refused, "--insecure", "CURVE")
    keys = duplexsim("scoring", "keys", str(tmp_path / "keys"))
    assert keys.returncode == 0 and (tmp_path / "keys" / "broker.key").exists()


def test_score_and_scoring_worker_help_show_the_precision_option():
    for args in (("score",), ("scoring", "worker"), ("benchmark", "build"), ("demo",)):
        result = duplexsim(*args, "--help")
        assert result.returncode == 0, result.stderr
        assert "--precision {fp32,bf16,fp16}" in result.stdout
        assert "AMX-BF16" in " ".join(result.stdout.split())


def test_an_unknown_scorer_is_refused_before_any_work(tmp_path):
    # before the listing is even read (it does not exist here)
    args = ["benchmark", "build", str(tmp_path / "calls.csv"), "--out", str(tmp_path / "b")]
    assert_clean_error(duplexsim(*args, "--scorer", "nope"), "unknown scorer 'nope'", "prosody")


@pytest.mark.parametrize("command", ["run", "talk"])
def test_stall_timeout_reaches_the_session_settings(command):
    from duplexsim.cli import build_parser
    from duplexsim.cli.run_cmd import session_settings

    args = build_parser().parse_args(
        [command, "--model", "fake:echo", "--stall-timeout", "2.5"]
        + (["--benchmark", "b"] if command == "run" else [])
    )
    assert session_settings(args).stall_timeout_s == 2.5
    assert session_settings(args).describe()["stall_timeout_s"] == 2.5  # recorded in meta.json
