"""Wire messages of Moshi's ``/api/chat``: binary WebSocket messages, a kind byte then a payload.

=====  ============  ======================================================  =================
byte   kind          payload                                                 direction
=====  ============  ======================================================  =================
0x00   handshake     nothing (Python servers) or u32 protocol + u32 model    server -> client
                     version, little endian (Rust servers)
0x01   audio         Ogg/Opus bytes; each direction is one continuous stream  both
0x02   text          UTF-8 text piece (a token, SentencePiece ``▁`` -> " ")   server -> client
0x03   control       one byte: start 0, endTurn 1, pause 2, restart 3        unused when streaming
0x04   metadata      UTF-8 JSON (Rust servers, after the handshake)          server -> client
0x05   error         UTF-8 description                                       server -> client
0x06   ping          nothing                                                 unused
0x07   coloredtext   one colour byte, then UTF-8 text                        server -> client
0x08   image, 0x09 codes: defined by Rust ``moshi-server``, never sent on ``/api/chat``
=====  ============  ======================================================  =================

Sources: ``kyutai-labs/moshi`` ``rust/protocol.md``, ``client/src/protocol/encoder.ts``,
``rust/moshi-server/src/protocol.rs``, ``moshi/moshi/server.py`` (snapshot e6a55d2).

Parsing is strict: an empty message, an unknown kind, bad UTF-8, bad JSON or an unknown control
byte is a ProtocolError naming the problem. (``rust/protocol.md`` says unknown kinds "should be
discarded"; this client treats a kind outside 0..9 as a broken peer instead.)
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from duplexsim.core import safejson
from duplexsim.core.errors import ProtocolError

__all__ = [
    "Audio",
    "ColoredText",
    "Control",
    "ControlAction",
    "Error",
    "Handshake",
    "Kind",
    "Message",
    "Metadata",
    "Ping",
    "Text",
    "Unused",
    "decode",
    "encode",
]


class Kind(IntEnum):
    HANDSHAKE = 0
    AUDIO = 1
    TEXT = 2
    CONTROL = 3
    METADATA = 4
    ERROR = 5
    PING = 6
    COLORED_TEXT = 7
    IMAGE = 8
    CODES = 9


class ControlAction(IntEnum):
    START = 0
    END_TURN = 1
    PAUSE = 2
    RESTART = 3


@dataclass(frozen=True)
class Handshake:
    """``extra`` is empty from the Python servers; Rust servers send two u32 versions."""

    extra: bytes = b""

    @property
    def versions(self) -> tuple[int, int] | None:
        """(protocol version, model version) when the server sent them."""
        if len(self.extra) < 8:
            return None
        protocol, model = struct.unpack_from("<II", self.extra)
        return int(protocol), int(model)


@dataclass(frozen=True)
class Audio:
    ogg: bytes  # a piece of the direction's Ogg/Opus stream: any number of whole pages


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ColoredText:
    color: int
    text: str


@dataclass(frozen=True)
class Control:
    action: ControlAction


@dataclass(frozen=True)
class Metadata:
    data: Any  # parsed JSON


@dataclass(frozen=True)
class Error:
    message: str


@dataclass(frozen=True)
class Ping:
    pass


@dataclass(frozen=True)
class Unused:
    """A kind the Rust servers define but never send on ``/api/chat`` (image, codes)."""

    kind: int
    payload: bytes


Message = Handshake | Audio | Text | ColoredText | Control | Metadata | Error | Ping | Unused


def encode(msg: Message) -> bytes:
    match msg:
        case Handshake(extra=extra):
            return bytes([Kind.HANDSHAKE]) + extra
        case Audio(ogg=ogg):
            return bytes([Kind.AUDIO]) + ogg
        case Text(text=text):
            return bytes([Kind.TEXT]) + text.encode()
        case ColoredText(color=color, text=text):
            return bytes([Kind.COLORED_TEXT, color]) + text.encode()
        case Control(action=action):
            return bytes([Kind.CONTROL, action])
        case Metadata(data=data):
            return bytes([Kind.METADATA]) + json.dumps(data, separators=(",", ":")).encode()
        case Error(message=message):
            return bytes([Kind.ERROR]) + message.encode()
        case Ping():
            return bytes([Kind.PING])
        case Unused(kind=kind, payload=payload):
            return bytes([kind]) + payload
    raise TypeError(f"not a moshi message: {msg!r}")


def decode(data: bytes) -> Message:
    """One binary message -> its message; ProtocolError says what is wrong with it."""
    if not data:
        raise ProtocolError("empty message: every moshi message starts with a kind byte")
    kind, payload = data[0], data[1:]
    match kind:
        case Kind.HANDSHAKE:
            return Handshake(payload)
        case Kind.AUDIO:
            return Audio(payload)
        case Kind.TEXT:
            return Text(_utf8(payload, "text"))
        case Kind.COLORED_TEXT:
            if not payload:
                raise ProtocolError("coloredtext message without its colour byte")
            return ColoredText(payload[0], _utf8(payload[1:], "coloredtext"))
        case Kind.CONTROL:
            return Control(_control(payload))
        case Kind.METADATA:
            return Metadata(_json(payload))
        case Kind.ERROR:
            return Error(_utf8(payload, "error"))
        case Kind.PING:
            return Ping()
        case Kind.IMAGE | Kind.CODES:
            return Unused(kind, payload)
    raise ProtocolError(f"unknown message kind 0x{kind:02x} (known: 0x00..0x09)")


def _utf8(payload: bytes, what: str) -> str:
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"{what} message is not valid UTF-8 ({exc.reason})") from None


def _control(payload: bytes) -> ControlAction:
    if len(payload) != 1:
        raise ProtocolError(f"control message with {len(payload)} payload bytes, not 1")
    try:
        return ControlAction(payload[0])
    except ValueError:
        raise ProtocolError(f"unknown control action {payload[0]} (known: 0..3)") from None


def _json(payload: bytes) -> Any:
    text = _utf8(payload, "metadata")
    try:
        return safejson.loads(text)
    except safejson.JsonError as exc:
        raise ProtocolError(f"metadata is not valid JSON ({exc}): {text[:60]!r}") from None
