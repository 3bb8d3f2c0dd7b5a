"""WebSocket connections whose received messages wait in an inbox, stamped when read.

websockets queues each message for a task that awaits ``recv()``: one task wake per message.
At tens of thousands of audio frames a second that is much of a frame's cost, and a stamp taken
when the task gets to a message adds the parsing of every earlier one to its arrival. Here each
message is stamped with the time its last bytes were read and kept in an inbox: ``take`` drains
it without waiting (a session does once per frame), ``on_arrival`` lets a server answer it where
it was read, and ``recv`` still waits for the next one.

Bytes are read into one buffer per thread, and copied out at once. asyncio's plain read allocates
256 KiB for every read and shrinks it to what came; at thousands of small reads a second that
fragments the heap (resident memory grew about 4 MB/s at 200 sessions).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.connection import Connection
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConcurrencyError
from websockets.frames import DATA_OPCODES, Frame, Opcode
from websockets.protocol import State

from simulator.core.errors import ProtocolError

__all__ = ["InboxConnection", "InboxServerConnection", "StampedConnection"]

Message = str | bytes
READ_BUFFER = 256 * 1024  # bytes taken from the socket per read at most (asyncio's own limit)
_read_buffers = threading.local()


def _read_buffer() -> memoryview:
    buffer: memoryview | None = getattr(_read_buffers, "view", None)
    if buffer is None:
        buffer = _read_buffers.view = memoryview(bytearray(READ_BUFFER))
    return buffer


class InboxConnection(Connection, asyncio.BufferedProtocol):
    """The inbox, for either side; ``clock`` stamps reads (default: the loop's clock)."""

    def __init__(self, *args: Any, clock: Callable[[], float] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._clock = clock or self.loop.time
        self._read_at = 0.0
        self._inbox: deque[tuple[bytes, bool, float]] = deque()  # payload, is text, arrival
        self._fragments: list[Frame] = []
        self._waiter: asyncio.Future[None] | None = None
        self.last_arrival = 0.0  # when the message recv() last returned (or refused) was read
        self.on_arrival: Callable[[], None] | None = None  # called where a message was read

    def get_buffer(self, sizehint: int) -> memoryview:
        return _read_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        # copied before anything else runs: the buffer serves every connection of this thread
        self.data_received(bytes(_read_buffer()[:nbytes]))

    def data_received(self, data: bytes) -> None:
        self._read_at = self._clock()
        super().data_received(data)

    def process_event(self, event: Any) -> None:
        if not (isinstance(event, Frame) and event.opcode in DATA_OPCODES):
            super().process_event(event)  # the handshake and control frames: websockets'
            return
        self._fragments.append(event)
        if not event.fin:
            return
        frames, self._fragments = self._fragments, []
        data = bytes(frames[0].data) if len(frames) == 1 else b"".join(f.data for f in frames)
        self._inbox.append((data, frames[0].opcode is Opcode.TEXT, self._read_at))
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._wake()

    @property
    def finished(self) -> bool:
        """Closed, and every message received has been taken."""
        return not self._inbox and self.protocol.state is State.CLOSED

    def take(self, decode: bool | None = None) -> list[tuple[Message, int, float]]:
        """The messages received so far: (message, size in bytes, arrival). ``decode`` as in
        ``recv``. A text message that is not UTF-8 stops the batch before it; the next call
        raises ProtocolError for it (so the messages before it are never lost), with
        ``last_arrival`` set to the time it was read."""
        taken: list[tuple[Message, int, float]] = []
        while self._inbox:
            data, text, arrival = self._inbox[0]
            try:
                message = _decoded(data, text, decode)
            except ProtocolError:
                if taken:
                    return taken
                self._inbox.popleft()
                self.last_arrival = arrival
                raise
            self._inbox.popleft()
            taken.append((message, len(data), arrival))
        return taken

    async def recv(self, decode: bool | None = None) -> Any:
        if self._waiter is not None:
            raise ConcurrencyError("another coroutine is already waiting for the next message")
        while not self._inbox:
            if self.protocol.state is State.CLOSED:
                raise self.protocol.close_exc
            self._waiter = self.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        data, text, self.last_arrival = self._inbox.popleft()
        return _decoded(data, text, decode)

    def _wake(self) -> None:
        if self.on_arrival is not None:
            self.on_arrival()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class StampedConnection(InboxConnection, ClientConnection):
    """A client connection with an inbox."""


class InboxServerConnection(InboxConnection, ServerConnection):
    """A server connection with an inbox."""


def _decoded(data: bytes, text: bool, decode: bool | None) -> Message:
    """A message as ``recv(decode)`` returns it: None keeps text as str and binary as bytes."""
    if not (text if decode is None else decode):
        return data
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise ProtocolError("a text message is not valid UTF-8") from None
