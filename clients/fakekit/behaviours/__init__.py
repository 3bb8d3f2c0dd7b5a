"""Reference model behaviours: pure, protocol-independent, driven by media time only.

A fake server calls ``push`` with each input chunk it receives and sends the returned audio at once,
so the model's output for a media interval lands on the client's timeline at that same interval
(plus transport delay). Media time is "samples received / rate"; nothing here reads a clock.

Every behaviour tracks the user's turns with webrtcvad: speech starts after ``min_speech_ms`` of
voiced frames; the turn ends after ``hangover_s`` without speech. E, the turn's end, is the refined
end of its last voiced frame (``speech_bounds``), exact to the sample. A turn that ends while the
model is still replying gets no reply of its own; after a reply ends, the next turn does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from duplexsim.clients.fakekit.behaviours.base import Behaviour, Step, UserTurn
from duplexsim.clients.fakekit.behaviours.kinds import (
    BargeIn,
    DelayedEcho,
    Echo,
    Examiner,
    Neutral,
    Silent,
    StopOnOverlap,
    TalkThrough,
    synthetic_voice,
)
from duplexsim.core.errors import ConfigError

__all__ = [
    "BEHAVIOURS",
    "BargeIn",
    "Behaviour",
    "DelayedEcho",
    "Echo",
    "Examiner",
    "Neutral",
    "Silent",
    "Step",
    "StopOnOverlap",
    "TalkThrough",
    "UserTurn",
    "behaviour_factory",
    "make_behaviour",
    "synthetic_voice",
]

_KINDS: dict[str, type[Behaviour]] = {
    cls.name: cls
    for cls in (Echo, Silent, Neutral, DelayedEcho, BargeIn, TalkThrough, StopOnOverlap, Examiner)
}
BEHAVIOURS: tuple[str, ...] = tuple(_KINDS)


def make_behaviour(name: str, sample_rate: int, **params: Any) -> Behaviour:
    """A fresh behaviour; an unknown name or bad parameter is a ConfigError."""
    try:
        cls = _KINDS[name]
    except KeyError:
        raise ConfigError(f"unknown behaviour '{name}' (known: {', '.join(BEHAVIOURS)})") from None
    try:
        return cls(sample_rate, **params)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"behaviour '{name}': {exc}") from None


def behaviour_factory(name: str, **params: Any) -> Callable[[int], Behaviour]:
    """What a fake server takes: sample rate -> fresh behaviour. Checks name and params now."""
    make_behaviour(name, 16000, **params)
    return lambda rate: make_behaviour(name, rate, **params)
