"""Optional dependencies: which pip extra brings each one, and the one-line error when one is missing.

The base install streams, records and reports; Moshi's codec, plots, the neural scorers, WebRTC and
audio devices each come with an extra (``pip install 'duplexsim[scoring]'``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from duplexsim.core.errors import ConfigError

__all__ = ["EXTRA_OF", "MissingExtra", "missing_extra", "require"]

# top-level module -> the extra that installs it
EXTRA_OF: dict[str, str] = {
    "sphn": "moshi",
    "matplotlib": "plots",
    "torch": "scoring",
    "transformers": "scoring",
    "huggingface_hub": "scoring",
    "aiortc": "webrtc",
    "aioice": "webrtc",
    "av": "webrtc",
    "sounddevice": "audio-device",
    "h2": "nova-sonic",
}


class MissingExtra(ConfigError):
    """An optional dependency is not installed; the message names the extra that brings it."""

    def __init__(self, module: str, purpose: str) -> None:
        extra = EXTRA_OF.get(module, "all")
        super().__init__(
            f"{purpose} needs {module}, which is not installed: pip install 'duplexsim[{extra}]'"
        )
        self.module = module
        self.extra = extra


def missing_extra(exc: ImportError, purpose: str) -> MissingExtra | None:
    """The MissingExtra that ``exc`` means, or None when it is not an optional package missing
    (a broken install inside one is a different problem and keeps its own error)."""
    name = (getattr(exc, "name", None) or "").partition(".")[0]
    if isinstance(exc, ModuleNotFoundError) and name in EXTRA_OF:
        return MissingExtra(name, purpose)
    return None


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module``; MissingExtra naming the extra if it (or a package it needs) is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        error = missing_extra(exc, purpose)
        if error is None:
            raise
        raise error from None
