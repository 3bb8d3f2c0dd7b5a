"""HTTP/1.1 messages for the one-request connections of WebRTC signalling (no HTTP library):
a response read to EOF, parsed and de-framed, for the client; a request's head parsed, and a
whole response made, for the fake kit's signalling server."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from duplexsim.core.errors import ProtocolError

__all__ = [
    "MAX_BODY",
    "MAX_HEAD",
    "HttpResponse",
    "parse_request_head",
    "parse_response",
    "response_bytes",
]

MAX_HEAD = 64 * 1024
MAX_BODY = 1024 * 1024
_DIGITS = re.compile(r"[0-9]{1,12}")  # ASCII only: str.isdigit takes "²", which int() refuses


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: dict[str, str]  # names lower-cased
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def _split_head(data: bytes) -> tuple[str, dict[str, str], bytes]:
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        raise ProtocolError("HTTP message without the end of its header")
    first, *lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            raise ProtocolError(f"bad HTTP header line {line[:60]!r}")
        headers[name.strip().lower()] = value.strip()
    return first, headers, rest


def parse_response(data: bytes) -> HttpResponse:
    """A whole response read to EOF -> status, headers and the de-framed body."""
    first, headers, rest = _split_head(data)
    version, _, tail = first.partition(" ")
    code = tail.partition(" ")[0]
    if not version.startswith("HTTP/1.") or not _DIGITS.fullmatch(code):
        raise ProtocolError(f"not an HTTP/1.x response: {first[:60]!r}")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _unchunk(rest)
    elif "content-length" in headers:
        length = _content_length(headers)
        if len(rest) < length:
            raise ProtocolError(f"HTTP body cut short: {len(rest)} of {length} bytes")
        body = rest[:length]
    else:
        body = rest
    return HttpResponse(int(code), headers, body)


def _content_length(headers: Mapping[str, str]) -> int:
    value = headers.get("content-length", "0")
    if not _DIGITS.fullmatch(value):
        raise ProtocolError(f"bad Content-Length {value[:20]!r}")
    return int(value)


def _unchunk(data: bytes) -> bytes:
    out = bytearray()
    while True:
        size_line, sep, data = data.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0].strip(), 16)
        except ValueError:
            raise ProtocolError(f"bad HTTP chunk size {size_line[:20]!r}") from None
        if not sep or len(data) < size:
            raise ProtocolError("HTTP chunked body cut short")
        if size == 0:
            return bytes(out)
        out += data[:size]
        data = data[size + 2 :]


def response_bytes(
    status: int, reason: str, body: bytes = b"", headers: Mapping[str, str] | None = None
) -> bytes:
    """A whole HTTP/1.1 response for the fake server (the connection closes after it)."""
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


def parse_request_head(data: bytes) -> tuple[str, str, dict[str, str]]:
    """``METHOD target HTTP/1.1`` plus headers (the data must end with the blank line)."""
    first, headers, _ = _split_head(data)
    method, _, rest = first.partition(" ")
    path, _, version = rest.partition(" ")
    if not method or not path or not version.startswith("HTTP/1."):
        raise ProtocolError(f"not an HTTP/1.x request: {first[:60]!r}")
    return method, path, headers
