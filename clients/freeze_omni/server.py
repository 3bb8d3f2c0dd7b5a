"""The Freeze-Omni fake server: a thin asyncio shell that moves frames to and from ServerProtocol.

It listens at ``/socket.io/`` for Engine.IO 4 WebSocket connections, so python-socketio's own
client connects to it as it would to the demo server. ``max_users`` answers connections past
that many open ones with ``too_many_users``, as the demo server's ``--max_users`` does.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.fakeserver import (
    RunningServer,
    Untimed,
    serve_session,
    serve_websockets,
)
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.freeze_omni.fake import PATH, ServerProtocol
from duplexsim.clients.transport.wsconn import WsConnection

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
        try:
            assert ws.request is not None
            opening = protocol.open(ws.request.path)
            await serve_session(ws, opening, Untimed(protocol.receive), faults)
        finally:
            users -= 0 if full else 1

    return await serve_websockets(handler, host=host, port=port, faults=faults, path=PATH)
