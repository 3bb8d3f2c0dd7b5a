"""I/O pieces every WebSocket fake server shares: a handle to a running server, a serve() that
applies handshake faults, and an outbox that adds the ``extra_latency_s`` fault.

Fakes bind 127.0.0.1 by default: they exist for tests and demos, not for the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import Any, Protocol

from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.fakekit.serveractions import Action, Burst, Close, Send, Stall
from duplexsim.clients.transport.wsconn import WsConnection
from duplexsim.clients.transport.wsopen import RequestCheck, serve
from duplexsim.core.errors import ProtocolError

__all__ = [
    "Conversation",
    "DelayedOutbox",
    "RunningServer",
    "Untimed",
    "carry_out",
    "converse",
    "serve_session",
    "serve_websockets",
]

Data = str | bytes
_log = logging.getLogger("duplexsim.fakes")
MAX_MESSAGE = 2**22


class RunningServer:
    """A fake server listening on ``url``; close it with ``aclose`` or ``async with``."""

    def __init__(self, host: str, port: int, url: str, close: Callable[[], Awaitable[None]]):
        self.host = host
        self.port = port
        self.url = url
        self._close = close
        self._closed = False

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._close()

    async def __aenter__(self) -> RunningServer:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"RunningServer({self.url})"


async def serve_websockets(
    handler: Callable[[WsConnection], Awaitable[None]],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Faults | None = None,
    path: str = "",
    check: RequestCheck | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> RunningServer:
    """Start a WebSocket server whose handshakes go through ``faults.admit``, then ``check``
    (which may refuse one with a Response); wss:// with ``ssl_context`` (SDKs that insist on
    TLS, as python-genai's live client does, can then be pointed at a fake)."""
    faults = faults or Faults()

    def process_request(connection: WsConnection, request: Request) -> Response | None:
        rejection = faults.admit()
        if rejection is None:
            return check(connection, request) if check is not None else None
        response = connection.respond(rejection.status, rejection.body)
        response.headers.update(Headers(rejection.headers))
        return response

    # close_timeout is short because a stalled connection never answers a close
    server = await serve(
        handler,
        host,
        port,
        check=process_request,
        close_timeout=1.0,
        max_size=MAX_MESSAGE,
        ssl_context=ssl_context,
    )
    shown = f"[{host}]" if ":" in host else host
    url = f"{'wss' if ssl_context else 'ws'}://{shown}:{server.port}{path}"
    return RunningServer(host, server.port, url, server.aclose)


