"""Socket.IO (protocol 5) over Engine.IO (protocol 4) on the websocket transport: the framing only.

Freeze-Omni's demo server is Flask-SocketIO, i.e. python-socketio 5 speaking Engine.IO 4. Over a
WebSocket every Engine.IO packet is one frame (no batching): a text frame starts with the packet
type digit, a binary frame is a raw attachment. Engine.IO types used here: ``0`` open (JSON
handshake), ``1`` close, ``2`` ping, ``3`` pong (in v4 the server pings and the client answers),
``4`` message. A message carries a Socket.IO packet: ``0`` connect, ``1`` disconnect, ``2`` event,
``4`` connect error, ``5`` binary event (``451-["name",{"_placeholder":true,"num":0}]``, then one
binary frame per attachment). Only the default namespace ``/`` is used, and no acks.

``PacketReader`` turns the frames of one direction into whole packets, holding a binary event
until its attachments have come. Anything that is not such a frame is a ProtocolError.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, TypeGuard

from duplexsim.core import safejson
from duplexsim.core.errors import ProtocolError

__all__ = [
    "Close",
    "Connect",
    "ConnectError",
    "Disconnect",
    "Event",
    "Open",
    "Packet",
    "PacketReader",
    "Ping",
    "Pong",
    "encode",
]

ENGINE_IO_VERSION = "4"
_COUNT = re.compile(r"[0-9]{1,2}")


@dataclass(frozen=True)
class Open:
    """Engine.IO handshake, server to client."""

    sid: str
    ping_interval_ms: int
    ping_timeout_ms: int
    max_payload: int = 1_000_000


@dataclass(frozen=True)
class Close:
    pass


@dataclass(frozen=True)
class Ping:
    pass


@dataclass(frozen=True)
class Pong:
    pass


@dataclass(frozen=True)
class Connect:
    """Socket.IO connect: client to server with an optional auth payload, server to client with
    the namespace session id."""

    data: dict[str, Any] | None = None


@dataclass(frozen=True)
class ConnectError:
    message: str


@dataclass(frozen=True)
class Disconnect:
    pass


@dataclass(frozen=True)
class Event:
    """An event and its arguments; a ``bytes`` argument travels as a binary attachment."""

    name: str
    args: tuple[Any, ...] = ()


Packet = Open | Close | Ping | Pong | Connect | ConnectError | Disconnect | Event


def encode(packet: Packet) -> list[str | bytes]:
    """The WebSocket frames of one packet (more than one only for a binary event)."""
    match packet:
        case Open():
            body = {
                "sid": packet.sid,
                "upgrades": [],
                "pingInterval": packet.ping_interval_ms,
                "pingTimeout": packet.ping_timeout_ms,
                "maxPayload": packet.max_payload,
            }
            return ["0" + _dumps(body)]
        case Close():
            return ["1"]
        case Ping():
            return ["2"]
        case Pong():
            return ["3"]
        case Connect(data=data):
            return ["40" + (_dumps(data) if data is not None else "")]
        case ConnectError(message=message):
            return ["44" + _dumps({"message": message})]
        case Disconnect():
            return ["41"]
        case Event(name=name, args=args):
            return _event_frames(name, args)


def _event_frames(name: str, args: tuple[Any, ...]) -> list[str | bytes]:
    blobs: list[str | bytes] = []
    body: list[Any] = [name]
    for arg in args:
        if isinstance(arg, bytes | bytearray | memoryview):
            body.append({"_placeholder": True, "num": len(blobs)})
            blobs.append(bytes(arg))
        else:
            body.append(arg)
    if not blobs:
        return ["42" + _dumps(body)]
    return [f"45{len(blobs)}-" + _dumps(body), *blobs]


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


class PacketReader:
    """Frames in, packets out, for one direction of one connection."""

    def __init__(self) -> None:
        self._waiting: tuple[str, list[Any], int] | None = None  # event, args, attachments due
        self._blobs: list[bytes] = []

    def feed(self, frame: str | bytes) -> Packet | None:
        """The packet this frame completes; None while a binary event awaits attachments."""
        if isinstance(frame, bytes | bytearray | memoryview):
            return self._attachment(bytes(frame))
        if self._waiting is not None:
            raise ProtocolError("a text frame came where a binary attachment was due")
        return self._text(frame)

    def _attachment(self, data: bytes) -> Packet | None:
        if self._waiting is None:
            raise ProtocolError(f"a binary frame ({len(data)} bytes) with no binary event for it")
        self._blobs.append(data)
        name, args, due = self._waiting
        if len(self._blobs) < due:
            return None
        blobs, self._blobs, self._waiting = self._blobs, [], None
        return Event(name, tuple(_fill(arg, blobs) for arg in args))

    def _text(self, text: str) -> Packet | None:
        kind, rest = text[:1], text[1:]
        if kind == "4":
            return self._socket_packet(rest)
        if kind == "2" and not rest:
            return Ping()
        if kind == "3" and not rest:
            return Pong()
        if kind == "1" and not rest:
            return Close()
        if kind == "0":
            return _open(_loads(rest, "open packet"))
        raise ProtocolError(f"not an Engine.IO packet: {text[:60]!r}")

    def _socket_packet(self, text: str) -> Packet | None:
        kind, rest = text[:1], text[1:]
        if rest.startswith("/"):
            raise ProtocolError(f"a packet for a namespace other than '/': {text[:60]!r}")
        if kind == "0":
            data = _loads(rest, "connect packet") if rest else None
            if data is not None and not isinstance(data, dict):
                raise ProtocolError("connect packet data is not a JSON object")
            return Connect(data)
        if kind == "1" and not rest:
            return Disconnect()
        if kind == "4":
            data = _loads(rest, "connect error") if rest else {}
            message = data.get("message") if isinstance(data, dict) else data
            return ConnectError(str(message) if message is not None else "")
        if kind == "2":
            name, args = _event_body(_loads(rest, "event"))
            return Event(name, tuple(args))
        if kind == "5":
            count, dash, body = rest.partition("-")
            # ASCII digits, few of them: str.isdigit takes "²", which int() refuses
            if not dash or not _COUNT.fullmatch(count) or not 0 < int(count) <= 16:
                raise ProtocolError(f"binary event with a bad attachment count: {text[:60]!r}")
            name, args = _event_body(_loads(body, "binary event"))
            self._waiting = (name, args, int(count))
            return None
        raise ProtocolError(f"not a Socket.IO packet this client takes: {text[:60]!r}")


def _loads(text: str, what: str) -> Any:
    try:
        return safejson.loads(text)
    except safejson.JsonError as exc:
        raise ProtocolError(f"{what} is not valid JSON ({exc}): {text[:60]!r}") from None


def _open(data: Any) -> Open:
    if not isinstance(data, dict):
        raise ProtocolError("open packet data is not a JSON object")
    sid, interval, timeout = data.get("sid"), data.get("pingInterval"), data.get("pingTimeout")
    if not isinstance(sid, str) or not _ms(interval) or not _ms(timeout):
        raise ProtocolError("open packet lacks sid, pingInterval or pingTimeout")
    payload = data.get("maxPayload", 1_000_000)
    return Open(sid, round(interval), round(timeout), round(payload) if _ms(payload) else 1_000_000)


def _ms(value: Any) -> TypeGuard[int | float]:
    """A number of milliseconds: python-engineio writes a float where it was configured with
    one, and 0 for a ping interval under a second (it truncates the seconds first)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and 0 <= value < 2**53  # also rules out NaN and infinity
    )


def _event_body(data: Any) -> tuple[str, list[Any]]:
    if not isinstance(data, list) or not data or not isinstance(data[0], str):
        raise ProtocolError("event is not a JSON array starting with its name")
    return data[0], data[1:]


def _fill(arg: Any, blobs: list[bytes]) -> Any:
    """An argument with its attachment placeholder replaced by the bytes (top level only: no
    server this client talks to nests them)."""
    if isinstance(arg, dict) and arg.get("_placeholder") is True:
        num = arg.get("num")
        if not isinstance(num, int) or isinstance(num, bool) or not 0 <= num < len(blobs):
            raise ProtocolError(f"binary placeholder with a bad number: {num!r}")
        return blobs[num]
    return arg
