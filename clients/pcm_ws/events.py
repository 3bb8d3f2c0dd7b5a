"""Wire messages of pcm-ws, a minimal full-duplex PCM protocol over one WebSocket.

Text frames carry one JSON object with a ``type``; binary frames carry raw PCM16 little-endian mono
at the sample rate agreed in the hello. The client opens with ``hello`` and waits for
``hello_ack``; after that both sides stream audio, and the server adds control messages.

Parsing is strict: bad JSON, an unknown type, a missing field or a field of the wrong type is a
ProtocolError naming the problem. Unknown extra fields are ignored, so servers may add some.
Import this module as ``wire``: its message names mirror the client events in ``duplexsim.clients.base``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, get_type_hints

import numpy as np
from numpy.typing import NDArray

from duplexsim.core import safejson
from duplexsim.core.audio import float_to_pcm16, pcm16_to_float
from duplexsim.core.errors import ProtocolError

__all__ = [
    "ENCODING",
    "VERSION",
    "EndOfTurn",
    "Error",
    "Hello",
    "HelloAck",
    "Message",
    "ReplyStarted",
    "SpeechStarted",
    "SpeechStopped",
    "Transcript",
    "decode",
    "decode_audio",
    "encode",
    "encode_audio",
    "encode_audio_frames",
]

VERSION = 1
ENCODING = "pcm16le"


@dataclass(frozen=True)
class Hello:
    sample_rate: int
    frame_ms: int = 20
    version: int = VERSION
    encoding: str = ENCODING
    channels: int = 1


@dataclass(frozen=True)
class HelloAck:
    sample_rate: int
    session_id: str


@dataclass(frozen=True)
class SpeechStarted:
    pass


@dataclass(frozen=True)
class SpeechStopped:
    pass


@dataclass(frozen=True)
class ReplyStarted:
    pass


@dataclass(frozen=True)
class EndOfTurn:
    pass


@dataclass(frozen=True)
class Error:
    code: str
    message: str
    retryable: bool = False


@dataclass(frozen=True)
class Transcript:
    text: str
    final: bool = False


Message = (
    Hello | HelloAck | SpeechStarted | SpeechStopped | ReplyStarted | EndOfTurn | Error | Transcript
)

_TYPES: dict[str, type[Message]] = {
    "hello": Hello,
    "hello_ack": HelloAck,
    "speech_started": SpeechStarted,
    "speech_stopped": SpeechStopped,
    "reply_started": ReplyStarted,
    "end_of_turn": EndOfTurn,
    "error": Error,
    "transcript": Transcript,
}
_NAMES = {cls: name for name, cls in _TYPES.items()}


def encode(msg: Message) -> str:
    body = {"type": _NAMES[type(msg)], **dataclasses.asdict(msg)}
    return json.dumps(body, separators=(",", ":"))


def decode(text: str) -> Message:
    """One text frame -> its message; ProtocolError says what is wrong with it."""
    try:
        obj = safejson.loads(text)
    except safejson.JsonError as exc:
        raise ProtocolError(f"text frame is not valid JSON ({exc}): {text[:60]!r}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"text frame is JSON {type(obj).__name__}, not an object")
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise ProtocolError(f"message has no string 'type': {text[:60]!r}")
    cls = _TYPES.get(kind)
    if cls is None:
        raise ProtocolError(f"unknown message type '{kind}' (known: {', '.join(_TYPES)})")
    return cls(**_fields(kind, cls, obj))


def _fields(kind: str, cls: type[Message], obj: dict[str, Any]) -> dict[str, Any]:
    hints = get_type_hints(cls)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in obj:
            if f.default is dataclasses.MISSING:
                raise ProtocolError(f"'{kind}' message lacks field '{f.name}'")
            continue
        value, want = obj[f.name], hints[f.name]
        # bool is an int in Python, but not on this wire
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            got = type(value).__name__
            raise ProtocolError(f"'{kind}' field '{f.name}' must be {want.__name__}, got {got}")
        out[f.name] = value
    return out


def encode_audio(samples: NDArray[Any]) -> bytes:
    return float_to_pcm16(samples)


def encode_audio_frames(frames: NDArray[Any]) -> list[bytes]:
    """``encode_audio`` of each row, converted in one pass."""
    pcm = float_to_pcm16(frames)
    step = 2 * frames.shape[1] if frames.ndim == 2 else 0
    return [pcm[i : i + step] for i in range(0, len(pcm), step)] if step else []


def decode_audio(data: bytes) -> NDArray[np.float32]:
    if len(data) % 2:
        raise ProtocolError(f"binary frame of {len(data)} bytes: PCM16 needs an even length")
    return pcm16_to_float(data)
