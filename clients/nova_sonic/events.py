"""Nova Sonic's events on Bedrock's bidirectional stream (InvokeModelWithBidirectionalStream).

Each event is a JSON object ``{"event": {"<name>": {...}}}``. It travels base64-encoded as the
``bytes`` member of a ``chunk``: an event-stream message with headers ``:message-type: event``,
``:event-type: chunk``, ``:content-type: application/json`` and payload ``{"bytes": "..."}``.
The service reports errors in the stream as ``:message-type: exception`` messages whose
``:exception-type`` names one of the operation's exceptions, payload ``{"message": "..."}``.

Client events: sessionStart, promptStart, contentStart / textInput / audioInput / contentEnd,
promptEnd, sessionEnd. Server events: completionStart, contentStart (``role``, ``type``,
``additionalModelFields`` = a JSON string with ``generationStage`` SPECULATIVE or FINAL),
textOutput, audioOutput (base64 LPCM, 24 kHz by default), contentEnd (``stopReason`` END_TURN,
PARTIAL_TURN or INTERRUPTED), usageEvent, completionEnd. A barge-in is a textOutput whose
content is ``{ "interrupted" : true }``.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from duplexsim.clients.nova_sonic.eventstream import Message, encode_message
from duplexsim.core import safejson
from duplexsim.core.errors import ProtocolError
from duplexsim.core.usage import Usage

__all__ = [
    "AudioOutput",
    "CompletionEnd",
    "ContentEnd",
    "ContentStart",
    "Other",
    "ServerEvent",
    "StreamException",
    "TextOutput",
    "UsageEvent",
    "chunk",
    "chunk_raw",
    "decode_client_chunk",
    "decode_server",
    "event",
    "exception_message",
]

JSON_HEADERS = {
    ":message-type": "event",
    ":event-type": "chunk",
    ":content-type": "application/json",
}
INTERRUPTED = '{ "interrupted" : true }'


def event(name: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"event": {name: body}}


def chunk(obj: dict[str, Any]) -> bytes:
    """One event as the encoded ``chunk`` message carrying it."""
    return chunk_raw(json.dumps(obj, separators=(",", ":")).encode())


def chunk_raw(raw: bytes) -> bytes:
    """The chunk message of an event already serialized as JSON."""
    return encode_message(JSON_HEADERS, b'{"bytes":"' + base64.b64encode(raw) + b'"}')


def exception_message(kind: str, message: str) -> bytes:
    headers = {":message-type": "exception", ":exception-type": kind,
               ":content-type": "application/json"}  # fmt: skip
    return encode_message(headers, json.dumps({"message": message}).encode())


# --- what the server sends ---------------------------------------------------------------


@dataclass(frozen=True)
class ContentStart:
    content_id: str
    type: str  # TEXT | AUDIO | TOOL
    role: str  # USER | ASSISTANT | TOOL | SYSTEM
    stage: str | None  # generationStage: SPECULATIVE | FINAL


@dataclass(frozen=True)
class TextOutput:
    content_id: str
    role: str
    content: str


@dataclass(frozen=True)
class AudioOutput:
    content_id: str
    pcm: bytes


@dataclass(frozen=True)
class ContentEnd:
    content_id: str
    type: str
    stop_reason: str


@dataclass(frozen=True)
class CompletionEnd:
    stop_reason: str


@dataclass(frozen=True)
class StreamException:
    kind: str
    message: str


@dataclass(frozen=True)
class UsageEvent:
    """The session's running token totals (``details.total``: speech and text, in and out);
    AWS's output-events guide: sent throughout the response, with the delta since the last."""

    usage: Usage


@dataclass(frozen=True)
class Other:
    """An event or message this client has no use for (completionStart, ...)."""

    name: str


ServerEvent = (
    ContentStart
    | TextOutput
    | AudioOutput
    | ContentEnd
    | CompletionEnd
    | StreamException
    | UsageEvent
    | Other
)


def decode_server(msg: Message) -> ServerEvent:
    """One message of the response stream; ProtocolError if it is not what the API sends."""
    kind = msg.headers.get(":message-type")
    if kind == "exception":
        return StreamException(
            str(msg.headers.get(":exception-type", "")), _message_of(msg.payload)
        )
    if kind == "error":
        code, text = msg.headers.get(":error-code", ""), msg.headers.get(":error-message", "")
        return StreamException(str(code), str(text))
    if kind != "event":
        raise ProtocolError(f"event-stream message of type {kind!r}")
    if msg.headers.get(":event-type") != "chunk":
        return Other(str(msg.headers.get(":event-type")))
    name, body = _unwrap(msg.payload)
    return _server_event(name, body)


