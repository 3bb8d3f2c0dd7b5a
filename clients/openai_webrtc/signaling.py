"""Signaling: the SDP exchange at ``POST {url}/v1/realtime/calls``, one HTTP/1.1 request.

Pure helpers build the request (the raw ``application/sdp`` form, for an ephemeral ``ek_`` key, or
the ``multipart/form-data`` form with ``sdp`` and ``session`` parts, for a standard key), parse the
response and map refusals to errors. ``post`` is the one I/O function: a minimal HTTP/1.1 client
over asyncio streams (TLS for https), one request per connection (``Connection: close``), so the
project needs no HTTP library (the messages themselves: ``duplexsim.clients.transport.http1``,
whose request side the fake kit's signalling server uses). The fake reads offers with
``parse_offer``.

The API key only ever goes into the ``Authorization`` header of the bytes written to the socket:
``HttpRequest`` hides it from ``repr``, and every error text passes through ``redact``.
"""

from __future__ import annotations

import asyncio
import email.parser
import email.policy
import json
import secrets
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from duplexsim.clients.transport.http1 import (
    MAX_BODY,
    MAX_HEAD,
    HttpResponse,
    parse_request_head,
    parse_response,
)
from duplexsim.clients.transport.httperrors import refusal
from duplexsim.core import safejson
from duplexsim.core.errors import ConnectError, ProtocolError, SessionError
from duplexsim.core.redact import redact as redact_secrets

__all__ = [
    "CALLS_PATH",
    "HttpRequest",
    "HttpResponse",
    "Target",
    "build_call_request",
    "call_error",
    "call_id",
    "calls_target",
    "parse_offer",
    "parse_request_head",
    "parse_response",
    "post",
    "redact",
]

CALLS_PATH = "/v1/realtime/calls"
USER_AGENT = "duplexsim-openai-webrtc"


@dataclass(frozen=True)
class Target:
    scheme: str  # "http" | "https"
    host: str
    port: int
    path: str  # with the query, if any

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def calls_target(url: str, model: str | None = None) -> Target:
    """Where the offer goes: ``url`` is the API base (``https://api.openai.com``, ``.../v1``) or
    the calls endpoint itself; ws/wss URLs are taken as http/https. The model, when given and the
    URL has no query, goes in ``?model=`` (the multipart form also names it in the session)."""
    parts = urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    if scheme not in ("http", "https") or not parts.hostname:
        raise ConnectError(f"not an http(s) URL: {redact(url)}", retryable=False, reason="config")
    path = parts.path.rstrip("/")
    if not path.endswith("/realtime/calls"):
        path = path + "/realtime/calls" if path.endswith("/v1") else path + CALLS_PATH
    query = parts.query or (f"model={model}" if model else "")
    return Target(
        scheme,
        parts.hostname,
        parts.port or (443 if scheme == "https" else 80),
        path + (f"?{query}" if query else ""),
    )


@dataclass(frozen=True)
class HttpRequest:
    target: Target
    headers: tuple[tuple[str, str], ...]  # Authorization included; never shown by repr
    body: bytes = field(repr=False)

    def encode(self) -> bytes:
        lines = [f"POST {self.target.path} HTTP/1.1", f"Host: {self.target.host_header}"]
        lines += [f"{name}: {value}" for name, value in self.headers]
        lines += [f"Content-Length: {len(self.body)}", "Connection: close", "", ""]
        return "\r\n".join(lines).encode("latin-1") + self.body

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def __repr__(self) -> str:
        shown = tuple((k, "***" if k.lower() == "authorization" else v) for k, v in self.headers)
        return f"HttpRequest({self.target!r}, headers={shown}, body={len(self.body)} bytes)"


