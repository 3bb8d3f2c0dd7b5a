"""The client's options (a profile's ``options`` table) and the ``session.update`` they produce,
in the dialect of the protocol chosen (``dialects``).

Options, all optional:

- ``turn_detection``: ``"server_vad"`` (default), another type the dialect offers
  (``"semantic_vad"``, ``"azure_semantic_vad"`` ...), ``"none"`` (manual turns: the client commits
  the buffer and asks for a response itself), or a table such as
  ``{ type = "server_vad", silence_duration_ms = 500 }`` sent as given.
- ``sample_rate``: input PCM rate, one the dialect takes (OpenAI and Azure: 24000 only).
- ``instructions``: the system prompt.
- ``session``: a table deep-merged last into the session object, for anything else.

Behaviour differences between servers are dialects and options, never checks on the model name
or URL.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from duplexsim.clients.openai_realtime.dialects import OPENAI, Dialect
from duplexsim.core.errors import ConfigError

__all__ = ["OPENAI_RATE", "RealtimeOptions", "merge"]

OPENAI_RATE = 24000
_KNOWN = {"turn_detection", "sample_rate", "instructions", "session"}


@dataclass(frozen=True)
class RealtimeOptions:
    voice: str | None = None
    turn_detection: Mapping[str, Any] | None = field(
        default_factory=lambda: {"type": "server_vad"}
    )  # None: manual turns
    dialect: Dialect = OPENAI
    sample_rate: int = OPENAI_RATE  # input
    instructions: str | None = None
    session_extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def manual(self) -> bool:
        return self.turn_detection is None

    @property
    def output_rate(self) -> int:
        return self.dialect.out_rate(self.sample_rate)

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], voice: str | None, dialect: Dialect = OPENAI
    ) -> RealtimeOptions:
        """Checked options; a typo or bad value is a ConfigError naming it."""
        where = dialect.protocol
        unknown = sorted(set(options) - _KNOWN)
        if unknown:
            known = ", ".join(sorted(_KNOWN))
            raise ConfigError(f"{where}: unknown option(s) {', '.join(unknown)} ({known})")
        rate = options.get("sample_rate", dialect.input_rates[0])
        if isinstance(rate, bool) or rate not in dialect.input_rates:
            allowed = ", ".join(map(str, dialect.input_rates))
            raise ConfigError(f"{where}: sample_rate {rate!r} not accepted (allowed: {allowed})")
        instructions = options.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise ConfigError(f"{where}: instructions must be a string")
        extra = options.get("session", {})
        if not isinstance(extra, Mapping):
            raise ConfigError(f"{where}: option 'session' must be a table")
        return cls(
            voice=voice,
            turn_detection=_turn_detection(options.get("turn_detection", "server_vad"), dialect),
            dialect=dialect,
            sample_rate=int(rate),
            instructions=instructions,
            session_extra=extra,
        )

    def session(self) -> dict[str, Any]:
        """The ``session`` object of the ``session.update`` this client sends."""
        td = None if self.turn_detection is None else dict(self.turn_detection)
        shape = self.dialect.shape
        body = (
            self._ga(td) if shape == "ga" else self._xai(td) if shape == "xai" else self._flat(td)
        )
        if self.instructions is not None:
            body["instructions"] = self.instructions
        return merge(body, self.session_extra)

    def _ga(self, td: dict[str, Any] | None) -> dict[str, Any]:
        fmt = {"type": "audio/pcm", "rate": self.sample_rate}
        output: dict[str, Any] = {"format": {"type": "audio/pcm", "rate": self.output_rate}}
        if self.voice:
            output["voice"] = self.voice
        return {
            "type": "realtime",
            "output_modalities": ["audio"],
            "audio": {"input": {"format": fmt, "turn_detection": td}, "output": output},
        }

    def _xai(self, td: dict[str, Any] | None) -> dict[str, Any]:
        fmt = {"type": "audio/pcm", "rate": self.sample_rate}
        body: dict[str, Any] = {
            "turn_detection": td,
            "audio": {"input": {"format": fmt}, "output": {"format": dict(fmt)}},
        }
        if self.voice:
            body["voice"] = self.voice
        return body

    def _flat(self, td: dict[str, Any] | None) -> dict[str, Any]:
        """The retired beta's flat session, as Voice Live and DashScope still take it."""
        d = self.dialect
        body: dict[str, Any] = {
            "modalities": list(d.modalities),
            "input_audio_format": d.formats[0],
            "output_audio_format": d.formats[1],
            "turn_detection": td,
        }
        if d.rate_field is not None:
            body[d.rate_field] = self.sample_rate
        if self.voice:
            body["voice"] = self.voice
        return body


def _turn_detection(value: Any, dialect: Dialect) -> Mapping[str, Any] | None:
    if value is None or value == "none":
        return None
    table = {"type": value} if isinstance(value, str) else value
    kinds = dialect.vad_types
    if not isinstance(table, Mapping) or table.get("type") not in kinds:
        raise ConfigError(
            f"{dialect.protocol}: turn_detection must be one of {', '.join(kinds)}, none, "
            f"or a table with one of those as 'type', not {value!r}"
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
