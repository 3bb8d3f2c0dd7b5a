"""The asyncio shell every WebSocket client shares: the receive loop, closing, key redaction.

A subclass opens ``self._ws`` in ``connect()`` and turns each message into events in ``parse``;
its protocol object stays sans-I/O.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import AsyncIterator
from typing import ClassVar

from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.http11 import Response

from duplexsim.clients.base import ClientConfig, ClientEvent, DuplexClient, ErrorEvent, RateLimits
from duplexsim.clients.transport.httperrors import limits_from_headers, refusal
from duplexsim.clients.transport.wsconn import KEEPALIVE_TIMEOUT, WsConnection
from duplexsim.clients.transport.wsopen import connect
from duplexsim.core.errors import ConnectError, Disconnected, ProtocolError, SessionError
from duplexsim.core.redact import redact
from duplexsim.core.retry import ProviderLimit

__all__ = ["WebSocketClient", "WsConnection", "close_text", "message_size"]


def message_size(message: str | bytes) -> int:
    return len(message.encode()) if isinstance(message, str) else len(message)


_DEFAULT_STALL_S = 20.0  # websockets' own ping timeout
# close codes websockets sends when the peer's frames are at fault: protocol error, invalid
# data (bad UTF-8 in a text frame), message too big
_SERVER_FAULTS = frozenset({1002, 1007, 1009})


def close_text(exc: ConnectionClosed) -> str:
    frame = exc.rcvd or exc.sent
    if frame is None:
        return "no close frame (connection lost)"
    return f"code {frame.code}" + (f" ({frame.reason})" if frame.reason else "")


def _server_fault(exc: ConnectionClosed) -> ProtocolError | None:
    """The error where we closed the connection because of what the server sent (an oversized
    or broken frame); None otherwise."""
    sent = exc.sent
    if exc.rcvd is None and sent is not None and sent.code in _SERVER_FAULTS:
        return ProtocolError(f"server broke the WebSocket protocol: {close_text(exc)}")
    return None


class WebSocketClient(DuplexClient):
    pollable = True
    decode_text: ClassVar[bool | None] = None  # passed to recv(): None = text as str
    max_message: ClassVar[int] = 2**22
    close_timeout_s: ClassVar[float] = 2.0  # the session is over: a silent peer is not waited on

    def __init__(self, config: ClientConfig) -> None:
        super().__init__(config)
        self._ws: WsConnection | None = None
        self._stall_timeout_s: float | None = None
        self._closing = False
        self._said: tuple[ProviderLimit, ...] = ()  # the handshake headers' word on the limits

    def endpoint(self) -> str:
        """The WebSocket URL to open."""
        return self.config.url

    def auth_headers(self) -> dict[str, str] | None:
        """Headers carrying the key (the only place it ever goes)."""
        key = self.config.api_key
        return {"Authorization": f"Bearer {key}"} if key else None

    def refused(self, response: Response) -> SessionError:
        """The error for an HTTP refusal of the upgrade (auth, rate limit, server error)."""
        body = bytes(response.body or b"").decode("utf-8", "replace")
        return refusal(response.status_code, response.headers, body=body)

    @abstractmethod
    async def handshake(self, ws: WsConnection) -> None:
        """The protocol's opening exchange, within ``config.connect_timeout_s``."""

    async def connect(self) -> None:
        url = self.endpoint()
        try:
            ws = await connect(
                url,
                headers=self.auth_headers(),
                open_timeout=self.config.connect_timeout_s,
                max_size=self.max_message,
                close_timeout=self.close_timeout_s,
                # a ping every half stall timeout, unanswered for a whole one: a hung server is
                # found within 1.5 stall timeouts (websockets' own default: 20 s + 20 s)
                ping_interval=self._stall_s / 2,
                ping_timeout=self._stall_s,
                clock=self.clock,
            )
        except InvalidStatus as exc:
            raise self.refused(exc.response) from None
        except (OSError, TimeoutError, WebSocketException) as exc:
            reason = self._redact(str(exc) or type(exc).__name__)
            raise ConnectError(f"cannot connect to {self._redact(url)}: {reason}") from None
        self._ws = ws
        if ws.response is not None:
            self._said = limits_from_headers(ws.response.headers)
        try:
            await self.handshake(ws)
        except SessionError:
            await self.aclose()
            raise

    def watch_liveness(self, stall_timeout_s: float) -> None:
        self._stall_timeout_s = stall_timeout_s

    @property
    def _stall_s(self) -> float:
        return _DEFAULT_STALL_S if self._stall_timeout_s is None else self._stall_timeout_s

    def _end_error(self, exc: ConnectionClosed) -> SessionError | None:
        """Why the stream ended: unanswered pings (stalled), or what the server's close means."""
        if self._closing:
            return None
        sent = exc.sent
        if exc.rcvd is None and sent is not None and sent.reason == KEEPALIVE_TIMEOUT:
            return Disconnected(
                f"server answered no ping for {self._stall_s:.1f} s (stalled)", reason="stalled"
            )
        return _server_fault(exc) or self.closed_error(exc)

    @abstractmethod
    def parse(self, message: str | bytes, arrival: float) -> list[ClientEvent]:
        """Events in one message; raises SessionError (a ProtocolError for a malformed one)."""

    def closed_error(self, exc: ConnectionClosed) -> SessionError | None:
        """What the server closing the connection means; None for a normal end."""
        if exc.rcvd is not None and exc.rcvd.code == 1000:
            return None
        return Disconnected(f"server closed the connection: {close_text(exc)}")

    async def events(self) -> AsyncIterator[ClientEvent]:
        ws = self._connected()
        for said in self._take_said():
            yield said
        while True:
            try:
                message = await ws.recv(decode=self.decode_text)
            except ConnectionClosed as exc:
                error = self._end_error(exc)
                if error is not None:
                    yield ErrorEvent(error, self.clock(), fatal=True)
                return
            except SessionError as exc:
                yield ErrorEvent(exc, ws.last_arrival, fatal=True)
                return
            self.bytes_received += message_size(message)
            try:
                events = self.parse(message, ws.last_arrival)
            except SessionError as exc:
                yield ErrorEvent(exc, ws.last_arrival, fatal=True)
                return
            for event in events:
                yield event

    def poll_events(self) -> tuple[list[ClientEvent], bool]:
        ws = self._connected()
        events: list[ClientEvent] = self._take_said()
        try:
            while batch := ws.take(self.decode_text):
                for message, size, arrival in batch:
                    self.bytes_received += size
                    try:
                        events += self.parse(message, arrival)
                    except SessionError as exc:
                        events.append(ErrorEvent(exc, arrival, fatal=True))
                        return events, True
        except SessionError as exc:  # a message that could not be decoded: when it was read
            events.append(ErrorEvent(exc, ws.last_arrival, fatal=True))
            return events, True
        if not ws.finished:
            return events, False
        error = self._end_error(ws.close_exc)
        if error is not None:
            events.append(ErrorEvent(error, self.clock(), fatal=True))
        return events, True

    def _take_said(self) -> list[ClientEvent]:
        """The headers' limits, once, stamped when taken: they are no message the session was
        slow to read."""
        said, self._said = self._said, ()
        return [RateLimits(said, self.clock(), "x-ratelimit headers")] if said else []

    async def aclose(self) -> None:
        if self._ws is not None:
            self._closing = True
            await self._ws.close()

    async def send_message(self, message: str | bytes) -> None:
        """One whole message to the server, counted in ``bytes_sent``: every client sends
        through here. A connection closed under it raises ``closed_while_sending`` (a
        ProtocolError where it was closed for what the server sent)."""
        try:
            await self._connected().send(message)
        except ConnectionClosed as exc:
            raise (_server_fault(exc) or self.closed_while_sending(exc)) from None
        self.bytes_sent += message_size(message)

    def closed_while_sending(self, exc: ConnectionClosed) -> SessionError:
        """The error for a send that found the connection closed."""
        return Disconnected(f"connection closed while sending: {close_text(exc)}")

    def _connected(self) -> WsConnection:
        if self._ws is None:
            raise RuntimeError(f"{type(self).__name__}: call connect() first")
        return self._ws

    def _redact(self, text: str) -> str:
        return redact(text, (self.config.api_key,))
