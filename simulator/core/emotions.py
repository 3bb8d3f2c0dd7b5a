"""The 12 MIRRORING emotions: canonical names, display names and Empathic-Insight-Voice head names.

Every other module takes the taxonomy from here; the order of ``EMOTIONS`` is the order of every
12-vector in the project.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "EMOTIONS",
    "EMOTION_NAMES",
    "HEAD_NAMES",
    "Emotion",
    "emotion_by_name",
    "emotion_index",
    "suggest_emotion",
]


@dataclass(frozen=True)
class Emotion:
    name: str  # canonical spelling, used in manifests and results
    display: str  # shown in reports
    head: str  # Empathic-Insight-Voice dimension / checkpoint head name


EMOTIONS: tuple[Emotion, ...] = (
    Emotion("Amusement", "Amusement", "Amusement"),
    Emotion("Anger", "Anger", "Anger"),
    Emotion("Elation", "Elation", "Elation"),
    Emotion("Impatience", "Impatience", "Impatience_and_Irritability"),
    Emotion("Surprise", "Surprise", "Astonishment_Surprise"),
    Emotion("Emotional Numbness", "Emotional Numbness", "Emotional_Numbness"),
    Emotion("Contemplation", "Contemplation", "Contemplation"),
    Emotion("Disappointment", "Disappointment", "Disappointment"),
    Emotion("Confusion", "Confusion", "Confusion"),
    Emotion("Pride", "Pride", "Pride"),
    Emotion("Affection", "Affection", "Affection"),
    Emotion("Sadness", "Sadness", "Sadness"),
)

EMOTION_NAMES: tuple[str, ...] = tuple(e.name for e in EMOTIONS)
HEAD_NAMES: tuple[str, ...] = tuple(e.head for e in EMOTIONS)

_BY_NAME = {e.name: e for e in EMOTIONS}
_INDEX = {e.name: i for i, e in enumerate(EMOTIONS)}


def _fold(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


_BY_FOLDED = {_fold(e.name): e for e in EMOTIONS} | {_fold(e.head): e for e in EMOTIONS}


def emotion_by_name(name: str) -> Emotion:
    """The emotion with this canonical name; KeyError for anything else (no silent aliasing)."""
    return _BY_NAME[name]


def emotion_index(name: str) -> int:
    """Position of a canonical emotion name in every 12-vector."""
    return _INDEX[name]


def suggest_emotion(name: str) -> str | None:
    """The canonical name a near-miss spelling (case, spaces, head name) most likely meant."""
    found = _BY_FOLDED.get(_fold(name))
    return found.name if found is not None else None
