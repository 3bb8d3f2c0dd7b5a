"""Scorer weights on disk: where ``duplexsim scorer download`` puts them and where scoring finds them.

An installed Empathic-Insight-Voice scorer is one folder, the layout ``--model-path`` reads::

    <home>/<scorer-name>/
        config.json, preprocessor_config.json, model.safetensors   the BUD-E-Whisper encoder
        heads/model_<Name>_best.pth                                one file per head

``<home>`` is ``$DUPLEXSIM_SCORERS``, else ``~/.cache/duplexsim/scorers``. Only this module and the
download touch the Hugging Face Hub; scoring itself never fetches anything.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from duplexsim.core.emotions import HEAD_NAMES
from duplexsim.core.errors import ConfigError
from duplexsim.core.extras import require

__all__ = [
    "DOWNLOADABLE",
    "ENCODER_PATTERNS",
    "ENCODER_REPO",
    "HEADS_SUBDIR",
    "HEAD_REPOS",
    "download_scorer",
    "head_filename",
    "in_hf_cache",
    "installed_scorer",
    "installed_scorer_at",
    "scorer_home",
]

HOME_ENV = "DUPLEXSIM_SCORERS"
ENCODER_REPO = "laion/BUD-E-Whisper"
ENCODER_PATTERNS = ["*.json", "*.safetensors", "pytorch_model.bin"]
HEAD_REPOS = {
    "small": "laion/Empathic-Insight-Voice-Small",
    "large": "laion/Empathic-Insight-Voice-Large",
}
HEADS_SUBDIR = "heads"
# scorer name -> its heads' repository (the encoder is shared)
DOWNLOADABLE = {f"empathic-insight-voice-{size}": repo for size, repo in HEAD_REPOS.items()}

Fetch = Callable[..., Any]  # huggingface_hub.snapshot_download's signature


def scorer_home() -> Path:
    return Path(os.environ.get(HOME_ENV) or "~/.cache/duplexsim/scorers").expanduser()


def installed_scorer(name: str) -> Path | None:
    """The folder of an installed scorer's weights, or None."""
    return installed_scorer_at(scorer_home() / name)


def in_hf_cache(name: str, cache_dir: Path | None = None) -> bool:
    """Whether the Hugging Face cache holds a downloadable scorer's encoder and its first head
    (what the scorer loads without ``--model-path`` when nothing is installed)."""
    if name not in DOWNLOADABLE or importlib.util.find_spec("huggingface_hub") is None:
        return False
    from huggingface_hub import try_to_load_from_cache

    found = [
        try_to_load_from_cache(repo, file, cache_dir=cache_dir)
        for repo, file in (
            (ENCODER_REPO, "config.json"),
            (DOWNLOADABLE[name], head_filename(HEAD_NAMES[0])),
        )
    ]
    return all(isinstance(f, str) for f in found)


def head_filename(dimension: str) -> str:
    return f"model_{dimension}_best.pth"


def download_scorer(
    name: str, dest: Path | None = None, *, all_heads: bool = False, fetch: Fetch | None = None
) -> Path:
    """Fetch a scorer's encoder and its heads into ``dest`` (default: its folder under
    ``scorer_home()``) in the layout the loader reads; returns the folder. The heads are the 12
    MIRRORING emotions' (about 3.5 GB for the small ones), or every head with ``all_heads``."""
    if name not in DOWNLOADABLE:
        known = ", ".join(sorted(DOWNLOADABLE))
        raise ConfigError(f"no weights to download for scorer '{name}' (downloadable: {known})")
    if fetch is None:
        fetch = require("huggingface_hub", "duplexsim scorer download").snapshot_download
    folder = (dest or scorer_home() / name).expanduser()
    heads = ["*.pth"] if all_heads else [head_filename(h) for h in HEAD_NAMES]
    _fetch(fetch, name, ENCODER_REPO, ENCODER_PATTERNS, folder)
    _fetch(fetch, name, DOWNLOADABLE[name], heads, folder)
    _move_heads(folder)
    if installed_scorer_at(folder) is None:  # the hub library may hand back what was there
        raise ConfigError(
            f"{name}: could not download {DOWNLOADABLE[name]} and {ENCODER_REPO} whole: "
            f"{folder} lacks config.json or model_<Name>_best.pth files"
        )
    return folder


def _fetch(fetch: Fetch, name: str, repo: str, patterns: list[str], folder: Path) -> None:
    before = _files(folder)
    try:
        fetch(repo, local_dir=str(folder), allow_patterns=patterns)
    except Exception as exc:  # the hub's errors are many; each gets one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{name}: could not download {repo} ({first})") from None
    if not _files(folder) - before and not _has(folder, patterns):
        raise ConfigError(f"{name}: could not download {repo} (no file of it arrived)")


def _files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()} if folder.is_dir() else set()


def _has(folder: Path, patterns: list[str]) -> bool:
    """Whether ``folder`` already holds files ``patterns`` ask for (a download run again)."""
    return any(
        any(p.match(pattern) for pattern in patterns)
        for p in _files(folder)
        if ".cache" not in p.parts
    )


def installed_scorer_at(folder: Path) -> Path | None:
    """``folder`` if it holds an encoder and at least one head, else None."""
    heads = folder / HEADS_SUBDIR
    ok = (folder / "config.json").is_file() and any(heads.glob("model_*_best.pth"))
    return folder if ok else None


def _move_heads(folder: Path) -> None:
    """Heads into ``heads/``, wherever their repository keeps them."""
    heads = folder / HEADS_SUBDIR
    heads.mkdir(parents=True, exist_ok=True)
    for path in list(folder.rglob("model_*_best.pth")):
        if path.parent != heads:
            path.replace(heads / path.name)
