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

``ServerProtocol`` is the fake server's side: it drives a reference behaviour with the audio the
track delivers, speaks the data channel and applies the media-time faults.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numpy.typing import NDArray

from duplexsim.clients.base import (
    ClientEvent,
    EndOfTurn,
)
from duplexsim.clients.fakekit import serveractions
from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.faults import Faults, MediaFaults
from duplexsim.clients.fakekit.serveractions import Stall
from duplexsim.clients.openai_realtime import events as wire
from duplexsim.clients.openai_realtime import protocol as core
from duplexsim.clients.openai_realtime.config import merge
from duplexsim.clients.openai_realtime.dialects import OPENAI, Dialect
from duplexsim.core import safejson
from duplexsim.core.errors import ConfigError

__all__ = [
    "Action",
    "ClientProtocol",
    "Close",
    "SendAudio",
    "SendEvent",
    "ServerProtocol",
    "Stall",
    "WebRTCOptions",
]

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


# --- the client side ----------------------------------------------------------------------------


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
            case wire.ResponseDone():
                return [] if self._playing and not by_response else [EndOfTurn(arrival)]
            case wire.Ignored(type="output_audio_buffer.started"):
                self._playing = True
                return []
            case wire.Ignored(type="output_audio_buffer.stopped" | "output_audio_buffer.cleared"):
                if self._playing:
                    self._playing = False
                    return [] if by_response else [EndOfTurn(arrival)]
                return []
        return super().map(msg, arrival)


# --- the fake server's side ---------------------------------------------------------------------


@dataclass(frozen=True)
class SendEvent:
    text: str


@dataclass(frozen=True)
class SendAudio:
    samples: NDArray[Any]  # at the behaviour's rate


@dataclass(frozen=True)
class Close:
    reason: str


Action = SendEvent | SendAudio | Close | Stall

_DEFAULT_SESSION: dict[str, Any] = {
    "type": "realtime",
    "object": "realtime.session",
    "model": "gpt-realtime",
    "output_modalities": ["audio"],
    "audio": {
        "input": {
            "turn_detection": {
                "type": "server_vad",
                "threshold": 0.5,
                "prefix_padding_ms": 300,
                "silence_duration_ms": 500,
                "create_response": True,
                "interrupt_response": True,
            }
        },
        "output": {"voice": "marin"},
    },
}


class ServerProtocol:
    """One call on the fake server. The behaviour decides turns and replies from the audio alone
    (whatever ``turn_detection`` says); faults trigger on input media time."""

    def __init__(
        self,
        behaviour_factory: Callable[[int], Behaviour],
        faults: Faults | None = None,
        *,
        rate: int = 48000,
        call_id: str = "rtc_test_1",
        session: Mapping[str, Any] | None = None,
    ) -> None:
        self.behaviour = behaviour_factory(rate)
        self._injected = MediaFaults(faults or Faults())
        self.call_id = call_id
        self.session = merge(_DEFAULT_SESSION, {"id": f"sess_{call_id}", **(session or {})})
        self._ids = itertools.count(1)
        self._responses = itertools.count(1)
        self._response_id: str | None = None
        self._item = 0
        self._received = 0  # input samples
        self._done = False

    def open(self) -> list[Action]:
        """The data channel opened."""
        return [self._event("session.created", session=self.session)]

    def receive_text(self, text: str) -> list[Action]:
        if self._done:
            return []
        try:
            obj = safejson.loads(text)
        except safejson.JsonError:
            return [self._error("invalid_request_error", "invalid_json", "not valid JSON")]
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            return [self._error("invalid_request_error", "invalid_event", "no string 'type'")]
        kind, event_id = obj["type"], obj.get("event_id")
        if kind == "session.update":
            return self._session_update(obj.get("session"), event_id)
        if kind == "input_audio_buffer.commit":
            return [self._event("input_audio_buffer.committed", item_id=self._item_id())]
        if kind == "input_audio_buffer.clear":
            return [self._event("input_audio_buffer.cleared")]
        if kind in ("response.create", "response.cancel", "output_audio_buffer.clear"):
            return []  # the behaviour decides replies from the audio
        return [
            self._error(
                "invalid_request_error", "unknown_event", f"unknown type {kind!r}", event_id
            )
        ]

    def _session_update(self, session: Any, event_id: Any) -> list[Action]:
        if not isinstance(session, dict) or session.get("type") != "realtime":
            return [
                self._error(
                    "invalid_request_error",
                    "missing_required_parameter",
                    "session.type must be 'realtime'",
                    event_id,
                )
            ]
        self.session = merge(self.session, session)
        return [self._event("session.updated", session=self.session)]

    def receive_audio(self, samples: NDArray[Any]) -> list[Action]:
        """One chunk of input at the behaviour's rate -> events and the output for that interval."""
        if self._done:
            return []
        self._received += samples.size
        received_s = self._received / self.behaviour.rate
        stop = self._injected.stop(received_s)
        self._done |= self._injected.finished
        return _on_call(stop) if stop else self._stream(samples) + self._malformed(received_s)

    def _stream(self, samples: NDArray[Any]) -> list[Action]:
        step = self.behaviour.push(samples)
        ms = round(1000 * self._received / self.behaviour.rate)
        out: list[Action] = []
        if step.speech_started:
            self._item += 1
            out.append(
                self._event(
                    "input_audio_buffer.speech_started", audio_start_ms=ms, item_id=self._item_id()
                )
            )
        if step.speech_stopped:
            item = self._item_id()
            out.append(
                self._event("input_audio_buffer.speech_stopped", audio_end_ms=ms, item_id=item)
            )
            out.append(self._event("input_audio_buffer.committed", item_id=item))
        if step.reply_started:
            self._response_id = f"resp_{next(self._responses)}"
            out.append(self._event("response.created", response=self._response("in_progress")))
            out.append(self._event("output_audio_buffer.started", response_id=self._response_id))
        out.append(SendAudio(step.audio))
        if step.reply_done:
            out.append(self._event("response.done", response=self._response("completed")))
            out.append(self._event("output_audio_buffer.stopped", response_id=self._response_id))
            self._response_id = None
        return out

    def _malformed(self, received_s: float) -> list[Action]:
        actions = self._injected.malformed(received_s, lambda: '{"type": "response.done"')
        self._done |= self._injected.finished  # (truncated JSON)
        return _on_call(actions)

    def _response(self, status: str) -> dict[str, Any]:
        return {"id": self._response_id, "object": "realtime.response", "status": status}

    def _item_id(self) -> str:
        return f"item_{self.call_id}_{self._item}"

    def _event(self, kind: str, **fields: Any) -> SendEvent:
        return SendEvent(
            wire.encode({"type": kind, "event_id": f"event_{next(self._ids)}", **fields})
        )

    def _error(self, kind: str, code: str, message: str, event_id: Any = None) -> SendEvent:
        error = {"type": kind, "code": code, "message": message, "event_id": event_id}
        return self._event("error", error=error)


def _on_call(actions: list[serveractions.Action]) -> list[Action]:
    """The shared fault injector's actions, as a call carries them out: a message goes on the
    data channel, a close hangs up."""
    out: list[Action] = []
    for action in serveractions.expand(actions):
        if isinstance(action, serveractions.Send):
            text = action.message
            out.append(SendEvent(text if isinstance(text, str) else text.decode()))
        elif isinstance(action, serveractions.Close):
            out.append(Close(action.reason))
        else:
            out.append(action)
    return out
