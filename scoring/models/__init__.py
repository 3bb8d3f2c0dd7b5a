"""Emotion models (scorers), registered by name; heavy imports happen only when one is loaded."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from scoring.models.base import EmotionModel
from simulator.core.errors import ConfigError

__all__ = ["EmotionModel", "load_scorer", "scorer_names"]

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
    name: str, *, model_path: Path | None = None, device: str = "cpu", **options: Any
) -> EmotionModel:
    """Build a scorer by name. ``model_path`` points at local weights where a scorer needs them."""
    try:
        spec, fixed = _SCORERS[name]
    except KeyError:
        raise ConfigError(f"unknown scorer '{name}' (known: {', '.join(scorer_names())})") from None
    module, _, attr = spec.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    model: EmotionModel = cls(model_path=model_path, device=device, **fixed, **options)
    return model
