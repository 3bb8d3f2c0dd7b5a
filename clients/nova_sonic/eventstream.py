"""The AWS event-stream binary format (``application/vnd.amazon.eventstream``), both ways, pure.

A message is a 12-byte prelude (total length, headers length, both big-endian uint32, and the
CRC32 of those 8 bytes), the headers, the payload, and the CRC32 of everything before it. A header
is a name (uint8 length, UTF-8), a type byte and a value: 0/1 true/false, 2 int8, 3 int16,
4 int32, 5 int64, 6 bytes and 7 string (uint16 length first), 8 timestamp (int64 ms since the
epoch), 9 UUID (16 bytes). Limits: 128 KiB of headers, 16 MiB of payload.

``MessageReader`` takes bytes as they come (any split) and returns whole messages; anything that
is not a valid message is a ProtocolError, and the reader refuses further bytes after one.
"""

from __future__ import annotations

import datetime
import struct
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from duplexsim.core.errors import ProtocolError

__all__ = [
    "MAX_HEADERS",
    "MAX_PAYLOAD",
    "Byte",
    "HeaderValue",
    "Long",
    "Message",
    "MessageReader",
    "Short",
    "encode_message",
]

MAX_HEADERS = 128 * 1024
MAX_PAYLOAD = 16 * 1024 * 1024
_PRELUDE = struct.Struct(">II")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class Byte(int):
    """An int sent as int8 (a plain int goes as int32)."""


class Short(int):
    """An int sent as int16."""


class Long(int):
    """An int sent as int64."""


HeaderValue = bool | int | bytes | str | datetime.datetime | uuid.UUID


@dataclass(frozen=True)
class Message:
    headers: Mapping[str, HeaderValue] = field(default_factory=dict)
    payload: bytes = b""


def encode_message(headers: Mapping[str, HeaderValue], payload: bytes = b"") -> bytes:
    head = b"".join(_header(name, value) for name, value in headers.items())
    if len(head) > MAX_HEADERS or len(payload) > MAX_PAYLOAD:
        raise ValueError("event-stream message over the size limits")
    prelude = _PRELUDE.pack(16 + len(head) + len(payload), len(head))
    body = prelude + struct.pack(">I", zlib.crc32(prelude)) + head + payload
    return body + struct.pack(">I", zlib.crc32(body))


def _header(name: str, value: HeaderValue) -> bytes:
    key = name.encode()
    if not 0 < len(key) < 256:
        raise ValueError(f"header name of {len(key)} bytes")
    return bytes([len(key)]) + key + _value(value)


def _value(value: HeaderValue) -> bytes:
    match value:
        case bool():
            return bytes([0 if value else 1])
        case Byte():
            return b"\x02" + struct.pack(">b", value)
        case Short():
            return b"\x03" + struct.pack(">h", value)
        case Long():
            return b"\x05" + struct.pack(">q", value)
        case int():
            return b"\x04" + struct.pack(">i", value)
        case bytes():
            return b"\x06" + _sized(value)
        case str():
            return b"\x07" + _sized(value.encode())
        case datetime.datetime():
            ms = (value - _EPOCH) // datetime.timedelta(milliseconds=1)
            return b"\x08" + struct.pack(">q", ms)
        case uuid.UUID():
            return b"\x09" + value.bytes
    raise TypeError(f"no event-stream header type for {type(value).__name__}")


def _sized(data: bytes) -> bytes:
    if len(data) > 32767:
        raise ValueError(f"header value of {len(data)} bytes")
    return struct.pack(">H", len(data)) + data


class MessageReader:
    """Bytes in, whole messages out, for one direction of one stream."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._broken = False

    @property
    def pending(self) -> int:
        """Bytes held of a message not yet whole (a stream that ends here was cut short)."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Message]:
        if self._broken:
            raise ProtocolError("event stream already failed to decode")
        self._buffer += data
        messages: list[Message] = []
        try:
            while len(self._buffer) >= 12:
                total, head = _PRELUDE.unpack_from(self._buffer)
                _check_prelude(self._buffer, total, head)
                if len(self._buffer) < total:
                    break
                messages.append(_message(bytes(self._buffer[:total]), head))
                del self._buffer[:total]
        except ProtocolError:
            self._broken = True
            raise
        return messages


def _check_prelude(buffer: bytearray, total: int, head: int) -> None:
    (crc,) = struct.unpack_from(">I", buffer, 8)
    if zlib.crc32(buffer[:8]) != crc:
        raise ProtocolError("event-stream prelude checksum mismatch")
    if total < 16 or head > total - 16 or head > MAX_HEADERS or total - head - 16 > MAX_PAYLOAD:
        raise ProtocolError(f"event-stream message lengths out of range ({total}, {head})")


def _message(data: bytes, head: int) -> Message:
    (crc,) = struct.unpack_from(">I", data, len(data) - 4)
    if zlib.crc32(data[:-4]) != crc:
        raise ProtocolError("event-stream message checksum mismatch")
    return Message(_headers(data[12 : 12 + head]), data[12 + head : -4])


def _headers(data: bytes) -> dict[str, HeaderValue]:
    headers: dict[str, HeaderValue] = {}
    pos = 0
    try:
        while pos < len(data):
            size = data[pos]
            name = data[pos + 1 : pos + 1 + size].decode()
            if size == 0 or len(name.encode()) != size or name in headers:
                raise ProtocolError("event-stream header with a bad, cut or repeated name")
            headers[name], pos = _read_value(data, pos + 1 + size)
    except (IndexError, OverflowError, struct.error, UnicodeDecodeError):
        raise ProtocolError("event-stream headers are cut short or not UTF-8") from None
    return headers


def _read_value(data: bytes, pos: int) -> tuple[HeaderValue, int]:
    kind, pos = data[pos], pos + 1
    if kind in (0, 1):
        return kind == 0, pos
    if kind in _FIXED:
        fmt, size = _FIXED[kind]
        if pos + size > len(data):
            raise IndexError
        (number,) = struct.unpack_from(fmt, data, pos)
        if kind == 8:
            return _EPOCH + datetime.timedelta(milliseconds=number), pos + size
        return number, pos + size
    if kind in (6, 7):
        (size,) = struct.unpack_from(">H", data, pos)
        raw, pos = data[pos + 2 : pos + 2 + size], pos + 2 + size
        if len(raw) != size:
            raise IndexError
        return (raw.decode() if kind == 7 else raw), pos
    if kind == 9:
        raw = data[pos : pos + 16]
        if len(raw) != 16:
            raise IndexError
        return uuid.UUID(bytes=raw), pos + 16
    raise ProtocolError(f"event-stream header of unknown type {kind}")


_FIXED = {2: (">b", 1), 3: (">h", 2), 4: (">i", 4), 5: (">q", 8), 8: (">q", 8)}
