"""`duplexsim scorer download` against a local stand-in for the Hugging Face Hub (no network), and
an installed scorer used without flags."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("huggingface_hub")

from duplexsim.core.emotions import HEAD_NAMES
from duplexsim.scoring.models.weights import installed_scorer
from tests.helpers.eiv import duplexsim, save_encoder, save_heads
from tests.helpers.hubstub import serve_hub
from tests.helpers.paths import REPO

NAME = "empathic-insight-voice-small"


@pytest.fixture(scope="module")
def hub_repos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hub")
    encoder = save_encoder(root / "encoder")
    (encoder / "README.md").write_text("model card: not needed to score")
    save_heads(root / "heads", [*HEAD_NAMES, "Valence"])
    return {"laion/BUD-E-Whisper": encoder, "laion/Empathic-Insight-Voice-Small": root / "heads"}


def _download(url: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), DUPLEXSIM_SCORERS=str(home))
    env |= {"HF_ENDPOINT": url, "HF_HOME": str(home / "hf"), "HF_HUB_DISABLE_XET": "1"}
    env.pop("HF_HUB_OFFLINE", None)
    return subprocess.run(
        [sys.executable, "-m", "duplexsim", "scorer", "download", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=REPO,
    )


def test_download_fills_the_folder_scoring_reads(hub_repos, tmp_path, monkeypatch):
    with serve_hub(hub_repos) as (url, log):
        result = _download(url, tmp_path / "scorers", NAME)
    assert result.returncode == 0, result.stderr
    folder = tmp_path / "scorers" / NAME
    assert f"weights in {folder} (used by `duplexsim score` without flags)" in result.stdout
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    heads = sorted(p.name for p in (folder / "heads").glob("*.pth"))
    assert heads == sorted(f"model_{h}_best.pth" for h in HEAD_NAMES)  # the 12, not every head
    assert not (folder / "README.md").exists()
    assert any("/resolve/" in line for line in log)
    monkeypatch.setenv("DUPLEXSIM_SCORERS", str(tmp_path / "scorers"))
    assert installed_scorer(NAME) == folder


def test_all_heads_and_another_folder(hub_repos, tmp_path):
    with serve_hub(hub_repos) as (url, _):
        result = _download(
            url, tmp_path / "home", NAME, "--dir", str(tmp_path / "x"), "--all-heads"
        )
    assert result.returncode == 0, result.stderr
    assert f"--model-path {tmp_path / 'x'}" in result.stdout
    assert (tmp_path / "x" / "heads" / "model_Valence_best.pth").is_file()


def test_download_failures_are_one_line(hub_repos, tmp_path):
    unknown = _download("http://127.0.0.1:9", tmp_path, "prosody")
    assert (
        unknown.returncode == 2 and "no weights to download for scorer 'prosody'" in unknown.stderr
    )
    with serve_hub({"laion/BUD-E-Whisper": hub_repos["laion/BUD-E-Whisper"]}) as (url, _):
        missing = _download(url, tmp_path, NAME)
    assert missing.returncode == 2, missing.stderr
    last = missing.stderr.strip().splitlines()[-1]  # after the hub library's progress bars
    assert last.startswith(
        f"duplexsim: error: {NAME}: could not download laion/Empathic-Insight-Voice-Small"
    )
    assert "Traceback" not in missing.stderr


def test_an_installed_scorer_is_used_without_flags(
    recorded_run, hub_repos, tmp_path, monkeypatch, capsys
):
    with serve_hub(hub_repos) as (url, _):
        assert _download(url, tmp_path / "scorers", NAME).returncode == 0
    monkeypatch.setenv("DUPLEXSIM_SCORERS", str(tmp_path / "scorers"))
    code, out, err = duplexsim(capsys, "score", recorded_run)
    assert code == 0, err
    assert "clips scored" in out and f"weights {tmp_path / 'scorers' / NAME}" in out
    code, out, err = duplexsim(capsys, "report", recorded_run, "--out", tmp_path / "rep")
    assert code == 0, err
    assert f"scorer {NAME} (weights sha256:" in out
    listed = duplexsim(capsys, "scorer", "list")[1]
    assert str(tmp_path / "scorers" / NAME) in listed


def _hf_cache_entry(cache: Path, repo: str, files: dict[str, bytes]) -> None:
    """A repository as huggingface_hub caches it: refs/main -> snapshots/<commit>/<file>."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text("c" * 40)
    for name, data in files.items():
        (folder / "snapshots" / ("c" * 40)).mkdir(parents=True, exist_ok=True)
        (folder / "snapshots" / ("c" * 40) / name).write_bytes(data)


def test_weights_in_the_hugging_face_cache_are_found_without_flags(tmp_path):
    from duplexsim.scoring.models.weights import in_hf_cache

    cache = tmp_path / "hub"
    assert not in_hf_cache(NAME, cache)
    _hf_cache_entry(cache, "laion/BUD-E-Whisper", {"config.json": b"{}"})
    assert not in_hf_cache(NAME, cache)  # the heads are missing
    _hf_cache_entry(cache, "laion/Empathic-Insight-Voice-Small", {"model_Amusement_best.pth": b""})
    assert in_hf_cache(NAME, cache) and not in_hf_cache("prosody", cache)


def test_auto_picks_the_neural_scorer_once_it_is_there(tmp_path, monkeypatch):
    from duplexsim.cli import build_parser, score_cmd

    args = build_parser().parse_args(["score", "r"])
    monkeypatch.setenv("DUPLEXSIM_SCORERS", str(tmp_path / "none"))
    monkeypatch.setattr("duplexsim.scoring.models.weights.in_hf_cache", lambda name: False)
    assert score_cmd.resolve_scorer_name(args) == "prosody"
    monkeypatch.setattr("duplexsim.scoring.models.weights.in_hf_cache", lambda name: name == NAME)
    assert score_cmd.resolve_scorer_name(args) == NAME
