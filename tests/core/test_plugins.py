"""Extension points: a protocol and a scorer from another package, found through entry points or
named as module:Class, used end to end (tests/plugin_example is that package)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from duplexsim.core.errors import ConfigError
from duplexsim.core.plugins import is_object_name, load_object
from tests.helpers.paths import REPO

PLUGIN = REPO / "tests" / "plugin_example"
CLIENT = "duplexsim_example_plugin.client:RawPcmClient"
SCORER = "duplexsim_example_plugin.scorer:LoudnessScorer"


@pytest.fixture
def plugin_site(tmp_path: Path) -> Path:
    """A folder where the example plugin looks installed: its package and its entry points."""
    site = tmp_path / "site"
    info = site / "duplexsim_example_plugin-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: duplexsim-example-plugin\nVersion: 0.1.0\n"
    )
    (info / "entry_points.txt").write_text(
        f"[duplexsim.protocols]\nraw-pcm = {CLIENT}\n\n"
        f"[duplexsim.scorers]\nexample-loudness = {SCORER}\n"
    )
    return site


@pytest.fixture
def installed(plugin_site: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.syspath_prepend(str(PLUGIN))
    monkeypatch.syspath_prepend(str(plugin_site))
    yield


def test_object_names():
    assert is_object_name("mypkg.client:MyClient")
    assert not is_object_name("pcm-ws") and not is_object_name("ws://host:1")
    with pytest.raises(ConfigError, match="cannot import no_such_pkg"):
        load_object("no_such_pkg.x:Y", "the x protocol")
    with pytest.raises(ConfigError, match="has no attribute 'Nope'"):
        load_object("duplexsim.clients.base:Nope", "the x protocol")


def test_entry_points_register_a_protocol_and_a_scorer(installed):
    from duplexsim.clients.registry import client_class, client_protocols
    from duplexsim.scoring.models import load_scorer, scorer_names

    assert "raw-pcm" in client_protocols() and "example-loudness" in scorer_names()
    assert client_class("raw-pcm").__name__ == "RawPcmClient"
    assert client_class(CLIENT) is client_class("raw-pcm")
    model = load_scorer("example-loudness")
    assert type(model) is type(load_scorer(SCORER))
    assert model.score([0.1 * __import__("numpy").ones(16000, "float32")]).shape == (1, 12)


def test_a_name_that_is_not_a_client_or_scorer_is_refused(installed):
    from duplexsim.clients.registry import client_class
    from duplexsim.scoring.models import load_scorer

    with pytest.raises(ConfigError, match="is not a DuplexClient subclass"):
        client_class(SCORER)
    with pytest.raises(ConfigError, match="is not an EmotionModel subclass"):
        load_scorer(CLIENT)
    with pytest.raises(ConfigError, match=r"unknown protocol 'nope'.*raw-pcm"):
        client_class("nope")


def _env(*paths: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*(str(p) for p in paths), str(REPO)])
    return env


def _duplexsim(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "duplexsim", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=REPO,
    )


def test_a_plugin_protocol_and_scorer_run_end_to_end(plugin_site, make_benchmark, tmp_path):
    env = _env(PLUGIN, plugin_site)
    server = subprocess.Popen(
        [sys.executable, "-m", "duplexsim_example_plugin.server", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split()[-1]
        profile = tmp_path / "mine.toml"
        profile.write_text(f'name = "mine"\nprotocol = "{CLIENT}"\nurl = "{url}"\n')
        runs = tmp_path / "runs"
        result = _duplexsim(
            env, "run", "--model", str(profile), "--benchmark", str(make_benchmark(n=2)),
            "--run-id", "p", "--runs-dir", str(runs), "--quiet", "--hangover", "0.5",
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        server.terminate()
        server.wait(timeout=10)
    score = _duplexsim(env, "score", str(runs / "p"), "--scorer", "example-loudness")
    assert score.returncode == 0, score.stderr
    assert "4 clips scored" in score.stdout and "example-loudness" in score.stdout
    listed = _duplexsim(env, "models", "list")
    assert "raw-pcm" in listed.stdout.splitlines()[-1]
    report = _duplexsim(env, "report", str(runs / "p"), "--out", str(tmp_path / "rep"))
    assert report.returncode == 0, report.stderr
    assert "example-loudness" in (tmp_path / "rep" / "leaderboard.json").read_text()
