"""The openai-webrtc protocol without I/O: options, the ``oai-events`` data channel both ways.

The data channel carries the same JSON events as the Realtime WebSocket API, so the client side is
the OpenAI-family session core (``duplexsim.clients.openai_realtime.protocol``: handshake, events, errors)
with WebRTC's differences; audio travels on the RTP track instead of
``response.output_audio.delta``.

``ClientProtocol`` runs the handshake (``session.created`` -> ``session.update`` ->
``session.updated``) and maps events. Over WebRTC the server paces audio in real time, so
``response.done`` (generation finished) can come long before the audio has played; the reply's end
is ``output_audio_buffer.stopped`` (its buffer drained) or ``.cleared`` (cut off). A response that
never announced ``output_audio_buffer.started`` ends at ``response.done``.

The fake server's side is ``fake``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from duplexsim.clients.base import ClientEvent, EndOfTurn, UsageReport
from duplexsim.clients.openai_realtime import events as wire
from duplexsim.clients.openai_realtime import protocol as core
from duplexsim.clients.openai_realtime.config import merge
from duplexsim.clients.openai_realtime.dialects import OPENAI, Dialect
from duplexsim.core.errors import ConfigError

__all__ = ["ClientProtocol", "WebRTCOptions"]

_KNOWN = {
    "turn_detection",
    "instructions",
    "session",
    "sdp_format",
    "loopback_ice",
    "idle_fill_s",
    "continuous_output",
    "end_of_turn",
}
_VAD_TYPES = ("server_vad", "semantic_vad")


def _fail(text: str) -> ConfigError:
    return ConfigError(f"openai-webrtc: {text}")


@dataclass(frozen=True)
class WebRTCOptions:
    """A profile's ``options`` for openai-webrtc, checked.

    - ``turn_detection``: "server_vad" (default), "semantic_vad", "none" (manual turns: the client
      commits and asks for a response), or a table sent as given.
    - ``instructions``; ``session``: a table deep-merged last into the session object.
    - ``sdp_format``: "auto" (default: raw SDP with an ``ek_`` key, multipart otherwise), "sdp" or
      "multipart" (the form with ``sdp`` and ``session`` parts).
    - ``loopback_ice``: offer only 127.0.0.1 candidates (default: when the URL's host is loopback).
    - ``idle_fill_s``: silence frames once nothing was sent this long (default 0.5; null: never).
    - ``continuous_output``: the server streams audio all the time (default false).
    - ``end_of_turn``: "audio_stopped" (default) or "response_done".
    """

    voice: str | None = None
    model: str | None = None
    turn_detection: Mapping[str, Any] | None = field(default_factory=lambda: {"type": "server_vad"})
    instructions: str | None = None
    session_extra: Mapping[str, Any] = field(default_factory=dict)
    sdp_format: str = "auto"
    loopback_ice: bool | None = None
    idle_fill_s: float | None = 0.5
    continuous_output: bool = False
    end_of_turn: str = "audio_stopped"

    @property
    def manual(self) -> bool:
        return self.turn_detection is None

    @property
    def dialect(self) -> Dialect:
        return OPENAI  # OpenAI's GA events on the data channel

    @property
    def sample_rate(self) -> int | None:
        return None  # the codec is negotiated in the SDP

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], *, voice: str | None = None, model: str | None = None
    ) -> WebRTCOptions:
        unknown = sorted(set(options) - _KNOWN)
        if unknown:
            raise _fail(
                f"unknown option(s) {', '.join(unknown)} (known: {', '.join(sorted(_KNOWN))})"
            )
        o = dict(options)
        instructions = o.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise _fail("instructions must be a string")
        extra = o.get("session", {})
        if not isinstance(extra, Mapping):
            raise _fail("option 'session' must be a table")
        return cls(
            voice=voice,
            model=model,
            turn_detection=_turn_detection(o.get("turn_detection", "server_vad")),
            instructions=instructions,
            session_extra=extra,
            sdp_format=_choice(o, "sdp_format", ("auto", "sdp", "multipart")),
            loopback_ice=_flag(o, "loopback_ice", None),
            idle_fill_s=_seconds(o, "idle_fill_s", 0.5, allow_none=True),
            continuous_output=bool(_flag(o, "continuous_output", False)),
            end_of_turn=_choice(o, "end_of_turn", ("audio_stopped", "response_done")),
        )

    def session(self, *, with_model: bool = False) -> dict[str, Any]:
        """The session object: in ``session.update``, and (with the model) in the multipart form.
        No audio formats: over WebRTC the codec is negotiated in the SDP."""
        output: dict[str, Any] = {"voice": self.voice} if self.voice else {}
        body: dict[str, Any] = {
            "type": "realtime",
            "output_modalities": ["audio"],
            "audio": {"input": {"turn_detection": _copy(self.turn_detection)}, "output": output},
        }
        if with_model and self.model:
            body["model"] = self.model
        if self.instructions is not None:
            body["instructions"] = self.instructions
        return merge(body, self.session_extra)

    def multipart(self, api_key: str | None) -> bool:
        if self.sdp_format == "auto":
            return not (api_key or "").startswith("ek_")
        return self.sdp_format == "multipart"


def _copy(table: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if table is None else dict(table)


def _turn_detection(value: Any) -> Mapping[str, Any] | None:
    if value is None or value == "none":
        return None
    table = {"type": value} if isinstance(value, str) else value
    if not isinstance(table, Mapping) or table.get("type") not in _VAD_TYPES:
        raise _fail(
            f"turn_detection must be server_vad, semantic_vad, none or a table, not {value!r}"
        )
    return dict(table)


def _choice(o: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> str:
    value = o.get(name, allowed[0])
    if value not in allowed:
        raise _fail(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return str(value)


def _seconds(o: Mapping[str, Any], name: str, default: float, *, allow_none: bool = False) -> Any:
    value = o.get(name, default)
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise _fail(f"{name} must be a number of seconds >= 0, not {value!r}")
    return float(value)


def _flag(o: Mapping[str, Any], name: str, default: bool | None) -> bool | None:
    value = o.get(name, default)
    if value is not None and not isinstance(value, bool):
        raise _fail(f"{name} must be true or false, not {value!r}")
    return value


class ClientProtocol(core.ClientProtocol):
    """The OpenAI-family session core, with WebRTC's two differences: audio comes over RTP (any
    ``response.output_audio.delta`` on the channel is ignored), and the reply ends when its
    buffer drains (``output_audio_buffer.stopped`` / ``.cleared``) rather than at
    ``response.done``, unless ``end_of_turn`` says "response_done" or no buffer was announced."""

    options: WebRTCOptions

    def __init__(self, options: WebRTCOptions, *, secrets: Sequence[str] = ()) -> None:
        super().__init__(options, secrets=secrets)
        self._playing = False  # output_audio_buffer.started seen, not yet stopped

    def map(self, msg: wire.Message, arrival: float) -> list[ClientEvent]:
        by_response = self.options.end_of_turn == "response_done"
        match msg:
            case wire.AudioDelta():
                return []  # audio comes over RTP
            case wire.ResponseDone(status="failed"):
                self._playing = False
            case wire.ResponseDone(usage=usage):
                used = (
                    [] if usage is None else [UsageReport(usage, arrival, source="response.done")]
                )
                ended = [] if self._playing and not by_response else [EndOfTurn(arrival)]
                return [*used, *ended]
            case wire.Ignored(type="output_audio_buffer.started"):
                self._playing = True
                return []
            case wire.Ignored(type="output_audio_buffer.stopped" | "output_audio_buffer.cleared"):
                if self._playing:
                    self._playing = False
                    return [] if by_response else [EndOfTurn(arrival)]
                return []
        return super().map(msg, arrival)
