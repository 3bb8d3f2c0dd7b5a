"""The kit's WebSocket transport: serves a ``WebSocketFake``, each connection one session of
its pure protocol object, and adds the ``extra_latency_s`` fault to everything sent.

Fakes bind 127.0.0.1 by default: they exist for tests and demos, not for the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request as HttpRequest
from websockets.http11 import Response
from websockets.server import ServerProtocol

from duplexsim.clients.fakekit.declare import Conversation, Request, Untimed, WebSocketFake
from duplexsim.clients.fakekit.fakeserver import RunningServer
from duplexsim.clients.fakekit.faults import Faults, Rejection
from duplexsim.clients.fakekit.serveractions import Action, Burst, Close, Send, Stall
from duplexsim.clients.fakekit.ticker import Ticker
from duplexsim.clients.transport.wsconn import WsConnection
from duplexsim.clients.transport.wsopen import serve
from duplexsim.core.errors import ProtocolError

__all__ = [
    "Conversation",
    "DelayedOutbox",
    "Untimed",
    "carry_out",
    "converse",
    "serve_session",
    "serve_websocket_fake",
    "serve_websockets",
]

Data = str | bytes
_log = logging.getLogger("duplexsim.fakes")
MAX_MESSAGE = 2**22


async def serve_websocket_fake(
    fake: WebSocketFake,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Faults,
    ssl_context: ssl.SSLContext | None = None,
) -> RunningServer:
    """Serve ``fake``: each upgrade ``fake.refuse`` lets through is a session of what
    ``fake.accept`` makes of it."""
    lock = asyncio.Lock() if fake.exclusive else None

    async def handler(ws: WsConnection) -> None:
        assert ws.request is not None
        session = fake.accept(_request(ws.request))
        try:
            if not session.takes_turn:
                await serve_session(ws, session.opening, session.conversation, faults)
                return
            async with lock or contextlib.nullcontext():
                if fake.opening_delay_s > 0:
                    await asyncio.sleep(fake.opening_delay_s)
                await serve_session(ws, session.opening, session.conversation, faults)
        finally:
            session.ended()

    def refuse(request: Request) -> Rejection | None:
        return fake.refuse(request, faults)

    return await serve_websockets(
        handler,
        host=host,
        port=port,
        refuse=refuse,
        path=fake.path,
        ssl_context=ssl_context,
        accepted_headers=faults.limit_headers,
    )


async def serve_websockets(
    handler: Callable[[WsConnection], Awaitable[None]],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    refuse: Callable[[Request], Rejection | None] | None = None,
    path: str = "",
    ssl_context: ssl.SSLContext | None = None,
    accepted_headers: Callable[[], dict[str, str]] | None = None,
) -> RunningServer:
    """Start a WebSocket server whose handshakes ``refuse`` may answer with an HTTP rejection;
    wss:// with ``ssl_context`` (SDKs that insist on TLS, as python-genai's live client does,
    can then be pointed at a fake). ``accepted_headers`` go on every upgrade it accepts (a rate
    limit's ``x-ratelimit-*``)."""

    def check(connection: WsConnection, request: HttpRequest) -> Response | None:
        rejection = refuse(_request(request)) if refuse is not None else None
        if rejection is not None:
            return _response(connection, rejection)
        headers = accepted_headers() if accepted_headers is not None else {}
        if not headers:
            return None
        assert isinstance(connection.protocol, ServerProtocol)
        response = connection.protocol.accept(request)
        for name, value in headers.items():
            response.headers[name] = value
        return response

    # close_timeout is short because a stalled connection never answers a close
    server = await serve(
        handler,
        host,
        port,
        check=check,
        close_timeout=1.0,
        max_size=MAX_MESSAGE,
        ssl_context=ssl_context,
    )
    shown = f"[{host}]" if ":" in host else host
    url = f"{'wss' if ssl_context else 'ws'}://{shown}:{server.port}{path}"
    return RunningServer(host, server.port, url, server.aclose)


def _request(request: HttpRequest) -> Request:
    return Request("GET", request.path, request.headers)


def _response(connection: WsConnection, rejection: Rejection) -> Response:
    """The HTTP answer in place of the upgrade; the rejection's headers replace the defaults."""
    response = connection.respond(rejection.status, rejection.body)
    for name, value in rejection.headers.items():
        if name in response.headers:
            del response.headers[name]
        response.headers[name] = value
    return response


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


async def converse(ws: WsConnection, conversation: Conversation, outbox: DelayedOutbox) -> None:
    """Answer each client message with the actions the conversation makes of it, in order, until
    one finishes the connection; between messages, tick it when its wall clock says so. Plain
    sends are written where the message was read (no task wakes per message); anything else (a
    close, a stall, injected latency) is carried out here."""
    backlog: deque[list[Action]] = deque()
    wake = asyncio.Event()

    def dispatch() -> None:
        try:
            while batch := ws.take():
                for message, _, arrival in batch:
                    handle(conversation.receive, message, arrival)
        except ProtocolError as exc:
            backlog.append([Close(1007, exc.message)])
        ticker.arm()
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

    def on_tick(now: float) -> None:
        handle(conversation.tick, now)
        if backlog:
            wake.set()

    ticker = Ticker(conversation, on_tick)
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
        ticker.cancel()


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
