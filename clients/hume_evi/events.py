"""Wire messages of Hume's EVI chat WebSocket (``/v0/evi/chat``): one JSON object per text frame,
told apart by ``type`` (the ``hume`` SDK's ``PublishEvent`` and ``SubscribeEvent`` unions).

Client to server: ``session_settings`` (here: the raw audio format, a system prompt, a voice)
and ``audio_input`` (base64 of raw PCM16 LE in that format, streamed continuously).
Server to client: ``chat_metadata`` first, then ``user_message`` (the user's turn as heard, with
Hume's prosody scores for it and its span in ms), ``assistant_message`` (reply text and its
scores), ``audio_output`` (``id``, ``index``, ``data``: base64 of a whole WAV file, 48 kHz),
``assistant_prosody`` (scores of the spoken reply), ``assistant_end``, ``user_interruption``
(``time``: Unix ms) and ``error`` (``code``, ``slug``, ``message``).

Parsing is strict about the fields duplexsim uses (a wrong type or bad base64 is a ProtocolError
naming it) and ignores the rest, and types it has no use for (tool calls, the echoed settings).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from duplexsim.core import safejson
from duplexsim.core.errors import ProtocolError
from duplexsim.core.intake import SCORE_NAMES

__all__ = [
    "EMOTIONS",
    "AssistantEnd",
    "AssistantMessage",
    "AssistantProsody",
    "AudioInput",
    "AudioOutput",
    "ChatMetadata",
    "ClientMessage",
    "Error",
    "ServerMessage",
    "SessionSettings",
    "Unknown",
    "UserInterruption",
    "UserMessage",
    "decode_client",
    "decode_server",
    "encode_client",
    "encode_server",
]

# The 48 names of Hume's prosody model, as EmotionScores spells them on the wire
EMOTIONS = (
    "Admiration", "Adoration", "Aesthetic Appreciation", "Amusement", "Anger", "Anxiety", "Awe",
    "Awkwardness", "Boredom", "Calmness", "Concentration", "Confusion", "Contemplation",
    "Contempt", "Contentment", "Craving", "Desire", "Determination", "Disappointment", "Disgust",
    "Distress", "Doubt", "Ecstasy", "Embarrassment", "Empathic Pain", "Entrancement", "Envy",
    "Excitement", "Fear", "Guilt", "Horror", "Interest", "Joy", "Love", "Nostalgia", "Pain",
    "Pride", "Realization", "Relief", "Romance", "Sadness", "Satisfaction", "Shame",
    "Surprise (negative)", "Surprise (positive)", "Sympathy", "Tiredness", "Triumph",
)  # fmt: skip

Scores = Mapping[str, float]


@dataclass(frozen=True)
class SessionSettings:
    sample_rate: int
    channels: int = 1
    system_prompt: str | None = None
    voice_id: str | None = None


@dataclass(frozen=True)
class AudioInput:
    pcm: bytes


ClientMessage = SessionSettings | AudioInput


@dataclass(frozen=True)
class ChatMetadata:
    chat_id: str
    chat_group_id: str
    request_id: str | None = None


@dataclass(frozen=True)
class UserMessage:
    content: str
    begin_ms: int
    end_ms: int
    interim: bool = False
    scores: Scores | None = field(default=None, compare=False)


@dataclass(frozen=True)
class AssistantMessage:
    content: str
    id: str | None = None
    scores: Scores | None = field(default=None, compare=False)


@dataclass(frozen=True)
class AssistantProsody:
    id: str | None
    scores: Scores | None = field(default=None, compare=False)


@dataclass(frozen=True)
class AudioOutput:
    id: str
    index: int
    wav: bytes  # one whole WAV file


@dataclass(frozen=True)
class AssistantEnd:
    pass


@dataclass(frozen=True)
class UserInterruption:
    time_ms: int  # Unix time


@dataclass(frozen=True)
class Error:
    code: str
    slug: str
    message: str


@dataclass(frozen=True)
class Unknown:
    type: str


ServerMessage = (
    ChatMetadata
    | UserMessage
    | AssistantMessage
    | AssistantProsody
    | AudioOutput
    | AssistantEnd
    | UserInterruption
    | Error
    | Unknown
)


def encode_client(msg: ClientMessage) -> str:
    match msg:
        case SessionSettings():
            body: dict[str, Any] = {
                "type": "session_settings",
                "audio": {
                    "encoding": "linear16",
                    "sample_rate": msg.sample_rate,
                    "channels": msg.channels,
                },
            }
            if msg.system_prompt is not None:
                body["system_prompt"] = msg.system_prompt
            if msg.voice_id is not None:
                body["voice_id"] = msg.voice_id
        case AudioInput(pcm=pcm):
            return '{"type":"audio_input","data":"' + base64.b64encode(pcm).decode() + '"}'
    return _dumps(body)


def decode_client(text: str | bytes) -> ClientMessage | Unknown:
    """A client message, for the fake server; Unknown for a type it does not act on."""
    obj = _object(text)
    kind = obj["type"]
    if kind == "audio_input":
        return AudioInput(_b64(_get(obj, "data", str)))
    if kind == "session_settings":
        audio = obj.get("audio")
        if audio is None:
            raise ProtocolError("session_settings without 'audio': raw PCM needs its format")
        if not isinstance(audio, dict) or audio.get("encoding", "linear16") != "linear16":
            raise ProtocolError("session_settings 'audio' must be linear16")
        return SessionSettings(
            _get(audio, "sample_rate", int),
            _get(audio, "channels", int),
            _opt(obj, "system_prompt", str),
            _opt(obj, "voice_id", str),
        )
    return Unknown(kind)


def encode_server(msg: ServerMessage) -> str:
    match msg:
        case ChatMetadata():
            body: dict[str, Any] = {"type": "chat_metadata", "chat_id": msg.chat_id,
                                    "chat_group_id": msg.chat_group_id,
                                    "request_id": msg.request_id}  # fmt: skip
        case UserMessage():
            body = {"type": "user_message", "message": {"role": "user", "content": msg.content},
                    "models": _models(msg.scores), "time": {"begin": msg.begin_ms,
                    "end": msg.end_ms}, "interim": msg.interim, "from_text": False}  # fmt: skip
        case AssistantMessage():
            body = {"type": "assistant_message", "id": msg.id, "from_text": False,
                    "is_quick_response": False, "models": _models(msg.scores),
                    "message": {"role": "assistant", "content": msg.content}}  # fmt: skip
        case AssistantProsody():
            body = {"type": "assistant_prosody", "id": msg.id, "models": _models(msg.scores)}
        case AudioOutput():
            body = {"type": "audio_output", "id": msg.id, "index": msg.index,
                    "data": base64.b64encode(msg.wav).decode()}  # fmt: skip
        case AssistantEnd():
            body = {"type": "assistant_end"}
        case UserInterruption():
            body = {"type": "user_interruption", "time": msg.time_ms}
        case Error():
            body = {"type": "error", "code": msg.code, "slug": msg.slug, "message": msg.message}
        case Unknown():
            body = {"type": msg.type}
    return _dumps(body)


def decode_server(text: str | bytes) -> ServerMessage:
    obj = _object(text)
    match obj["type"]:
        case "audio_output":
            return AudioOutput(
                _get(obj, "id", str), _get(obj, "index", int), _b64(_get(obj, "data", str))
            )
        case "assistant_end":
            return AssistantEnd()
        case "user_interruption":
            return UserInterruption(_get(obj, "time", int))
        case "user_message":
            span = _get(obj, "time", dict)
            return UserMessage(
                _content(obj),
                _get(span, "begin", int),
                _get(span, "end", int),
                _get(obj, "interim", bool),
                _scores(obj),
            )
        case "assistant_message":
            return AssistantMessage(_content(obj), _opt(obj, "id", str), _scores(obj))
        case "assistant_prosody":
            return AssistantProsody(_opt(obj, "id", str), _scores(obj))
        case "chat_metadata":
            return ChatMetadata(
                _get(obj, "chat_id", str),
                _get(obj, "chat_group_id", str),
                _opt(obj, "request_id", str),
            )
        case "error":
            return Error(_get(obj, "code", str), _get(obj, "slug", str), _get(obj, "message", str))
    return Unknown(obj["type"])


# --- helpers --------------------------------------------------------------------------------


def _dumps(body: dict[str, Any]) -> str:
    return json.dumps(body, separators=(",", ":"))


def _models(scores: Scores | None) -> dict[str, Any]:
    return {} if scores is None else {"prosody": {"scores": dict(scores)}}


def _object(text: str | bytes) -> dict[str, Any]:
    try:
        obj = safejson.loads(text)
    except safejson.JsonError:
        raise ProtocolError(f"message is not valid JSON: {_head(text)}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ProtocolError(f"message is not an object with a string 'type': {_head(text)}")
    return obj


def _head(text: str | bytes) -> str:
    return repr(text[:60])


def _get(obj: dict[str, Any], key: str, want: type) -> Any:
    value = obj.get(key)
    # bool is an int in Python, but not on this wire
    if not isinstance(value, want) or (want is int and isinstance(value, bool)):
        kind = obj.get("type", "message")
        raise ProtocolError(f"'{kind}' needs '{key}' as {want.__name__}, got {value!r:.40}")
    return value


def _opt(obj: dict[str, Any], key: str, want: type) -> Any:
    return None if obj.get(key) is None else _get(obj, key, want)


def _content(obj: dict[str, Any]) -> str:
    message = _get(obj, "message", dict)
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise ProtocolError(f"'{obj['type']}' message content is not a string")
    return content or ""


def _scores(obj: dict[str, Any]) -> Scores | None:
    """Hume's prosody scores (name -> 0..1) if the message carries them."""
    models = obj.get("models")
    prosody = models.get("prosody") if isinstance(models, dict) else None
    if prosody is None:
        return None
    scores = prosody.get("scores") if isinstance(prosody, dict) else None
    if not isinstance(scores, dict):
        raise ProtocolError(f"'{obj['type']}' prosody without a 'scores' object")
    if len(scores) > SCORE_NAMES:
        raise ProtocolError(
            f"'{obj['type']}' prosody with {len(scores)} score names "
            f"(more than {SCORE_NAMES}): a flood"
        )
    out: dict[str, float] = {}
    for name, value in scores.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            value = math.nan
        elif isinstance(value, int):
            value = float(value) if abs(value) < 2**1000 else math.inf  # float() would overflow
        if not math.isfinite(value):
            raise ProtocolError(f"prosody score '{name:.40}' is not a finite number")
        out[str(name)] = float(value)
    return out


def _b64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError("audio data is not valid base64") from None
