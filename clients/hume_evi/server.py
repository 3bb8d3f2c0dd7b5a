"""The EVI fake server: a thin asyncio shell that moves frames to and from ServerProtocol.

It listens at ``/v0/evi/chat``, so the ``hume`` SDK connects to it when its environment's
``evi`` URL points here (``ws://127.0.0.1:PORT/v0/evi``). A handshake without a key (the
``X-Hume-Api-Key`` header, or ``api_key`` / ``access_token`` in the query; any key when the fake
is given none, that one otherwise) is refused with HTTP 401, which the SDK reports as
"Websocket initialized with invalid credentials".
"""

from __future__ import annotations

import itertools
import json
import ssl
import time
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

from websockets.http11 import Request, Response

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.fakeserver import (
    RunningServer,
    serve_session,
    serve_websockets,
)
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.hume_evi.fake import PATH, ServerProtocol
from duplexsim.clients.transport.wsconn import WsConnection

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

    def check(connection: WsConnection, request: Request) -> Response | None:
        query = parse_qs(urlsplit(request.path).query)
        given = (
            request.headers.get("X-Hume-Api-Key")
            or query.get("api_key", [""])[0]
            or query.get("access_token", [""])[0]
        )
        if given and (api_key is None or given == api_key):
            return None
        body = json.dumps({"message": "Websocket initialized with invalid credentials."})
        return connection.respond(401, body + "\n")  # never echo what was sent

    ids = itertools.count(1)

    async def handler(ws: WsConnection) -> None:
        # Unix time only stamps user_interruption, as EVI does; replies run on media time
        protocol = ServerProtocol(
            behaviour_factory,
            faults,
            chat_id=f"chat-{next(ids)}",
            start_unix_ms=round(time.time() * 1000),
        )
        await serve_session(ws, protocol.open(), protocol, faults)

    return await serve_websockets(
        handler, host=host, port=port, faults=faults, path=PATH, check=check,
        ssl_context=ssl_context,
    )  # fmt: skip