def build_call_request(
    target: Target,
    offer_sdp: str,
    *,
    api_key: str | None,
    session: Mapping[str, Any] | None = None,
    boundary: str | None = None,
) -> HttpRequest:
    """The POST that carries the offer: raw SDP when ``session`` is None, else multipart."""
    headers = [("User-Agent", USER_AGENT), ("Accept", "application/sdp")]
    if api_key:
        headers.append(("Authorization", f"Bearer {api_key}"))
    if session is None:
        headers.append(("Content-Type", "application/sdp"))
        return HttpRequest(target, tuple(headers), offer_sdp.encode("utf-8"))
    boundary = boundary or f"duplexsim-{secrets.token_hex(12)}"
    parts = [
        ("sdp", "application/sdp", offer_sdp),
        ("session", "application/json", json.dumps(dict(session), separators=(",", ":"))),
    ]
    body = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n'
        f"Content-Type: {kind}\r\n\r\n{text}\r\n".encode()
        for name, kind, text in parts
    )
    body += f"--{boundary}--\r\n".encode()
    headers.append(("Content-Type", f"multipart/form-data; boundary={boundary}"))
    return HttpRequest(target, tuple(headers), body)


def call_id(location: str | None) -> str | None:
    """The call id: the last segment of the ``Location`` header."""
    if not location:
        return None
    return location.rstrip("/").rsplit("/", 1)[-1] or None


def call_error(response: HttpResponse, *, secret: str | None = None) -> SessionError:
    """The error for a response that did not answer the offer."""
    detail = "" if response.status in (401, 403) else _error_detail(response, secret)
    return refusal(
        response.status, response.headers, what="the SDP offer", body=response.text(), detail=detail
    )


def _error_detail(response: HttpResponse, secret: str | None) -> str:
    """The ``error.message`` of a JSON error body, shortened and redacted."""
    try:
        message = safejson.loads(response.body)["error"]["message"]
    except (safejson.JsonError, KeyError, TypeError):
        return ""
    return f": {redact(str(message)[:200], secret)}" if message else ""


def redact(text: str, secret: str | None = None) -> str:
    return redact_secrets(text, (secret,))


async def post(request: HttpRequest, *, timeout_s: float, secret: str | None) -> HttpResponse:
    """Send ``request`` and read the whole response; failures are retryable ConnectErrors with the
    key redacted."""
    target = request.target
    where = f"{target.scheme}://{target.host_header}{target.path.split('?')[0]}"
    tls = ssl.create_default_context() if target.scheme == "https" else None
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(
                target.host, target.port, ssl=tls, limit=MAX_HEAD
            )
            writer.write(request.encode())
            await writer.drain()
            data = await _read_all(reader)
    except TimeoutError:
        raise ConnectError(f"no answer to the SDP offer from {where} in {timeout_s:g} s") from None
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError) as exc:
        reason = redact(str(exc) or type(exc).__name__, secret)
        raise ConnectError(f"cannot POST the SDP offer to {where}: {reason}") from None
    finally:
        if writer is not None:
            writer.close()
    return parse_response(data)


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    data = bytearray()
    while chunk := await reader.read(65536):
        data += chunk
        if len(data) > MAX_HEAD + MAX_BODY:
            raise ProtocolError(f"HTTP response over {MAX_HEAD + MAX_BODY} bytes")
    return bytes(data)


# --- the server side (the fake) ---------------------------------------------------------------


def parse_offer(content_type: str, body: bytes) -> tuple[str, dict[str, Any] | None]:
    """The offer SDP, and the session config of the multipart form (None for raw SDP)."""
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/sdp":
        return _utf8(body, "SDP offer"), None
    if kind != "multipart/form-data":
        raise ProtocolError(f"unsupported Content-Type {kind!r} (application/sdp or multipart)")
    head = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    fields: dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            fields[name] = payload
    if "sdp" not in fields:
        raise ProtocolError("multipart offer has no 'sdp' part")
    session = None
    if "session" in fields:
        try:
            session = safejson.loads(fields["session"])
        except safejson.JsonError:
            raise ProtocolError("multipart 'session' part is not JSON") from None
        if not isinstance(session, dict):
            raise ProtocolError("multipart 'session' part is not a JSON object")
    return _utf8(fields["sdp"], "sdp part"), session


def _utf8(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(f"{what} is not UTF-8") from None
