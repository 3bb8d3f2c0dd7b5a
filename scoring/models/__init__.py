"""Emotion models (scorers), registered by name; heavy imports happen only when one is loaded.

Besides the built-ins below: scorers that installed packages declare as entry points in the
``duplexsim.scorers`` group, and ``module:Class`` names (docs/extending.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.errors import ConfigError
from duplexsim.core.plugins import SCORERS_GROUP, is_object_name, load_object, plugin_names
from duplexsim.scoring.models.base import EmotionModel
from duplexsim.scoring.models.weights import installed_scorer

__all__ = [
    "EmotionModel",
    "check_precision",
    "is_known_scorer",
    "load_scorer",
    "scorer_names",
    "speaker_normaliser",
]

# name -> ("module:Class", fixed keyword arguments)
_SCORERS: dict[str, tuple[str, dict[str, Any]]] = {
    "prosody": ("duplexsim.scoring.models.prosody:ProsodyScorer", {}),
    "empathic-insight-voice-small": (
        "duplexsim.scoring.models.empathic_insight:EmpathicInsightVoice",
        {"size": "small"},
    ),
    "empathic-insight-voice-large": (
        "duplexsim.scoring.models.empathic_insight:EmpathicInsightVoice",
        {"size": "large"},
    ),
}


def scorer_names() -> list[str]:
    return sorted(plugin_names(SCORERS_GROUP) | {n: s for n, (s, _) in _SCORERS.items()})


def is_known_scorer(name: str) -> bool:
    """A built-in or installed scorer's name, or a ``module:Class`` name."""
    return is_object_name(name) or name in scorer_names()


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
    if model_path is None:
        model_path = installed_scorer(name)  # what `duplexsim scorer download` put in place
    if precision is not None:
        options["precision"] = precision
    fixed = _SCORERS[name][1] if name in _SCORERS else {}
    model: EmotionModel = cls(model_path=model_path, device=device, **fixed, **options)
    return model


def speaker_normaliser(
    name: str,
) -> Callable[[NDArray[np.float32], Sequence[str]], NDArray[np.float32]] | None:
    """The scorer's ``speaker_normalise``, or None when it has none or is not installed here
    (scores from a service whose scorer this machine cannot import are used as they came)."""
    try:
        cls = _scorer_class(name)
    except (ConfigError, ImportError):
        return None
    if "speaker_normalise" not in {
        k for c in cls.__mro__[:-1] if c is not EmotionModel for k in vars(c)
    }:
        return None
    return cls.speaker_normalise


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
    if name in _SCORERS:
        spec = _SCORERS[name][0]
    elif is_object_name(name):
        spec = name
    else:
        spec = plugin_names(SCORERS_GROUP).get(name, "")
    if not spec:
        raise ConfigError(
            f"unknown scorer '{name}' (known: {', '.join(scorer_names())}; "
            "or a 'module:Class' name)"
        )
    cls = load_object(spec, f"the {name} scorer")
    if not (isinstance(cls, type) and issubclass(cls, EmotionModel)):
        raise ConfigError(f"scorer '{name}': {spec} is not an EmotionModel subclass")
    return cls
