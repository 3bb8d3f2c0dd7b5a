"""The EVI fake server: ``fake.ServerProtocol`` served over WebSocket by the kit.

It listens at ``/v0/evi/chat``, so the ``hume`` SDK connects to it when its environment's
``evi`` URL points here (``ws://127.0.0.1:PORT/v0/evi``). A handshake without a key (the
``X-Hume-Api-Key`` header, or ``api_key`` / ``access_token`` in the query; any key when the fake
is given none, that one otherwise) is refused with HTTP 401 (``fake.check_key``), which the SDK reports as
"Websocket initialized with invalid credentials".
"""

from __future__ import annotations

import functools
import itertools
import ssl
import time
from collections.abc import Callable

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.declare import Request, Session, WebSocketFake, faults_then
from duplexsim.clients.fakekit.fakeserver import RunningServer, serve_fake
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.hume_evi.fake import PATH, ServerProtocol, check_key

__all__ = ["start_server"]


async def start_server(
    behaviour_factory: Callable[[int], Behaviour],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Faults | None = None,
    api_key: str | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> RunningServer:
    """Serve EVI's chat; each connection gets a behaviour at the rate its settings name.
    ``ssl_context`` serves wss://."""
    faults = faults or Faults()
    ids = itertools.count(1)

    def accept(request: Request) -> Session:
        # Unix time only stamps user_interruption, as EVI does; replies run on media time
        protocol = ServerProtocol(
            behaviour_factory,
            faults,
            chat_id=f"chat-{next(ids)}",
            start_unix_ms=round(time.time() * 1000),
        )
        return Session(protocol, protocol.open())

    refuse = faults_then(functools.partial(check_key, api_key))
    fake = WebSocketFake(accept, path=PATH, refuse=refuse)
    return await serve_fake(fake, host=host, port=port, faults=faults, ssl_context=ssl_context)
