"""Opening WebSocket connections both ways, on ``duplexsim.clients.transport.wsconn``: ``connect`` for clients,
``serve`` for fake servers. Only websockets' public sans-I/O API is used (``ClientProtocol``,
``ServerProtocol``, ``parse_uri``), so any websockets release in the declared range works alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping

from websockets.client import ClientProtocol
from websockets.http11 import USER_AGENT, Request, Response
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.uri import parse_uri

from duplexsim.clients.transport.wsconn import WsConnection

__all__ = ["WsServer", "connect", "serve"]

_log = logging.getLogger("duplexsim.websocket")
Handler = Callable[[WsConnection], Awaitable[None]]
RequestCheck = Callable[[WsConnection, Request], Response | None]


async def connect(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    open_timeout: float = 10.0,
    max_size: int | None = 2**20,
    ssl_context: ssl.SSLContext | None = None,
    **options: object,
) -> WsConnection:
    """An open client connection to ``url`` (ws:// or wss://). A refused upgrade raises
    websockets' InvalidStatus (with the server's response), a bad one InvalidHandshake; no
    answer within ``open_timeout`` raises TimeoutError. wss:// uses ``ssl_context`` (default:
    the system's trusted CAs). ``options`` go to WsConnection."""
    uri = parse_uri(url)
    protocol = ClientProtocol(uri, max_size=max_size)
    loop = asyncio.get_running_loop()
    context = (ssl_context or ssl.create_default_context()) if uri.secure else None
    connection: WsConnection | None = None
    try:
        async with asyncio.timeout(open_timeout):
            _, connection = await loop.create_connection(
                lambda: WsConnection(protocol, **options),  # type: ignore[arg-type]
                uri.host,
                uri.port,
                ssl=context,
                server_hostname=uri.host if context else None,
            )
            request = protocol.connect()
            request.headers["User-Agent"] = USER_AGENT
            for name, value in (headers or {}).items():
                request.headers[name] = value
            protocol.send_request(request)
            connection.flush()
            await connection.opened
    except BaseException:
        if connection is not None and connection.transport is not None:
            connection.transport.abort()
        raise
    if protocol.handshake_exc is not None:
        assert connection.transport is not None
        connection.transport.close()
        raise protocol.handshake_exc
    connection.start_keepalive()
    return connection


class WsServer:
    """A listening server; each upgraded connection runs ``handler`` and is closed after it."""

    def __init__(
        self,
        handler: Handler,
        check: RequestCheck | None,
        *,
        max_size: int | None,
        close_timeout: float,
    ) -> None:
        self._handler = handler
        self._check = check
        self._max_size = max_size
        self._close_timeout = close_timeout
        self._server: asyncio.Server | None = None
        self._open: dict[WsConnection, asyncio.Task[None]] = {}

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None) -> WsServer:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._connection, host, port, ssl=ssl_context)
        return self

    def _connection(self) -> WsConnection:
        protocol = ServerProtocol(max_size=self._max_size)
        connection = WsConnection(protocol, close_timeout=self._close_timeout)
        connection.on_request = self._upgrade
        return connection

    def _upgrade(self, connection: WsConnection, request: Request) -> None:
        protocol = connection.protocol
        assert isinstance(protocol, ServerProtocol)
        response = None
        if self._check is not None:
            try:
                response = self._check(connection, request)
            except Exception:
                _log.exception("request check failed")
                response = connection.respond(500, "Internal Server Error\n")
        protocol.send_response(response or protocol.accept(request))
        connection.flush()
        if protocol.state is not State.OPEN:
            assert connection.transport is not None
            connection.transport.close()  # after the refusal is written
            return
        task = asyncio.get_running_loop().create_task(self._run(connection))
        self._open[connection] = task

    async def _run(self, connection: WsConnection) -> None:
        code = 1000
        try:
            await self._handler(connection)
        except Exception:
            _log.exception("connection handler failed")
            code = 1011
        finally:
            self._open.pop(connection, None)
            await connection.close(code)

    async def aclose(self) -> None:
        """Stop listening, close every open connection (1001, going away), wait for them."""
        if self._server is not None:
            self._server.close()
        open_now = list(self._open.items())
        await asyncio.gather(*(c.close(1001) for c, _ in open_now), return_exceptions=True)
        for _, task in open_now:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            await self._server.wait_closed()


async def serve(
    handler: Handler,
    host: str,
    port: int,
    *,
    check: RequestCheck | None = None,
    max_size: int | None = 2**20,
    close_timeout: float = 1.0,
    ssl_context: ssl.SSLContext | None = None,
) -> WsServer:
    """Listen on ``host``:``port`` (TLS with ``ssl_context``); ``check`` may refuse an upgrade
    with a Response."""
    server = WsServer(handler, check, max_size=max_size, close_timeout=close_timeout)
    return await server.start(host, port, ssl_context)
