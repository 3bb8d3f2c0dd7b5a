"""The pcm-ws fake server: a thin asyncio shell that moves frames to and from ServerProtocol."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from clients.behaviours import Behaviour
from clients.fakeserver import DelayedOutbox, RunningServer, serve_websockets
from clients.faults import Faults
from clients.pcm_ws.protocol import Close, Send, ServerProtocol, Stall

__all__ = ["start_server"]


async def start_server(
    behaviour_factory: Callable[[int], Behaviour],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Faults | None = None,
) -> RunningServer:
    """Serve pcm-ws; each connection gets a fresh behaviour at the rate its hello asks for."""
    faults = faults or Faults()
    ids = itertools.count(1)

    async def handler(ws: ServerConnection) -> None:
        protocol = ServerProtocol(behaviour_factory, faults, session_id=f"pcm-ws-{next(ids)}")
        outbox = DelayedOutbox(ws.send, faults.extra_latency_s)
        try:
            with contextlib.suppress(ConnectionClosed):
                await _converse(ws, protocol, outbox)
        finally:
            outbox.cancel()

    return await serve_websockets(handler, host=host, port=port, faults=faults)


async def _converse(ws: ServerConnection, protocol: ServerProtocol, outbox: DelayedOutbox) -> None:
    async for message in ws:
        if isinstance(message, str):
            actions = protocol.receive_text(message)
        else:
            actions = protocol.receive_binary(message)
        for action in actions:
            if isinstance(action, Send):
                await outbox.send(action.message)
            elif isinstance(action, Close):
                outbox.cancel()
                await _close(ws, action)
                return
            elif isinstance(action, Stall):
                outbox.cancel()
                await ws.wait_closed()  # not reading: the client's frames back up unanswered
                return


async def _close(ws: ServerConnection, action: Close) -> None:
    # Unread frames can fill the receive buffer and pause reading, hiding the client's close
    # reply, so keep reading (and discarding) until the close handshake is done.
    closing = asyncio.create_task(ws.close(action.code, action.reason))
    with contextlib.suppress(ConnectionClosed):
        async for _ in ws:
            pass
    await closing
