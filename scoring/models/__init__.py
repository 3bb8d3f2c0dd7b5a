"""Emotion models (scorers), registered by name; heavy imports happen only when one is loaded."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scoring.models.base import EmotionModel
from simulator.core.errors import ConfigError

__all__ = ["EmotionModel", "check_precision", "load_scorer", "scorer_names"]

# name -> ("module:Class", fixed keyword arguments)
_SCORERS: dict[str, tuple[str, dict[str, Any]]] = {
    "prosody": ("scoring.models.prosody:ProsodyScorer", {}),
    "empathic-insight-voice-small": (
        "scoring.models.empathic_insight:EmpathicInsightVoice",
        {"size": "small"},
    ),
    "empathic-insight-voice-large": (
        "scoring.models.empathic_insight:EmpathicInsightVoice",
        {"size": "large"},
    ),
}


def scorer_names() -> list[str]:
    return sorted(_SCORERS)


def load_scorer(
    name: str,
    *,
    model_path: Path | None = None,
    device: str = "cpu",
    precision: str | None = None,
    **options: Any,
) -> EmotionModel:
    """Build a scorer by name. ``model_path`` points at local weights where a scorer needs them;
    ``precision`` (None: the scorer's default) is refused by a scorer that declares none."""
    cls: Callable[..., EmotionModel] = _scorer_class(name)
    check_precision(name, precision)
    if precision is not None:
        options["precision"] = precision
    model: EmotionModel = cls(model_path=model_path, device=device, **_SCORERS[name][1], **options)
    return model


def check_precision(name: str, precision: str | None) -> None:
    """ConfigError unless scorer ``name`` can run at ``precision`` (None, its default, always can).

    Imports the scorer's module only when a precision is given."""
    if precision is None:
        return
    allowed = _scorer_class(name).precisions
    if not allowed:
        raise ConfigError(f"the {name} scorer has no precision option")
    if precision not in allowed:
        raise ConfigError(
            f"{name}: precision must be one of {', '.join(allowed)}, got {precision!r}"
        )


def _scorer_class(name: str) -> type[EmotionModel]:
    try:
        spec, _ = _SCORERS[name]
    except KeyError:
        raise ConfigError(f"unknown scorer '{name}' (known: {', '.join(scorer_names())})") from None
    module, _, attr = spec.partition(":")
    cls: type[EmotionModel] = getattr(importlib.import_module(module), attr)
    return cls
