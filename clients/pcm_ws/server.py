"""The pcm-ws fake server: ``fake.ServerProtocol`` served over WebSocket by the kit."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.declare import Request, Session, WebSocketFake
from duplexsim.clients.fakekit.fakeserver import RunningServer, serve_fake
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.pcm_ws.fake import ServerProtocol

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

    def accept(request: Request) -> Session:
        return Session(ServerProtocol(behaviour_factory, faults, session_id=f"pcm-ws-{next(ids)}"))

    return await serve_fake(WebSocketFake(accept), host=host, port=port, faults=faults)
