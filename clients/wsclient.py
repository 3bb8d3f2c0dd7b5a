"""The asyncio shell every WebSocket client shares: the receive loop, closing, key redaction.

A subclass opens ``self._ws`` in ``connect()`` and turns each message into events in ``parse``;
its protocol object stays sans-I/O.
"""

from __future__ import annotations

import functools
from abc import abstractmethod
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar, cast

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.frames import DATA_OPCODES, Frame
from websockets.http11 import Response
from websockets.protocol import State

from clients.base import ClientConfig, ClientEvent, DuplexClient, ErrorEvent
from simulator.core.errors import ConnectError, Disconnected, SessionError

__all__ = ["StampedConnection", "WebSocketClient", "close_text", "message_size"]


def message_size(message: str | bytes) -> int:
    return len(message.encode()) if isinstance(message, str) else len(message)


def close_text(exc: ConnectionClosed) -> str:
    frame = exc.rcvd or exc.sent
    if frame is None:
        return "no close frame (connection lost)"
    return f"code {frame.code}" + (f" ({frame.reason})" if frame.reason else "")


class StampedConnection(ClientConnection):
    """A connection that stamps each message with the time its last bytes were read.

    One socket read can carry many messages (a burst of audio deltas); stamping each when the
    receive loop gets to it would add the parsing of every earlier message to its arrival.
    """

    def __init__(self, *args: Any, clock: Callable[[], float], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clock = clock
        self._read_at = 0.0
        self.arrivals: deque[float] = deque()
        self.last_arrival = 0.0  # when the message recv() last returned was read

    def data_received(self, data: bytes) -> None:
        self._read_at = self._clock()
        super().data_received(data)

    def process_event(self, event: Any) -> None:
        super().process_event(event)
        if isinstance(event, Frame) and event.fin and event.opcode in DATA_OPCODES:
            self.arrivals.append(self._read_at)

    async def send_message(self, message: str | bytes) -> None:
        """``send`` for one whole message, written at once when nothing stands in its way (open,
        no fragmented send under way, writing not paused): the per-frame path of every session."""
        if self.send_in_progress is None and not self.paused and self.protocol.state is State.OPEN:
            if isinstance(message, str):
                self.protocol.send_text(message.encode())
            else:
                self.protocol.send_binary(message)
            self.send_data()
            return
        await self.send(message)

    async def recv(self, decode: bool | None = None) -> Any:
        message = await super().recv(decode)
        self.last_arrival = self.arrivals.popleft() if self.arrivals else self._clock()
        return message


class WebSocketClient(DuplexClient):
    decode_text: ClassVar[bool | None] = None  # passed to recv(): None = text as str
    max_message: ClassVar[int] = 2**22
    close_timeout_s: ClassVar[float] = 2.0  # the session is over: a silent peer is not waited on

    def __init__(self, config: ClientConfig) -> None:
        super().__init__(config)
        self._ws: ClientConnection | None = None
        self._closing = False

    def endpoint(self) -> str:
        """The WebSocket URL to open."""
        return self.config.url

    def auth_headers(self) -> dict[str, str] | None:
        """Headers carrying the key (the only place it ever goes)."""
        key = self.config.api_key
        return {"Authorization": f"Bearer {key}"} if key else None

    @abstractmethod
    def refused(self, response: Response) -> SessionError:
        """The error for an HTTP refusal of the upgrade (auth, rate limit, server error)."""

    @abstractmethod
    async def handshake(self, ws: ClientConnection) -> None:
        """The protocol's opening exchange, within ``config.connect_timeout_s``."""

    async def connect(self) -> None:
        url = self.endpoint()
        try:
            self._ws = await connect(
                url,
                compression=None,
                open_timeout=self.config.connect_timeout_s,
                close_timeout=self.close_timeout_s,
                max_size=self.max_message,
                max_queue=None,  # never push back on the server: that would skew arrival times
                additional_headers=self.auth_headers(),
                # websockets calls this as a factory; typed as a class only
                create_connection=cast(
                    "type[ClientConnection]",
                    functools.partial(StampedConnection, clock=self.config.clock),
                ),
            )
        except InvalidStatus as exc:
            raise self.refused(exc.response) from None
        except (OSError, TimeoutError, WebSocketException) as exc:
            reason = self._redact(str(exc) or type(exc).__name__)
            raise ConnectError(f"cannot connect to {self._redact(url)}: {reason}") from None
        try:
            await self.handshake(self._ws)
        except SessionError:
            await self.aclose()
            raise

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
        while True:
            try:
                message = await ws.recv(decode=self.decode_text)
            except ConnectionClosed as exc:
                error = None if self._closing else self.closed_error(exc)
                if error is not None:
                    yield ErrorEvent(error, self.config.clock(), fatal=True)
                return
            arrival = ws.last_arrival if isinstance(ws, StampedConnection) else self.config.clock()
            self.bytes_received += message_size(message)
            try:
                events = self.parse(message, arrival)
            except SessionError as exc:
                yield ErrorEvent(exc, arrival, fatal=True)
                return
            for event in events:
                yield event

    async def aclose(self) -> None:
        if self._ws is not None:
            self._closing = True
            await self._ws.close()

    async def send_message(self, message: str | bytes) -> None:
        """One whole message to the server (raises ConnectionClosed like ``send``)."""
        ws = self._connected()
        if isinstance(ws, StampedConnection):
            await ws.send_message(message)
        else:
            await ws.send(message)

    def _connected(self) -> ClientConnection:
        if self._ws is None:
            raise RuntimeError(f"{type(self).__name__}: call connect() first")
        return self._ws

    def _redact(self, text: str) -> str:
        key = self.config.api_key
        return text.replace(key, "***") if key else text
