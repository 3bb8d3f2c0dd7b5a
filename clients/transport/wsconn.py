"""One WebSocket connection: websockets' sans-I/O protocol over our own asyncio protocol.

websockets' ``ClientProtocol``/``ServerProtocol`` parse and build frames and run the opening and
closing handshakes; this shell only moves bytes (as websockets' docs describe for integrations),
so it relies on the library's public API alone. What it adds for sessions that carry tens of
thousands of audio frames a second:

- Reads land in one buffer per thread, copied out at once (asyncio's plain read allocates 256 KiB
  per read; at thousands of small reads a second that fragments the heap).
- Each message is stamped with the time its last bytes were read and kept in a bounded inbox
  (``duplexsim.clients.transport.wsinbox``): ``take`` drains it without waiting, ``on_arrival`` lets a server answer
  where a message was read, ``recv`` waits for the next one. A full inbox stops reading.
- ``try_write`` hands a whole message to the transport at once, with no task switch or drain per
  message, whenever writing is not paused; ``send`` waits for the drain when it is.
- Keepalive pings: every ``ping_interval``; one unanswered for ``ping_timeout`` fails the
  connection with 1011 "keepalive ping timeout", as websockets' own connections do.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.frames import DATA_OPCODES, Frame, Opcode
from websockets.http11 import Request, Response
from websockets.protocol import Protocol, State
from websockets.server import ServerProtocol

from duplexsim.clients.transport.wsinbox import HIGH_WATER, Inbox, Message, decoded
from duplexsim.core.errors import ProtocolError

__all__ = ["KEEPALIVE_TIMEOUT", "READ_BUFFER", "WsConnection"]

READ_BUFFER = 256 * 1024  # bytes taken from the socket per read at most (asyncio's own limit)
KEEPALIVE_TIMEOUT = "keepalive ping timeout"  # the close reason, as websockets words it
_read_buffers = threading.local()


def _read_buffer() -> memoryview:
    buffer: memoryview | None = getattr(_read_buffers, "view", None)
    if buffer is None:
        buffer = _read_buffers.view = memoryview(bytearray(READ_BUFFER))
    return buffer


class WsConnection(asyncio.BufferedProtocol):
    """Either side; ``clock`` stamps reads (default: the loop's clock)."""

    def __init__(
        self,
        protocol: Protocol,
        *,
        clock: Callable[[], float] | None = None,
        close_timeout: float = 2.0,
        ping_interval: float | None = None,
        ping_timeout: float | None = None,
        inbox_high: int = HIGH_WATER,
    ) -> None:
        self.protocol = protocol
        self.loop = asyncio.get_running_loop()
        self._clock = clock or self.loop.time
        self.close_timeout = close_timeout
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.transport: asyncio.Transport | None = None
        self.request: Request | None = None  # the upgrade request (server side)
        self.response: Response | None = None  # the upgrade response (client side)
        self.on_request: Callable[[WsConnection, Request], None] | None = None  # server hook
        self.on_arrival: Callable[[], None] | None = None  # called where a message was read
        self.last_arrival = 0.0  # when the message recv() last returned (or refused) was read
        self._inbox = Inbox(inbox_high)
        self._read_at = 0.0
        self._reading_paused = False  # the inbox is full
        self._held = False  # reading stopped on purpose (``pause_reading``)
        self._writing_paused = False
        self._drains: list[asyncio.Future[None]] = []
        self._waiter: asyncio.Future[None] | None = None
        self.opened: asyncio.Future[None] = self.loop.create_future()  # handshake answered
        self._lost: asyncio.Future[None] = self.loop.create_future()
        # one of each at a time: the next ping, the wait for its pong, the cut-off after a close
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._unanswered: float | None = None  # when the oldest ping not answered was sent
        self._heard = False  # bytes came in since the oldest unanswered ping was sent
        self._closing = False  # the TCP connection is due to close
        self._discarding = False  # ``close`` was called: what still comes is not kept

    # --- asyncio protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return _read_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        # copied before anything else runs: the buffer serves every connection of this thread
        self._read_at = self._clock()
        self._heard = True
        self.protocol.receive_data(bytes(_read_buffer()[:nbytes]))
        self._process()

    def eof_received(self) -> bool | None:
        self.protocol.receive_eof()
        self._process()
        return None  # the transport closes itself: nothing is written after the peer's EOF

    def connection_lost(self, exc: Exception | None) -> None:
        self.protocol.receive_eof()  # idempotent: the state is now CLOSED
        for timer in self._timers.values():
            timer.cancel()
        if not self.opened.done():
            self.opened.set_exception(ConnectionError("connection lost during the handshake"))
            self.opened.exception()  # retrieved here: nobody may be waiting any more
        self._lost.set_result(None)
        self._writing_paused = False
        self._release_drains()
        self._wake()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._release_drains()

    # --- events ----------------------------------------------------------------------------

    def _process(self) -> None:
        events = self.protocol.events_received()
        self.flush()  # the protocol's own answers: pongs, the close reply
        new = False
        for event in events:
            if isinstance(event, Frame):
                new = self._frame(event) or new
            elif isinstance(event, Request):
                self.request = event
                if self.on_request is not None:
                    self.on_request(self, event)
            elif isinstance(event, Response):
                self.response = event
                if not self.opened.done():
                    self.opened.set_result(None)
        if new:
            self._wake()
        if self._inbox.full and not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()

    def _frame(self, frame: Frame) -> bool:
        if frame.opcode is Opcode.PONG:
            self._unanswered = None
        if frame.opcode not in DATA_OPCODES or self._discarding:
            return False  # control frames are websockets'; ``close`` no longer reads data
        return self._inbox.add(frame, self._read_at)

    def _wake(self) -> None:
        if self.on_arrival is not None:
            self.on_arrival()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # --- receiving -------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """Closed, and every message received has been taken."""
        return not self._inbox and self.protocol.state is State.CLOSED

    @property
    def close_exc(self) -> ConnectionClosed:
        """Why the connection closed (only once it has)."""
        return self.protocol.close_exc

    def take(self, decode: bool | None = None) -> list[tuple[Message, int, float]]:
        """The messages received so far: (message, size in bytes, arrival). ``decode`` as in
        ``recv``. A text message that is not UTF-8 stops the batch before it; the next call
        raises ProtocolError for it (so the messages before it are never lost), with
        ``last_arrival`` set to the time it was read."""
        taken: list[tuple[Message, int, float]] = []
        try:
            while self._inbox:
                data, text, arrival = self._inbox.peek()
                try:
                    message = decoded(data, text, decode)
                except ProtocolError:
                    if taken:
                        return taken
                    self._inbox.pop()
                    self.last_arrival = arrival
                    raise
                self._inbox.pop()
                taken.append((message, len(data), arrival))
            return taken
        finally:
            self._maybe_resume()

    async def recv(self, decode: bool | None = None) -> Any:
        """The next message; raises ConnectionClosed once closed and drained."""
        if self._waiter is not None:
            raise RuntimeError("another coroutine is already waiting for the next message")
        while not self._inbox:
            if self.protocol.state is State.CLOSED:
                raise self.close_exc
            self._waiter = self.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        data, text, self.last_arrival = self._inbox.pop()
        self._maybe_resume()
        return decoded(data, text, decode)

    def pause_reading(self) -> None:
        """Stop reading on purpose: the peer's frames back up unanswered (a stalled server)."""
        self._held = True
        if self.transport is not None:
            self.transport.pause_reading()

    def _maybe_resume(self) -> None:
        if self._reading_paused and self._inbox.drained and self.transport is not None:
            self._reading_paused = False
            if not self._held:
                self.transport.resume_reading()

    # --- sending ---------------------------------------------------------------------------

    def try_write(self, message: str | bytes) -> bool:
        """Write one whole message at once if nothing stands in its way; False if something
        does (then ``send`` must carry it)."""
        if self._writing_paused or self.protocol.state is not State.OPEN:
            return False
        if isinstance(message, str):
            self.protocol.send_text(message.encode())
        else:
            self.protocol.send_binary(message)
        self.flush()
        return True

    async def send(self, message: str | bytes) -> None:
        """One whole message; raises ConnectionClosed (once closed) if the connection is not
        open."""
        while not self.try_write(message):
            if self.protocol.state is not State.OPEN:
                await self.wait_closed()
                raise self.close_exc
            drained = self.loop.create_future()
            self._drains.append(drained)
            await drained

    def _release_drains(self) -> None:
        drains, self._drains = self._drains, []
        for drained in drains:
            if not drained.done():
                drained.set_result(None)

    def flush(self) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            self.protocol.data_to_send()  # nowhere to go
            return
        for data in self.protocol.data_to_send():
            if data:
                transport.write(data)
            elif transport.can_write_eof():
                transport.write_eof()
            else:
                transport.close()
        if self.protocol.close_expected() and not self._closing:
            # the peer closes TCP after the closing handshake; one that never does is cut off
            self._closing = True
            self._timers["close"] = self.loop.call_later(self.close_timeout, self._abort)

    def _abort(self) -> None:
        if self.transport is not None and not self._lost.done():
            self.transport.abort()

    # --- keepalive and closing -------------------------------------------------------------

    def start_keepalive(self) -> None:
        if self.ping_interval is not None:
            self._timers["ping"] = self.loop.call_later(self.ping_interval, self._ping)

    def _ping(self) -> None:
        if self.protocol.state is not State.OPEN:
            return
        self.protocol.send_ping(os.urandom(4))
        self.flush()
        if self._unanswered is None:
            self._unanswered = self.loop.time()
            self._heard = False
            if self.ping_timeout is not None and "pong" not in self._timers:
                due = self._unanswered + self.ping_timeout
                self._timers["pong"] = self.loop.call_at(due, self._pong_due)
        assert self.ping_interval is not None
        self._timers["ping"] = self.loop.call_later(self.ping_interval, self._ping)

    def _pong_due(self) -> None:
        """The oldest ping not answered has had ``ping_timeout``: fail; or check again when the
        one now oldest will have had it (a pong answers every ping sent before it)."""
        del self._timers["pong"]
        if self._unanswered is None or self.protocol.state is not State.OPEN:
            return
        assert self.ping_timeout is not None
        if self._heard:
            # the peer kept sending (its pong may sit behind a flood we have not read yet): it is
            # alive; a flood is for the reader to judge, not a stall
            self._unanswered, self._heard = self.loop.time(), False
        due = self._unanswered + self.ping_timeout
        if self.loop.time() < due:
            self._timers["pong"] = self.loop.call_at(due, self._pong_due)
            return
        self.protocol.fail(1011, KEEPALIVE_TIMEOUT)
        self.flush()
        self._abort()  # the peer answers nothing: no closing handshake to wait for

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """The closing handshake, within ``close_timeout``; then the connection is closed."""
        self._discarding = True  # a full inbox must not hide the peer's close reply
        if self.protocol.state is State.OPEN:
            self.protocol.send_close(code, reason)
            self.flush()
        if self._reading_paused and not self._held and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()
        try:
            await asyncio.wait_for(asyncio.shield(self._lost), self.close_timeout)
        except TimeoutError:
            self._abort()
            await asyncio.shield(self._lost)

    async def wait_closed(self) -> None:
        await asyncio.shield(self._lost)

    def respond(self, status: int, text: str) -> Response:
        """An HTTP answer instead of the upgrade (server side, from a request check)."""
        if not isinstance(self.protocol, ServerProtocol):
            raise TypeError("only a server connection can respond")
        return self.protocol.reject(status, text)
