"""NovaSonicClient: Bedrock's bidirectional stream over HTTP/2, around ClientProtocol.

One POST to ``/model/{modelId}/invoke-with-bidirectional-stream`` (TLS with ALPN ``h2`` for
``https://``; cleartext HTTP/2 with prior knowledge for ``http://``, which only a local fake
speaks), signed with SigV4; every event then goes out in its signed envelope. Response bytes are
stamped when read. AWS credentials: the secret access key is the profile's key; the access key
id and an optional session token come from the environment variables the options name (by
default ``AWS_ACCESS_KEY_ID`` and ``AWS_SESSION_TOKEN``). None of them is ever recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import ssl
import uuid
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote, urlsplit

from numpy.typing import NDArray

from duplexsim.clients.base import (
    Capabilities,
    ClientConfig,
    ClientEvent,
    DuplexClient,
    ErrorEvent,
    Metering,
)
from duplexsim.clients.nova_sonic.protocol import ClientProtocol, SonicSettings, http_error
from duplexsim.clients.nova_sonic.sigv4 import Credentials, EventSigner, sign_request
from duplexsim.clients.transport.h2io import (
    ConnectionTerminated,
    DataReceived,
    Event,
    H2Peer,
    InformationalResponseReceived,
    PingAckReceived,
    ResponseReceived,
    StreamEnded,
    StreamReset,
    is_broken,
    response_head,
)
from duplexsim.clients.transport.wsinbox import HIGH_WATER
from duplexsim.core.errors import (
    ConfigError,
    ConnectError,
    Disconnected,
    ProtocolError,
    SessionError,
)
from duplexsim.core.intake import REFUSAL_BODY

__all__ = ["DEFAULT_MODEL", "NovaSonicClient"]

DEFAULT_MODEL = "amazon.nova-2-sonic-v1:0"
FRAME_MS = 20
OPTIONS: dict[str, type | tuple[type, ...]] = {
    "region": str,
    "endpointing": str,  # Nova 2 Sonic's endpointingSensitivity: HIGH | MEDIUM | LOW
    "system_prompt": str,
    "max_tokens": int,
    "top_p": (int, float),
    "temperature": (int, float),
    "access_key_id_env": str,
    "session_token_env": str,
}


def _settings(voice: str | None, options: Mapping[str, Any]) -> SonicSettings:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        known = ", ".join(OPTIONS)
        raise ConfigError(f"nova-sonic: unknown option(s) {', '.join(unknown)} (known: {known})")
    for key, value in options.items():
        if not isinstance(value, OPTIONS[key]) or isinstance(value, bool):
            raise ConfigError(f"nova-sonic: option '{key}' has the wrong type")
    if options.get("endpointing", "HIGH") not in ("HIGH", "MEDIUM", "LOW"):
        raise ConfigError("nova-sonic: endpointing must be HIGH, MEDIUM or LOW")
    return SonicSettings(
        voice=voice or "matthew",
        system_prompt=options.get("system_prompt"),
        endpointing=options.get("endpointing"),
        max_tokens=options.get("max_tokens", 1024),
        top_p=float(options.get("top_p", 0.9)),
        temperature=float(options.get("temperature", 0.7)),
    )


class NovaSonicClient(DuplexClient):
    protocol = "nova-sonic"
    instructions_option = "system_prompt"
    pollable = True
    # usageEvent: running totals of speech and text tokens; billed per token, everything
    # streamed counted as input (the silence after the context too); AWS publishes no rate
    metering = Metering("running-total", input_basis="stream")

    def __init__(self, config: ClientConfig) -> None:
        super().__init__(config)
        self._settings = _settings(config.voice, config.options)
        self._region = str(config.options.get("region", "us-east-1"))
        self._proto = ClientProtocol(self._settings, f"prompt-{uuid.uuid4()}", config.api_key)
        self._peer: H2Peer | None = None
        self._stream = 0
        self._signer: EventSigner | None = None
        self._response: asyncio.Future[tuple[int, dict[str, str]]] | None = None
        self._status: int | None = None
        self._body = bytearray()  # the start of a refusal's body
        self._inbox: deque[tuple[bytes, float]] = deque()
        self._waiting = 0  # bytes in the inbox: past HIGH_WATER, reading stops until polled
        self._end: tuple[SessionError | None] | None = None  # set once the stream is over
        self._wake = asyncio.Event()
        self._stall_s: float | None = None
        self._last_ack = 0.0
        self._pinger: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            input_rate=self._settings.input_rate,
            output_rate=self._settings.output_rate,
            frame_ms=FRAME_MS,
            faster_than_realtime=True,
            end_of_turn_signal=True,  # the reply's AUDIO contentEnd with END_TURN
            server_vad=True,
        )

    def watch_liveness(self, stall_timeout_s: float) -> None:
        self._stall_s = stall_timeout_s

    async def connect(self) -> None:
        url = urlsplit(self.config.url)
        if url.scheme not in ("https", "http") or not url.hostname:
            raise ConfigError(f"nova-sonic: '{self.config.url}' is not an http(s):// endpoint")
        loop = asyncio.get_running_loop()
        self._response = loop.create_future()
        peer = H2Peer(client_side=True, on_events=self._on_h2, clock=self.clock)
        tls = url.scheme == "https"
        try:
            async with asyncio.timeout(self.config.connect_timeout_s):
                await loop.create_connection(
                    lambda: peer,
                    url.hostname,
                    url.port or (443 if tls else 80),
                    ssl=_tls() if tls else None,
                    server_hostname=url.hostname if tls else None,
                )
        except (OSError, TimeoutError) as exc:
            raise ConnectError(f"cannot connect to {url.netloc}: {exc or 'timed out'}") from None
        self._peer = peer
        self._open_stream(url.scheme, url.netloc, url.path.rstrip("/"))
        try:
            await self._await_response()
        except SessionError:
            await self.aclose()
            raise
        if self._stall_s is not None:
            self._last_ack = self.clock()
            self._pinger = asyncio.create_task(self._ping(self._stall_s))

    def _open_stream(self, scheme: str, authority: str, prefix: str) -> None:
        assert self._peer is not None
        model = self.config.model or DEFAULT_MODEL
        path = f"{prefix}/model/{quote(model, safe='')}/invoke-with-bidirectional-stream"
        env = self.config.options
        creds = Credentials(
            os.environ.get(str(env.get("access_key_id_env", "AWS_ACCESS_KEY_ID")), ""),
            self.config.api_key or "",
            os.environ.get(str(env.get("session_token_env", "AWS_SESSION_TOKEN"))) or None,
        )
        content = {"content-type": "application/vnd.amazon.eventstream"}
        now = datetime.datetime.now(datetime.UTC)  # a signature is valid for a few minutes
        # an AWS refusal may quote the canonical request (the token in it): blank them all out
        self._proto.secrets = [s for s in (creds.secret_access_key, creds.access_key_id,
                                           creds.session_token) if s]  # fmt: skip
        headers, seed = sign_request("POST", authority, path, content, creds, self._region, now)
        conn = self._peer.conn
        self._stream = conn.get_next_available_stream_id()
        pseudo = [
            (":method", "POST"),
            (":scheme", scheme),
            (":authority", authority),
            (":path", path),
        ]
        conn.send_headers(self._stream, pseudo + list(headers.items()))
        self._signer = EventSigner(creds, self._region, seed)
        for event in self._proto.opening():
            self._send(event)

    async def _await_response(self) -> None:
        assert self._response is not None
        try:
            async with asyncio.timeout(self.config.connect_timeout_s):
                status, headers = await self._response
                # the start of the refusal's body, to say why
                while status != 200 and self._end is None and len(self._body) < REFUSAL_BODY:
                    self._wake.clear()
                    await self._wake.wait()
        except TimeoutError:
            if self._response.cancelled():
                raise ConnectError(
                    f"no response to the stream within {self.config.connect_timeout_s:g} s"
                ) from None
            status, headers = self._response.result()  # a refusal whose body never ended
        if status != 200:
            said = self._proto.redact(bytes(self._body).decode("utf-8", "replace")).encode()
            raise http_error(status, headers, said)

    def _on_h2(self, events: list[Event], arrival: float) -> None:
        try:
            for ev in events:
                self._on_h2_event(ev, arrival)
        except (ValueError, TypeError, LookupError) as exc:
            # called by the transport: what escapes would be a traceback, and the stream hang
            what = f"{type(exc).__name__}: {str(exc)[:200]}"
            self._finish(ProtocolError(f"could not handle what the server sent ({what})"))
        self._wake.set()

    def _on_h2_event(self, ev: Event, arrival: float) -> None:
        if (broken := is_broken(ev)) is not None:
            self._finish(ProtocolError(f"bad HTTP/2 from the server: {broken}"))
        elif isinstance(ev, ResponseReceived) and ev.stream_id == self._stream:
            self._on_response(ev)
        elif isinstance(ev, InformationalResponseReceived) and ev.stream_id == self._stream:
            try:  # nothing to act on, but it must be one
                response_head(ev.headers, informational=True)
            except ProtocolError as exc:
                self._finish(exc)
        elif isinstance(ev, DataReceived) and ev.stream_id == self._stream:
            if self._status == 200:
                self._take(ev.data, arrival)
            else:
                self._body += ev.data[: max(REFUSAL_BODY - len(self._body), 0)]
        elif isinstance(ev, StreamEnded) and ev.stream_id == self._stream:
            self._finish(None)
        elif isinstance(ev, StreamReset) and ev.stream_id == self._stream:
            self._finish(Disconnected(f"server reset the stream (HTTP/2 error {ev.error_code})"))
        elif isinstance(ev, ConnectionTerminated):
            self._finish(Disconnected(f"server closed the connection (GOAWAY {ev.error_code})"))
        elif isinstance(ev, PingAckReceived):
            self._last_ack = arrival

    def _take(self, data: bytes, arrival: float) -> None:
        self._inbox.append((data, arrival))
        self._waiting += len(data)
        if self._waiting > HIGH_WATER and self._peer is not None and self._peer.transport:
            self._peer.transport.pause_reading()  # backpressure, as the WebSocket shell's

    def _on_response(self, ev: ResponseReceived) -> None:
        try:
            head = response_head(ev.headers)
        except ProtocolError as exc:
            self._finish(exc)
            return
        if self._response is not None and not self._response.done():
            self._status = head[0]
            self._response.set_result(head)

    def _finish(self, error: SessionError | None) -> None:
        if self._end is None:
            self._end = (None if self._closing else error,)
        if self._response is not None and not self._response.done():
            self._response.set_exception(error or ConnectError("stream ended before a response"))

    async def _ping(self, stall_s: float) -> None:
        """A PING every half stall timeout; one unanswered for a whole one is a hung server
        (the same margin as the WebSocket clients' keepalive)."""
        assert self._peer is not None
        outstanding: float | None = None  # when the ping not yet answered went out
        while self._end is None:
            await asyncio.sleep(stall_s / 2)
            now = self.clock()
            if outstanding is not None and self._last_ack < outstanding:
                if now - outstanding >= stall_s:
                    stalled = f"server answered no ping for {stall_s:.1f} s (stalled)"
                    self._finish(Disconnected(stalled, reason="stalled"))
                    self._wake.set()
                    return
                continue
            outstanding = now
            self._peer.conn.ping(os.urandom(8))
            self._peer.flush()

    def _send(self, event: bytes) -> None:
        if self._peer is None or self._signer is None or self._peer.closed.done():
            raise Disconnected("connection closed while sending")
        envelope = self._signer.wrap(event, datetime.datetime.now(datetime.UTC))
        self._peer.send(self._stream, envelope)
        self.bytes_sent += len(envelope)

    async def send_audio(self, samples: NDArray[Any]) -> None:
        await self.send_encoded(self._proto.audio_chunk(samples))

    def encode_audio(self, frames: NDArray[Any]) -> list[bytes]:
        return [self._proto.audio_chunk(row) for row in frames]  # signed as each goes out

    async def send_encoded(self, message: str | bytes) -> None:
        self._send(message if isinstance(message, bytes) else message.encode())

    def poll_events(self) -> tuple[list[ClientEvent], bool]:
        events: list[ClientEvent] = []
        if self._waiting > HIGH_WATER and self._peer is not None and self._peer.transport:
            self._peer.transport.resume_reading()
        self._waiting = 0
        while self._inbox:
            data, arrival = self._inbox.popleft()
            self.bytes_received += len(data)
            try:
                events += self._proto.receive(data, arrival)
            except SessionError as exc:
                events.append(ErrorEvent(exc, arrival, fatal=True))
                return events, True
        if self._end is None:
            return events, False
        error = self._end[0]
        if error is None and self._proto.pending_bytes:
            error = ProtocolError("the response stream ended inside an event-stream message")
        if error is not None:
            events.append(ErrorEvent(error, self.clock(), fatal=True))
        return events, True

    async def events(self) -> AsyncIterator[ClientEvent]:
        while True:
            self._wake.clear()
            batch, done = self.poll_events()
            for event in batch:
                yield event
            if done:
                return
            await self._wake.wait()

    async def aclose(self) -> None:
        peer, self._peer = self._peer, None
        self._closing = True
        if self._pinger is not None:
            self._pinger.cancel()
        if peer is None:
            return
        with contextlib.suppress(Exception):  # the server may be gone already
            if self._end is None and self._signer is not None:
                for event in self._proto.closing():
                    peer.send(
                        self._stream, self._signer.wrap(event, datetime.datetime.now(datetime.UTC))
                    )
                final = self._signer.wrap(b"", datetime.datetime.now(datetime.UTC))
                peer.send(self._stream, final, end=True)
        if peer.transport is not None:
            peer.transport.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await peer.closed

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info["model"] = self.config.model or DEFAULT_MODEL
        info["region"] = self._region
        return info


def _tls() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.set_alpn_protocols(["h2"])
    return ctx
