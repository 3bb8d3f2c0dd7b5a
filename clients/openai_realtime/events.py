"""Wire messages of the OpenAI Realtime API (GA), as far as a speech-to-speech session needs them.

Every message is one JSON object in a text frame with a ``type``. Audio travels base64-encoded
inside JSON: PCM16 little-endian mono, 24 kHz for ``audio/pcm`` (the only PCM rate OpenAI takes).

Server events: the GA names of ``openai-python`` ``src/openai/types/realtime/*.py`` (union in
``realtime_server_event.py``). The retired beta names (``types/beta/realtime/*.py``) are accepted
as aliases, since OpenAI-compatible servers may still send them; the client only ever sends GA.

Parsing is strict about what the client uses (bad JSON, a missing or mistyped field of an event it
acts on, audio that is not base64 PCM16) and lenient about the rest: the API grows new event types,
so an unknown type decodes to ``Unknown`` rather than failing the session. Import this module as
``wire``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.core import safejson
from duplexsim.core.audio import float_to_pcm16, pcm16_to_float
from duplexsim.core.errors import ProtocolError
from duplexsim.core.usage import Usage

__all__ = [
    "BETA_ALIASES",
    "AudioDelta",
    "ConversationCreated",
    "Error",
    "Ignored",
    "Message",
    "Ping",
    "RateLimit",
    "RateLimitsUpdated",
    "ResponseCreated",
    "ResponseDone",
    "SessionCreated",
    "SessionUpdated",
    "SpeechStarted",
    "SpeechStopped",
    "TranscriptDelta",
    "TranscriptDone",
    "Unknown",
    "audio_append",
    "b64_audio",
    "commit",
    "decode",
    "decode_audio",
    "encode",
    "pcm_samples",
    "response_create",
    "session_update",
]

# beta name -> GA name (openai-python types/beta/realtime vs types/realtime)
BETA_ALIASES: dict[str, str] = {
    "response.audio.delta": "response.output_audio.delta",
    "response.audio.done": "response.output_audio.done",
    "response.audio_transcript.delta": "response.output_audio_transcript.delta",
    "response.audio_transcript.done": "response.output_audio_transcript.done",
    "response.text.delta": "response.output_text.delta",
    "response.text.done": "response.output_text.done",
    "conversation.item.created": "conversation.item.added",
}

# GA server events this client has no use for (all in realtime_server_event.py), plus xAI's ping
_IGNORED = frozenset(
    {
        "conversation.item.added",
        "conversation.item.done",
        "conversation.item.deleted",
        "conversation.item.retrieved",
        "conversation.item.truncated",
        "conversation.item.input_audio_transcription.completed",
        "conversation.item.input_audio_transcription.delta",
        "conversation.item.input_audio_transcription.failed",
        "conversation.item.input_audio_transcription.segment",
        "input_audio_buffer.cleared",
        "input_audio_buffer.committed",
        "input_audio_buffer.dtmf_event_received",
        "input_audio_buffer.timeout_triggered",
        "output_audio_buffer.started",
        "output_audio_buffer.stopped",
        "output_audio_buffer.cleared",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_audio.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.mcp_call.failed",
        "mcp_list_tools.in_progress",
        "mcp_list_tools.completed",
        "mcp_list_tools.failed",
    }
)


@dataclass(frozen=True)
class SessionCreated:
    session: dict[str, Any]


@dataclass(frozen=True)
class SessionUpdated:
    session: dict[str, Any]


@dataclass(frozen=True)
class ConversationCreated:
    """xAI's first event (OpenAI opens with ``session.created``)."""


@dataclass(frozen=True)
class SpeechStarted:
    audio_start_ms: int | None = None  # from the start of all audio written; OpenAI only
    item_id: str | None = None


@dataclass(frozen=True)
class SpeechStopped:
    audio_end_ms: int | None = None
    item_id: str | None = None


@dataclass(frozen=True)
class AudioDelta:
    pcm: bytes  # decoded PCM16 little-endian
    response_id: str | None = None


@dataclass(frozen=True)
class TranscriptDelta:
    delta: str


@dataclass(frozen=True)
class TranscriptDone:
    transcript: str


@dataclass(frozen=True)
class ResponseCreated:
    response_id: str | None = None


