"""The asyncio shell every WebSocket client shares: the receive loop, closing, key redaction.

A subclass opens ``self._ws`` in ``connect()`` and turns each message into events in ``parse``;
its protocol object stays sans-I/O.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import AsyncIterator
from typing import ClassVar

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from clients.base import ClientConfig, ClientEvent, DuplexClient, ErrorEvent
from simulator.core.errors import Disconnected, SessionError

__all__ = ["WebSocketClient", "close_text", "message_size"]


def message_size(message: str | bytes) -> int:
    return len(message.encode()) if isinstance(message, str) else len(message)


def close_text(exc: ConnectionClosed) -> str:
    frame = exc.rcvd or exc.sent
    if frame is None:
        return "no close frame (connection lost)"
    return f"code {frame.code}" + (f" ({frame.reason})" if frame.reason else "")


class WebSocketClient(DuplexClient):
    decode_text: ClassVar[bool | None] = None  # passed to recv(): None = text as str

    def __init__(self, config: ClientConfig) -> None:
        super().__init__(config)
        self._ws: ClientConnection | None = None
        self._closing = False

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
            arrival = self.config.clock()
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

    def _connected(self) -> ClientConnection:
        if self._ws is None:
            raise RuntimeError(f"{type(self).__name__}: call connect() first")
        return self._ws

    def _redact(self, text: str) -> str:
        key = self.config.api_key
        return text.replace(key, "***") if key else text
