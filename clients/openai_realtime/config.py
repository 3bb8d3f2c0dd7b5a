"""The client's options (a profile's ``options`` table) and the ``session.update`` they produce.

Options, all optional:

- ``turn_detection``: ``"server_vad"`` (default), ``"semantic_vad"``, ``"none"`` (manual turns:
  the client commits the buffer and asks for a response itself), or a table such as
  ``{ type = "server_vad", silence_duration_ms = 500 }`` sent as given.
- ``session_shape``: ``"openai"`` (default; GA: ``type: "realtime"``, voice and turn detection
  nested under ``audio``) or ``"xai"`` (xAI's Grok voice agent: ``voice`` and ``turn_detection``
  at the top of the session, no ``type``; only server_vad or none).
- ``sample_rate``: PCM rate both ways; OpenAI takes 24000 only, xAI 8000-48000.
- ``instructions``: the system prompt.
- ``session``: a table deep-merged last into the session object, for anything else.

Behaviour differences between servers are options, never checks on the model name or URL.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from simulator.core.errors import ConfigError

__all__ = ["OPENAI_RATE", "RealtimeOptions", "merge"]

OPENAI_RATE = 24000
XAI_RATES = (8000, 16000, 21050, 24000, 32000, 44100, 48000)  # pipecat services/xai/realtime
_SHAPES = ("openai", "xai")
_KNOWN = {"turn_detection", "session_shape", "sample_rate", "instructions", "session"}
_VAD_TYPES = {"openai": ("server_vad", "semantic_vad"), "xai": ("server_vad",)}


@dataclass(frozen=True)
class RealtimeOptions:
    voice: str | None = None
    turn_detection: Mapping[str, Any] | None = field(
        default_factory=lambda: {"type": "server_vad"}
    )  # None: manual turns
    session_shape: str = "openai"
    sample_rate: int = OPENAI_RATE
    instructions: str | None = None
    session_extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def manual(self) -> bool:
        return self.turn_detection is None

    @classmethod
    def from_options(cls, options: Mapping[str, Any], voice: str | None) -> RealtimeOptions:
        """Checked options; a typo or bad value is a ConfigError naming it."""
        unknown = sorted(set(options) - _KNOWN)
        if unknown:
            known = ", ".join(sorted(_KNOWN))
            raise ConfigError(f"openai-realtime: unknown option(s) {', '.join(unknown)} ({known})")
        shape = options.get("session_shape", "openai")
        if shape not in _SHAPES:
            raise ConfigError(f"openai-realtime: session_shape must be one of {_SHAPES}")
        rate = options.get("sample_rate", OPENAI_RATE)
        allowed = (OPENAI_RATE,) if shape == "openai" else XAI_RATES
        if isinstance(rate, bool) or rate not in allowed:
            raise ConfigError(
                f"openai-realtime: sample_rate {rate!r} not accepted with session_shape "
                f"'{shape}' (allowed: {', '.join(map(str, allowed))})"
            )
        instructions = options.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise ConfigError("openai-realtime: instructions must be a string")
        extra = options.get("session", {})
        if not isinstance(extra, Mapping):
            raise ConfigError("openai-realtime: option 'session' must be a table")
        return cls(
            voice=voice,
            turn_detection=_turn_detection(options.get("turn_detection", "server_vad"), shape),
            session_shape=shape,
            sample_rate=int(rate),
            instructions=instructions,
            session_extra=extra,
        )

    def session(self) -> dict[str, Any]:
        """The ``session`` object of the ``session.update`` this client sends."""
        fmt = {"type": "audio/pcm", "rate": self.sample_rate}
        td = None if self.turn_detection is None else dict(self.turn_detection)
        body: dict[str, Any]
        if self.session_shape == "openai":
            output: dict[str, Any] = {"format": dict(fmt)}
            if self.voice:
                output["voice"] = self.voice
            body = {
                "type": "realtime",
                "output_modalities": ["audio"],
                "audio": {"input": {"format": dict(fmt), "turn_detection": td}, "output": output},
            }
        else:
            body = {
                "turn_detection": td,
                "audio": {"input": {"format": dict(fmt)}, "output": {"format": dict(fmt)}},
            }
            if self.voice:
                body["voice"] = self.voice
        if self.instructions is not None:
            body["instructions"] = self.instructions
        return merge(body, self.session_extra)


def _turn_detection(value: Any, shape: str) -> Mapping[str, Any] | None:
    if value is None or value == "none":
        return None
    table = {"type": value} if isinstance(value, str) else value
    kinds = _VAD_TYPES[shape]
    if not isinstance(table, Mapping) or table.get("type") not in kinds:
        raise ConfigError(
            f"openai-realtime: turn_detection must be one of {', '.join(kinds)}, none, "
            f"or a table with one of those as 'type' (session_shape '{shape}'), not {value!r}"
        )
    return dict(table)


def merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` deep-merged in: tables merge, anything else replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