class DelayedOutbox:
    """Sends messages in order, each ``delay_s`` after it was queued (the one place a fake uses
    wall time). With no delay it sends at once."""

    def __init__(self, connection: WsConnection, delay_s: float = 0.0) -> None:
        self._connection = connection
        self._send = connection.send
        self._delay_s = delay_s
        self._queue: asyncio.Queue[tuple[float, Data]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def send(self, message: Data) -> None:
        if self._delay_s <= 0:
            await self._send(message)
            return
        loop = asyncio.get_running_loop()
        self._queue.put_nowait((loop.time() + self._delay_s, message))
        if self._task is None:
            self._task = loop.create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(ConnectionClosed):
            while True:
                due, message = await self._queue.get()
                await asyncio.sleep(max(0.0, due - loop.time()))
                await self._send(message)

    def write_now(self, actions: list[Action]) -> list[Action]:
        """Write the leading plain sends at once, where no latency is injected and nothing is
        queued; the actions left over (a close, a stall, a send that must wait) are returned."""
        if self._delay_s > 0 or not self._queue.empty():
            return actions
        for i, action in enumerate(actions):
            if not (isinstance(action, Send) and self._connection.try_write(action.message)):
                return actions[i:]
        return []

    def cancel(self) -> None:
        """Drop whatever is still queued."""
        if self._task is not None:
            self._task.cancel()
            self._task = None


class Conversation(Protocol):
    """A fake server's pure protocol object as ``converse`` drives it: client messages in, with
    their arrival times; ``tick`` at ``wake_at`` for what the wall clock makes due (a reply
    generated on while the client sends nothing)."""

    def receive(self, message: Data, now: float | None = None) -> list[Action]: ...

    def tick(self, now: float) -> list[Action]: ...

    def wake_at(self) -> float | None: ...


class Untimed:
    """A protocol paced by its input alone (Moshi's servers make one frame per frame heard)."""

    def __init__(self, receive: Callable[[Data], list[Action]]) -> None:
        self._receive = receive

    def receive(self, message: Data, now: float | None = None) -> list[Action]:
        return self._receive(message)

    def tick(self, now: float) -> list[Action]:
        return []

    def wake_at(self) -> float | None:
        return None


async def converse(ws: WsConnection, conversation: Conversation, outbox: DelayedOutbox) -> None:
    """Answer each client message with the actions the conversation makes of it, in order, until
    one finishes the connection; between messages, tick it when its wall clock says so. Plain
    sends are written where the message was read (no task wakes per message); anything else (a
    close, a stall, injected latency) is carried out here."""
    loop = asyncio.get_running_loop()
    backlog: deque[list[Action]] = deque()
    wake = asyncio.Event()
    timer: asyncio.TimerHandle | None = None

    def dispatch() -> None:
        try:
            while batch := ws.take():
                for message, _, arrival in batch:
                    handle(conversation.receive, message, arrival)
        except ProtocolError as exc:
            backlog.append([Close(1007, exc.message)])
        arm()
        if backlog or ws.finished:
            wake.set()

    def handle(make: Callable[..., list[Action]], *args: Any) -> None:
        try:
            actions = make(*args)
        except Exception:  # a bug in a fake: close as a server would, say why in the log
            _log.exception("fake server failed on a message")
            actions = [Close(1011, "internal error")]
        # while anything waits in the backlog (or is being carried out from it), later answers
        # queue behind it: they must never overtake
        left = actions if backlog else outbox.write_now(actions)
        if left:
            backlog.append(left)

    def arm(soonest: float = 0.0) -> None:
        # one timer at a time, moved only earlier: while input flows the wake-up lies a lapse
        # ahead and fires early at most once per lapse (no timer churn per message)
        nonlocal timer
        at = conversation.wake_at()
        if at is None or (timer is not None and timer.when() <= at):
            return
        if timer is not None:
            timer.cancel()
        timer = loop.call_at(max(at, soonest), on_timer)

    def on_timer() -> None:
        nonlocal timer
        timer = None
        now = loop.time()
        handle(conversation.tick, now)
        arm(now + 0.001)  # never spin: a tick that made nothing due waits a little
        if backlog:
            wake.set()

    ws.on_arrival = dispatch
    try:
        dispatch()  # what came before this handler ran
        while True:
            while backlog:
                if await carry_out(ws, backlog[0], outbox):
                    return
                backlog.popleft()  # only now: dispatch queues behind it until it is done
            if ws.finished:
                return
            wake.clear()
            await wake.wait()
    finally:
        ws.on_arrival = None
        if timer is not None:
            timer.cancel()


async def serve_session(
    ws: WsConnection, opening: Iterable[Action], conversation: Conversation, faults: Faults
) -> None:
    """One connection, start to finish: the protocol's opening actions, then ``converse`` until
    either side ends it, every message delayed by ``faults.extra_latency_s``. A client that
    drops the connection is no error here: the handler just returns."""
    outbox = DelayedOutbox(ws, faults.extra_latency_s)
    try:
        with contextlib.suppress(ConnectionClosed):
            if await carry_out(ws, opening, outbox):
                return
            await converse(ws, conversation, outbox)
    finally:
        outbox.cancel()


async def carry_out(ws: WsConnection, actions: Iterable[Action], outbox: DelayedOutbox) -> bool:
    """Carry out a protocol object's actions; True once the connection is finished with
    (closed, or stalled on purpose)."""
    for action in actions:
        if isinstance(action, Send):
            await outbox.send(action.message)
        elif isinstance(action, Burst):
            for message in action.messages:
                await outbox.send(message)
        elif isinstance(action, Close):
            outbox.cancel()
            await ws.close(action.code, action.reason)  # reads (and drops) what still comes
            return True
        elif isinstance(action, Stall):
            outbox.cancel()
            ws.pause_reading()  # not reading: the client's frames back up unanswered
            await ws.wait_closed()
            return True
    return False
