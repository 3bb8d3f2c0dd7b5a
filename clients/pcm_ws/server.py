"""The pcm-ws fake server: a thin asyncio shell that moves frames to and from ServerProtocol."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.fakeserver import RunningServer, serve_session, serve_websockets
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.pcm_ws.protocol import ServerProtocol
from duplexsim.clients.transport.wsconn import WsConnection

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

    async def handler(ws: WsConnection) -> None:
        protocol = ServerProtocol(behaviour_factory, faults, session_id=f"pcm-ws-{next(ids)}")
        await serve_session(ws, (), protocol, faults)

    return await serve_websockets(handler, host=host, port=port, faults=faults)