@dataclass(frozen=True)
class ResponseDone:
    status: str  # completed | cancelled | failed | incomplete | in_progress
    response_id: str | None = None
    status_details: dict[str, Any] | None = None
    usage: Usage | None = None  # what the response used (realtime_response_usage.py)


@dataclass(frozen=True)
class Error:
    message: str
    type: str = ""
    code: str | None = None
    param: str | None = None
    event_id: str | None = None  # the client event that caused it


@dataclass(frozen=True)
class RateLimit:
    name: str | None
    limit: int | None
    remaining: int | None
    reset_seconds: float | None


@dataclass(frozen=True)
class RateLimitsUpdated:
    rate_limits: tuple[RateLimit, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Ping:
    pass


@dataclass(frozen=True)
class Ignored:
    type: str


@dataclass(frozen=True)
class Unknown:
    type: str


Message = (
    SessionCreated
    | SessionUpdated
    | ConversationCreated
    | SpeechStarted
    | SpeechStopped
    | AudioDelta
    | TranscriptDelta
    | TranscriptDone
    | ResponseCreated
    | ResponseDone
    | Error
    | RateLimitsUpdated
    | Ping
    | Ignored
    | Unknown
)


def decode(text: str) -> Message:
    """One server text frame -> its message; ProtocolError says what is wrong with it."""
    obj = _object(text)
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise ProtocolError(f"event has no string 'type': {text[:60]!r}")
    kind = BETA_ALIASES.get(kind, kind)
    parse = _PARSERS.get(kind)
    if parse is not None:
        return parse(_Fields(kind, obj))
    return Ignored(kind) if kind in _IGNORED else Unknown(kind)


def _object(text: str) -> dict[str, Any]:
    try:
        obj = safejson.loads(text)
    except safejson.JsonError as exc:
        raise ProtocolError(f"text frame is not valid JSON ({exc}): {text[:60]!r}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"text frame is JSON {type(obj).__name__}, not an object")
    return obj


class _Fields:
    """Typed access to one event's fields; a wrong type is a ProtocolError naming the field."""

    def __init__(self, kind: str, obj: dict[str, Any]) -> None:
        self.kind = kind
        self.obj = obj

    def get(self, name: str, want: type | tuple[type, ...], *, required: bool = False) -> Any:
        if name not in self.obj or self.obj[name] is None:
            if required:
                raise ProtocolError(f"'{self.kind}' event lacks field '{name}'")
            return None
        value = self.obj[name]
        wants = want if isinstance(want, tuple) else (want,)
        if not isinstance(value, wants) or (isinstance(value, bool) and bool not in wants):
            names = " or ".join(w.__name__ for w in wants)
            got = type(value).__name__
            raise ProtocolError(f"'{self.kind}' field '{name}' must be {names}, got {got}")
        return value

    def nested(self, name: str, *, required: bool = False) -> _Fields:
        return _Fields(f"{self.kind}.{name}", self.get(name, dict, required=required) or {})


def _response_done(f: _Fields) -> ResponseDone:
    response = f.nested("response", required=True)
    # xAI repeats the usage at the top of the event; the response's own comes first
    usage = response.get("usage", dict) or f.get("usage", dict)
    return ResponseDone(
        status=response.get("status", str) or "completed",
        response_id=response.get("id", str),
        status_details=response.get("status_details", dict),
        usage=None if usage is None else _usage(_Fields(f"{f.kind}.usage", usage)),
    )


def _usage(u: _Fields) -> Usage:
    """A response's usage: tokens by modality, cached input as the part of it served from
    cache. DashScope's spelling (``input_tokens_details``) is read too. A report with totals
    and no breakdown counts as audio: the input and the reply of a speech session are audio."""
    total_in, total_out = u.get("input_tokens", int), u.get("output_tokens", int)
    details_in = u.nested("input_token_details") if "input_token_details" in u.obj else None
    if details_in is None and "input_tokens_details" in u.obj:
        details_in = u.nested("input_tokens_details")
    details_out = u.nested("output_token_details") if "output_token_details" in u.obj else None
    if details_out is None and "output_tokens_details" in u.obj:
        details_out = u.nested("output_tokens_details")
    cached_audio = cached_text = None
    if details_in is not None:
        if "cached_tokens_details" in details_in.obj:
            cached = details_in.nested("cached_tokens_details")
            cached_audio, cached_text = (
                cached.get("audio_tokens", int),
                cached.get("text_tokens", int),
            )
        else:
            cached_audio = details_in.get("cached_tokens", int)
    return Usage(
        input_audio_tokens=total_in if details_in is None else details_in.get("audio_tokens", int),
        input_text_tokens=None if details_in is None else details_in.get("text_tokens", int),
        cached_audio_tokens=cached_audio,
        cached_text_tokens=cached_text,
        output_audio_tokens=(
            total_out if details_out is None else details_out.get("audio_tokens", int)
        ),
        output_text_tokens=None if details_out is None else details_out.get("text_tokens", int),
    )


def _error(f: _Fields) -> Error:
    e = f.nested("error", required=True)
    return Error(
        message=e.get("message", str) or "",
        type=e.get("type", str) or "",
        code=e.get("code", str),
        param=e.get("param", str),
        event_id=e.get("event_id", str),
    )


def _rate_limits(f: _Fields) -> RateLimitsUpdated:
    limits = []
    for i, item in enumerate(f.get("rate_limits", list) or []):
        if not isinstance(item, dict):
            raise ProtocolError(f"'{f.kind}' rate_limits[{i}] must be an object")
        r = _Fields(f"{f.kind}.rate_limits[{i}]", item)
        limits.append(
            RateLimit(
                r.get("name", str),
                r.get("limit", int),
                r.get("remaining", int),
                r.get("reset_seconds", (int, float)),
            )
        )
    return RateLimitsUpdated(tuple(limits))


_PARSERS: dict[str, Callable[[_Fields], Message]] = {
    "session.created": lambda f: SessionCreated(f.get("session", dict, required=True)),
    "session.updated": lambda f: SessionUpdated(f.get("session", dict, required=True)),
    "conversation.created": lambda f: ConversationCreated(),
    "input_audio_buffer.speech_started": lambda f: SpeechStarted(
        f.get("audio_start_ms", int), f.get("item_id", str)
    ),
    "input_audio_buffer.speech_stopped": lambda f: SpeechStopped(
        f.get("audio_end_ms", int), f.get("item_id", str)
    ),
    "response.output_audio.delta": lambda f: AudioDelta(
        decode_audio(f.get("delta", str, required=True)), f.get("response_id", str)
    ),
    "response.output_audio_transcript.delta": lambda f: TranscriptDelta(
        f.get("delta", str, required=True)
    ),
    "response.output_audio_transcript.done": lambda f: TranscriptDone(
        f.get("transcript", str) or ""
    ),
    "response.created": lambda f: ResponseCreated(f.nested("response").get("id", str)),
    "response.done": _response_done,
    "error": _error,
    "rate_limits.updated": _rate_limits,
    "ping": lambda f: Ping(),
}


def decode_audio(data: str) -> bytes:
    """Base64 text -> PCM16 bytes, checked."""
    try:
        pcm = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError(f"audio delta is not valid base64: {data[:24]!r}") from None
    if len(pcm) % 2:
        raise ProtocolError(f"audio delta of {len(pcm)} bytes: PCM16 needs an even length")
    return pcm


def b64_audio(samples: NDArray[Any]) -> str:
    return base64.b64encode(float_to_pcm16(samples)).decode("ascii")


def pcm_samples(pcm: bytes) -> NDArray[np.float32]:
    return pcm16_to_float(pcm)


# --- client events (what this client sends) -------------------------------------------------


def encode(body: dict[str, Any]) -> str:
    return json.dumps(body, separators=(",", ":"))


def session_update(session: dict[str, Any], event_id: str | None = None) -> str:
    return encode(_with_id({"type": "session.update", "session": session}, event_id))


def audio_append(samples: NDArray[Any]) -> str:
    # no event_id: appends are never acknowledged, and 50 a second add up
    return encode({"type": "input_audio_buffer.append", "audio": b64_audio(samples)})


def commit(event_id: str | None = None) -> str:
    return encode(_with_id({"type": "input_audio_buffer.commit"}, event_id))


def response_create(event_id: str | None = None) -> str:
    return encode(_with_id({"type": "response.create"}, event_id))


def _with_id(body: dict[str, Any], event_id: str | None) -> dict[str, Any]:
    return body if event_id is None else {"event_id": event_id, **body}
