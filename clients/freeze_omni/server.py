"""The Freeze-Omni fake server: a thin asyncio shell that moves frames to and from ServerProtocol.

It listens at ``/socket.io/`` for Engine.IO 4 WebSocket connections, so python-socketio's own
client connects to it as it would to the demo server. ``max_users`` answers connections past
that many open ones with ``too_many_users``, as the demo server's ``--max_users`` does.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable

from websockets.exceptions import ConnectionClosed

from clients.behaviours import Behaviour
from clients.fakeserver import (
    DelayedOutbox,
    RunningServer,
    Untimed,
    carry_out,
    converse,
    serve_websockets,
)
from clients.faults import Faults
from clients.freeze_omni.fake import PATH, ServerProtocol
from clients.wsconn import WsConnection

__all__ = ["start_server"]


async def start_server(
    behaviour_factory: Callable[[int], Behaviour],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Faults | None = None,
    max_users: int | None = None,
    ping_interval_s: float = 25.0,
    ping_timeout_s: float = 20.0,
) -> RunningServer:
    """Serve Freeze-Omni's events; each connection gets a fresh 16 kHz behaviour."""
    faults = faults or Faults()
    ids = itertools.count(1)
    users = 0

    async def handler(ws: WsConnection) -> None:
        nonlocal users
        full = max_users is not None and users >= max_users
        users += 0 if full else 1
        protocol = ServerProtocol(
            behaviour_factory,
            faults,
            sid=f"freeze-omni-{next(ids)}",
            full=full,
            ping_interval_s=ping_interval_s,
            ping_timeout_s=ping_timeout_s,
        )
        outbox = DelayedOutbox(ws, faults.extra_latency_s)
        try:
            with contextlib.suppress(ConnectionClosed):
                assert ws.request is not None
                if await carry_out(ws, protocol.open(ws.request.path), outbox):
                    return
                await converse(ws, Untimed(protocol.receive), outbox)
        finally:
            outbox.cancel()
            users -= 0 if full else 1

    return await serve_websockets(handler, host=host, port=port, faults=faults, path=PATH)
