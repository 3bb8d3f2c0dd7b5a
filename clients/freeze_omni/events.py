"""Freeze-Omni's demo-server events (VITA-MLLM/Freeze-Omni ``bin/server.py``), typed.

Client to server (Socket.IO events): ``recording-started`` (a new conversation: the server resets
and answers ``stop_tts``), ``recording-stopped``, ``prompt_text`` (a system prompt; answered by
``prompt_success``) and ``audio``, whose one argument is a JSON *string* ``{"audio": [byte, ...],
"sample_rate": 16000}``: the PCM16 little-endian bytes as a list of numbers (the server does
``json.loads`` then ``bytes(data['audio'])``; the web demo and Full-Duplex-Bench's client send it
so). The server treats the audio as 16 kHz whatever ``sample_rate`` says.

Server to client: ``audio`` with one binary argument (PCM16 at 24 kHz, one decoded speech segment
per message), ``stop_tts`` (drop the reply audio not yet played: the model stopped talking),
``too_many_users`` (the server is at ``--max_users``; it keeps the socket but serves nothing),
``out_time`` (the per-user timeout expired) and ``prompt_success``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from duplexsim.clients.freeze_omni import sio
from duplexsim.core import safejson
from duplexsim.core.errors import ProtocolError

__all__ = [
    "INPUT_RATE",
    "OUTPUT_RATE",
    "AudioIn",
    "ClientMessage",
    "ModelAudio",
    "OutTime",
    "PromptSuccess",
    "PromptText",
    "RecordingStarted",
    "RecordingStopped",
    "ServerMessage",
    "StopTts",
    "TooManyUsers",
    "Unknown",
    "audio_frame",
    "client_message",
    "encode_client",
    "encode_server",
    "server_message",
]

INPUT_RATE = 16000
OUTPUT_RATE = 24000
_DECIMAL = tuple(str(i) for i in range(256))


@dataclass(frozen=True)
class RecordingStarted:
    pass


@dataclass(frozen=True)
class RecordingStopped:
    pass


@dataclass(frozen=True)
class PromptText:
    text: str


@dataclass(frozen=True)
class AudioIn:
    pcm: bytes  # PCM16 little-endian mono
    sample_rate: int = INPUT_RATE


ClientMessage = RecordingStarted | RecordingStopped | PromptText | AudioIn


@dataclass(frozen=True)
class ModelAudio:
    pcm: bytes  # PCM16 little-endian mono at OUTPUT_RATE


@dataclass(frozen=True)
class StopTts:
    pass


@dataclass(frozen=True)
class TooManyUsers:
    pass


@dataclass(frozen=True)
class OutTime:
    pass


@dataclass(frozen=True)
class PromptSuccess:
    pass


@dataclass(frozen=True)
class Unknown:
    """An event this client has no use for (a server may add some)."""

    name: str


ServerMessage = ModelAudio | StopTts | TooManyUsers | OutTime | PromptSuccess | Unknown

_SIGNALS: dict[str, ServerMessage] = {
    "stop_tts": StopTts(),
    "too_many_users": TooManyUsers(),
    "out_time": OutTime(),
    "prompt_success": PromptSuccess(),
}


def audio_frame(pcm: bytes, sample_rate: int = INPUT_RATE) -> str:
    """The text frame of one ``audio`` event, built directly: it goes out every frame."""
    body = '{"audio":[' + ",".join(map(_DECIMAL.__getitem__, pcm)) + "]"
    body += f',"sample_rate":{sample_rate}}}'
    return '42["audio",' + json.dumps(body) + "]"


def encode_client(msg: ClientMessage) -> str:
    match msg:
        case AudioIn(pcm=pcm, sample_rate=rate):
            return audio_frame(pcm, rate)
        case RecordingStarted():
            event = sio.Event("recording-started")
        case RecordingStopped():
            event = sio.Event("recording-stopped")
        case PromptText(text=text):
            event = sio.Event("prompt_text", (text,))
    (frame,) = sio.encode(event)
    assert isinstance(frame, str)
    return frame


def encode_server(msg: ServerMessage) -> list[str | bytes]:
    match msg:
        case ModelAudio(pcm=pcm):
            return sio.encode(sio.Event("audio", (pcm,)))
        case Unknown(name=name):
            return sio.encode(sio.Event(name))
    name = next(k for k, v in _SIGNALS.items() if v == msg)
    return sio.encode(sio.Event(name))


def server_message(event: sio.Event) -> ServerMessage:
    """A Socket.IO event from the server as Freeze-Omni's message; ProtocolError if malformed."""
    if event.name == "audio":
        if len(event.args) != 1 or not isinstance(event.args[0], bytes):
            raise ProtocolError("'audio' event from the server without one binary argument")
        pcm = event.args[0]
        if len(pcm) % 2:
            raise ProtocolError(f"'audio' of {len(pcm)} bytes: PCM16 needs an even length")
        return ModelAudio(pcm)
    return _SIGNALS.get(event.name, Unknown(event.name))


def client_message(event: sio.Event) -> ClientMessage | None:
    """A Socket.IO event from a client; None for an event the server has no handler for (it
    ignores those); ProtocolError for a malformed one."""
    match event.name, event.args:
        case "recording-started", _:
            return RecordingStarted()
        case "recording-stopped", _:
            return RecordingStopped()
        case "prompt_text", (str() as text, *_):
            return PromptText(text)
        case "audio", (str() as body, *_):
            return _audio_in(body)
        case (("prompt_text" | "audio"), _):
            raise ProtocolError(f"'{event.name}' event without its string argument")
    return None


def _audio_in(body: str) -> AudioIn:
    try:
        data: Any = safejson.loads(body)
    except safejson.JsonError:
        raise ProtocolError(f"'audio' argument is not JSON: {body[:60]!r}") from None
    if not isinstance(data, dict) or not isinstance(data.get("audio"), list):
        raise ProtocolError("'audio' argument lacks its 'audio' list")
    rate = data.get("sample_rate")
    if not isinstance(rate, int) or isinstance(rate, bool):
        raise ProtocolError("'audio' argument lacks an integer 'sample_rate'")
    try:
        pcm = bytes(data["audio"])
    except (TypeError, ValueError):
        raise ProtocolError("'audio' list holds something other than bytes 0-255") from None
    if len(pcm) % 2:
        raise ProtocolError(f"'audio' of {len(pcm)} bytes: PCM16 needs an even length")
    return AudioIn(pcm, rate)
