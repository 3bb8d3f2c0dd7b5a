"""Where the shipped demo benchmark is: ``recordings/demo`` in a checkout, or the copy that a
wheel installs under ``<prefix>/share/duplexsim/demo`` (pyproject's data-files)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from duplexsim.core.errors import ConfigError

__all__ = ["SHARE_DIR", "demo_benchmark", "demo_partner_benchmark", "demo_utterance"]

CHECKOUT_DEMO = Path(__file__).resolve().parents[2] / "recordings" / "demo"
SHARE_DIR = "share/duplexsim/demo"  # where pyproject's data-files put it, relative to the prefix
_MANIFEST = "manifest.jsonl"


def demo_benchmark() -> Path:
    """The demo benchmark's folder; ConfigError saying how to name another when none is found."""
    for folder in (CHECKOUT_DEMO, _installed()):
        if folder is not None and (folder / _MANIFEST).is_file():
            return folder
    raise ConfigError(
        "the demo benchmark is not installed with duplexsim (looked in "
        f"{CHECKOUT_DEMO} and the package's {SHARE_DIR}); pass --benchmark DIR"
    )


def demo_partner_benchmark() -> Path:
    """The demo's partner set: interruptions, backchannels and a conversation of three turns
    (``recordings/make_partner_demo.py``), a manifest beside the demo's."""
    return demo_benchmark() / "partner.jsonl"


def demo_utterance() -> Path:
    """The neutral clip that the fake "neutral" model plays."""
    return demo_benchmark() / "neutral.ogg"


def _installed() -> Path | None:
    """The data-files copy, located through the installed distribution's own file list (so it is
    found under any install scheme: a venv, ``--user``, ``--prefix``)."""
    try:
        files = metadata.distribution("duplexsim").files or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.as_posix().endswith(f"{SHARE_DIR}/{_MANIFEST}"):
            return Path(str(f.locate())).resolve().parent
    return None
