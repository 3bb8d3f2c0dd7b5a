"""The EVI fake server: a thin asyncio shell that moves frames to and from ServerProtocol.

It listens at ``/v0/evi/chat``, so the ``hume`` SDK connects to it when its environment's
``evi`` URL points here (``ws://127.0.0.1:PORT/v0/evi``). It does not check the key: a refused
key is an HTTP 401 at the upgrade, which the ``refuse_status`` fault gives.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable

from websockets.exceptions import ConnectionClosed

from clients.behaviours import Behaviour
from clients.fakeserver import (
    DelayedOutbox,
    RunningServer,
    carry_out,
    converse,
    serve_websockets,
)
from clients.faults import Faults
from clients.hume_evi.fake import PATH, ServerProtocol
from clients.wsconn import WsConnection

__all__ = ["start_server"]


async def start_server(
    behaviour_factory: Callable[[int], Behaviour],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Faults | None = None,
) -> RunningServer:
    """Serve EVI's chat; each connection gets a behaviour at the rate its settings name."""
    faults = faults or Faults()
    ids = itertools.count(1)

    async def handler(ws: WsConnection) -> None:
        # Unix time only stamps user_interruption, as EVI does; replies run on media time
        protocol = ServerProtocol(
            behaviour_factory,
            faults,
            chat_id=f"chat-{next(ids)}",
            start_unix_ms=round(time.time() * 1000),
        )
        outbox = DelayedOutbox(ws, faults.extra_latency_s)
        try:
            with contextlib.suppress(ConnectionClosed):
                if await carry_out(ws, protocol.open(), outbox):
                    return
                await converse(ws, protocol, outbox)
        finally:
            outbox.cancel()

    return await serve_websockets(handler, host=host, port=port, faults=faults, path=PATH)
