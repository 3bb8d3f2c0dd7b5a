"""Shared command-line habits: sample selection, -M model options, one spelling per meaning, and
dry runs against loopback without a key."""

from __future__ import annotations

import argparse
import re

import pytest

from duplexsim.cli import build_parser
from duplexsim.cli.options import model_options, select_samples
from duplexsim.cli.run_cmd import with_overrides
from duplexsim.core.errors import ConfigError
from duplexsim.profiles.profile import FAKE_KEY, ModelProfile, client_config, is_loopback_url

IDS = ["en-anger-1", "en-pride-1", "hi-anger-1", "it-pride-1"]


def test_select_samples_globs_keep_benchmark_order_and_limit_applies_after():
    assert select_samples(IDS, [], None) == IDS
    assert select_samples(IDS, ["*-pride-*", "en-*"], None) == [
        "en-anger-1",
        "en-pride-1",
        "it-pride-1",
    ]
    assert select_samples(IDS, ["*-anger-*"], 1) == ["en-anger-1"]
    assert select_samples(IDS, [], 2) == IDS[:2]


@pytest.mark.parametrize(
    ("patterns", "limit", "needle"),
    [(["fr-*"], None, "--sample 'fr-*' matches no sample id"), ([], 0, "--limit must be")],
)
def test_select_samples_refuses_what_selects_nothing(patterns, limit, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        select_samples(IDS, patterns, limit)


def test_model_options_are_read_as_toml_over_the_profile():
    base = {"sample_rate": 16000, "voice": "alloy"}
    got = model_options(["sample_rate=24000", "voice=verse", "flags=[1, 2]", "on=true"], base)
    assert got == {"sample_rate": 24000, "voice": "verse", "flags": [1, 2], "on": True}
    assert base["sample_rate"] == 16000  # the profile's own table is left alone
    with pytest.raises(ConfigError, match="-M 'novalue': expected KEY=VALUE"):
        model_options(["novalue"], {})


def test_run_takes_limit_sample_and_model_options():
    args = build_parser().parse_args(
        [
            "run",
            "--model",
            "fake:echo",
            "--benchmark",
            "b",
            "--limit",
            "3",
            "--sample",
            "en-*",
            "-M",
            "sample_rate=24000",
            "--model-option",
            "x=y",
            "--url",
            "ws://127.0.0.1:9/",
        ]
    )
    assert (args.limit, args.sample) == (3, ["en-*"])
    profile = with_overrides(ModelProfile(name="m", protocol="pcm-ws", options={"a": 1}), args)
    assert profile.options == {"a": 1, "sample_rate": 24000, "x": "y"}
    assert profile.url == "ws://127.0.0.1:9/"


def test_score_takes_limit_and_sample():
    args = build_parser().parse_args(["score", "runs/x", "--limit", "2", "--sample", "it-*"])
    assert (args.limit, args.sample) == (2, ["it-*"])


@pytest.mark.parametrize(
    ("argv", "dest", "new"),
    [
        (["score", "r", "--device", "cuda:1"], "torch_device", "--torch-device"),
        (["demo", "--device", "cuda:1"], "torch_device", "--torch-device"),
        (["scoring", "worker", "--device", "cuda:1"], "torch_device", "--torch-device"),
        (["run", "--model", "m", "--benchmark", "b", "--device", "3"], "audio_device", None),
        (["talk", "--model", "m", "--device", "3"], "audio_device", "--audio-device"),
    ],
)
def test_old_device_spelling_still_works_with_a_deprecation_line(argv, dest, new, capsys):
    args = build_parser().parse_args(argv)
    assert getattr(args, dest) in ("cuda:1", "3")
    new = new or "--audio-device"
    assert f"--device is deprecated; use {new}" in capsys.readouterr().err
    spelled = [a if a != "--device" else new for a in argv]
    assert getattr(build_parser().parse_args(spelled), dest) in ("cuda:1", "3")
    assert capsys.readouterr().err == ""


def test_device_options_are_named_for_what_they_pick():
    parser = build_parser()
    assert parser.parse_args(["score", "r"]).torch_device == "cpu"
    run = parser.parse_args(["run", "--model", "m", "--benchmark", "b"])
    assert run.audio_device is None and not hasattr(run, "torch_device")


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("ws://127.0.0.1:8765/v1/realtime", True),
        ("ws://127.3.4.5/", True),
        ("wss://localhost/x", True),
        ("ws://[::1]:80/", True),
        ("wss://api.openai.com/v1/realtime", False),
        ("ws://10.0.0.1/", False),
    ],
)
def test_is_loopback_url(url, loopback):
    assert is_loopback_url(url) is loopback