def decode_client_chunk(msg: Message) -> tuple[str, dict[str, Any]]:
    """A client's chunk message as (event name, body), for the fake server."""
    if msg.headers.get(":message-type") != "event" or msg.headers.get(":event-type") != "chunk":
        raise ProtocolError("expected a chunk event")
    return _unwrap(msg.payload)


def _unwrap(payload: bytes) -> tuple[str, dict[str, Any]]:
    outer = _json(payload, "chunk payload")
    data = outer.get("bytes") if isinstance(outer, dict) else None
    if not isinstance(data, str):
        raise ProtocolError("chunk payload without its 'bytes' string")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError("chunk 'bytes' is not valid base64") from None
    obj = _json(raw, "event")
    inner = obj.get("event") if isinstance(obj, dict) else None
    if not isinstance(inner, dict) or len(inner) != 1:
        raise ProtocolError('event is not {"event": {<name>: {...}}}')
    ((name, body),) = inner.items()
    if not isinstance(body, dict):
        raise ProtocolError(f"event '{name}' body is not an object")
    return name, body


def _server_event(name: str, body: dict[str, Any]) -> ServerEvent:
    match name:
        case "audioOutput":
            return AudioOutput(_str(body, "contentId"), _b64(_str(body, "content")))
        case "textOutput":
            return TextOutput(_str(body, "contentId"), _str(body, "role"), _str(body, "content"))
        case "contentStart":
            return ContentStart(
                _str(body, "contentId"), _str(body, "type"), _str(body, "role"), _stage(body)
            )
        case "contentEnd":
            return ContentEnd(_str(body, "contentId"), _str(body, "type"), _str(body, "stopReason"))
        case "completionEnd":
            return CompletionEnd(_str(body, "stopReason"))
        case "usageEvent":
            return UsageEvent(_usage(body))
    return Other(name)


def _usage(body: dict[str, Any]) -> Usage:
    """``details.total`` by direction and kind; with no details, the totals count as speech."""
    details = body.get("details")
    total = details.get("total") if isinstance(details, dict) else None
    if not isinstance(total, dict):
        return Usage(
            input_audio_tokens=_count(body, "totalInputTokens"),
            output_audio_tokens=_count(body, "totalOutputTokens"),
        )
    into, out = (_table(total.get("input")), _table(total.get("output")))
    return Usage(
        input_audio_tokens=_count(into, "speechTokens"),
        input_text_tokens=_count(into, "textTokens"),
        output_audio_tokens=_count(out, "speechTokens"),
        output_text_tokens=_count(out, "textTokens"),
    )


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(body: dict[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ProtocolError(f"usageEvent needs '{key}' as a count, got {value!r:.40}")
    return value


def _stage(body: dict[str, Any]) -> str | None:
    extra = body.get("additionalModelFields")
    if extra is None:
        return None
    fields = _json(extra.encode() if isinstance(extra, str) else b"", "additionalModelFields")
    stage = fields.get("generationStage") if isinstance(fields, dict) else None
    return stage if isinstance(stage, str) else None


def _str(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise ProtocolError(f"event needs '{key}' as a string, got {value!r:.40}")
    return value


def _json(raw: bytes, what: str) -> Any:
    try:
        return safejson.loads(raw)
    except safejson.JsonError:
        raise ProtocolError(f"{what} is not valid JSON: {raw[:60]!r}") from None


def _b64(text: str) -> bytes:
    try:
        pcm = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError("audioOutput content is not valid base64") from None
    if len(pcm) % 2:
        raise ProtocolError(f"audioOutput of {len(pcm)} bytes: 16-bit PCM needs an even length")
    return pcm


def _message_of(payload: bytes) -> str:
    try:
        obj = safejson.loads(payload) if payload else {}
    except safejson.JsonError:
        return payload[:200].decode("utf-8", "replace")
    message = obj.get("message", obj.get("Message", "")) if isinstance(obj, dict) else ""
    return str(message)