def test_a_dry_run_against_loopback_needs_no_key():
    hosted = ModelProfile(
        name="gpt-realtime",
        protocol="openai-realtime",
        url="wss://api.openai.com/v1/realtime",
        api_key_env="OPENAI_API_KEY",
    )
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        client_config(hosted, environ={})
    local = client_config(hosted, url="ws://127.0.0.1:8765/v1/realtime", environ={})
    assert local.api_key == FAKE_KEY
    real = client_config(hosted, url="ws://127.0.0.1:1/", environ={"OPENAI_API_KEY": "sk-x"})
    assert real.api_key == "sk-x"  # a key that is set is still the one sent


def test_parsers_have_one_limit_each():
    # demo, run and score all take the same selection options
    for argv in (["demo"], ["run", "--model", "m", "--benchmark", "b"], ["score", "r"]):
        args = build_parser().parse_args([*argv, "--limit", "1", "--sample", "a*"])
        assert isinstance(args, argparse.Namespace) and args.limit == 1


def test_run_and_score_select_the_same_way(make_benchmark, tmp_path):
    from tests.helpers.cli import duplexsim

    bench = make_benchmark(n=3)
    runs = tmp_path / "runs"
    common = ["--runs-dir", str(runs), "--quiet"]
    result = duplexsim(
        "run", "--model", "fake:echo", "--benchmark", str(bench), "--run-id", "r",
        "--sample", "s[12]", "--limit", "1", *common,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (runs / "r" / "sessions").iterdir()) == ["s1"]
    score = duplexsim("score", str(runs / "r"), "--sample", "s1")
    assert score.returncode == 0, score.stderr
    assert "2 clips scored" in score.stdout  # the reply and the reference of s1
    missing = duplexsim("score", str(runs / "r"), "--sample", "s2")
    assert missing.returncode == 2 and "--sample 's2' matches no sample id" in missing.stderr


def test_a_factory_needs_the_scorer_name_its_scores_are_recorded_under():
    from duplexsim.cli.score_cmd import resolve_scorer_name

    args = build_parser().parse_args(
        ["benchmark", "build", "calls.csv", "--out", "o", "--factory", "m:f"]
    )
    with pytest.raises(ConfigError, match="--factory needs --scorer NAME"):
        resolve_scorer_name(args)
    args.scorer = "mine"
    assert resolve_scorer_name(args) == "mine"


def test_the_timing_budget_takes_an_optional_latency_bound():
    from duplexsim.cli.run_cmd import timing_budget

    two = timing_budget("5/20")
    assert (two.send_p99_ms, two.send_max_ms, two.loop_lag_max_ms) == (5.0, 20.0, 20.0)
    assert two.latency_ms == 5.0  # the p99 unless given
    assert timing_budget("5/20/3").latency_ms == 3.0
    for bad in ("5", "5/20/3/60/1", "5/x", "5/20/0", "-1/20", "5/20/3/0"):
        with pytest.raises(ConfigError, match="P99_MS/MAX_MS\\[/LATENCY_MS\\[/INPUT_MS\\]\\]"):
            timing_budget(bad)
