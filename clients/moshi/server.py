"""The moshi fake server: a thin asyncio shell that moves messages to and from ServerProtocol.

It serves ``/api/chat`` only and records each connection's query parameters. ``flavour`` picks the
server it imitates (``duplexsim.clients.moshi.protocol.FLAVOURS``: "moshi", the Python server; "rust", with
its 9-byte handshake, metadata and 40 ms packets; "personaplex", which needs ``text_prompt`` and a
known ``voice_prompt``). ``exclusive`` takes the real servers' global lock (one conversation at a
time, later clients wait for their handshake); ``handshake_delay_s`` stands for PersonaPlex's
system prompts, run before the handshake.

Unlike the hosted services' fakes, this one is paced by its input, as the real servers are: they
make one output frame for each input frame heard (kyutai's ``moshi/server.py`` receive loop), so a
client that stops sending stops the model.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from urllib.parse import parse_qsl, urlsplit

from websockets.exceptions import ConnectionClosed

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.fakeserver import (
    DelayedOutbox,
    RunningServer,
    Untimed,
    carry_out,
    converse,
    serve_websockets,
)
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.moshi.protocol import (
    CHAT_PATH,
    FLAVOURS,
    Flavour,
    ServerProtocol,
)
from duplexsim.clients.transport.wsconn import WsConnection
from duplexsim.core.errors import ConfigError

__all__ = ["MoshiServer", "start_server"]


class MoshiServer(RunningServer):
    """A running fake with the query parameters of every connection it accepted, in order."""

    def __init__(self, running: RunningServer, queries: list[dict[str, str]]) -> None:
        super().__init__(running.host, running.port, running.url, running.aclose)
        self.queries = queries

    async def __aenter__(self) -> MoshiServer:
        return self


async def start_server(
    behaviour_factory: Callable[[int], Behaviour],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Faults | None = None,
    flavour: str | Flavour = "moshi",
    exclusive: bool = False,
    handshake_delay_s: float = 0.0,
) -> MoshiServer:
    """Serve moshi's /api/chat; each connection gets a fresh behaviour at 24 kHz."""
    faults = faults or Faults()
    kind = _flavour(flavour)
    lock = asyncio.Lock() if exclusive else None
    queries: list[dict[str, str]] = []

    async def handler(ws: WsConnection) -> None:
        target = urlsplit(ws.request.path if ws.request is not None else "")
        if target.path.rstrip("/") != CHAT_PATH:
            await ws.close(1008, f"no route {target.path[:60]!r}: this server serves {CHAT_PATH}")
            return
        query = dict(parse_qsl(target.query, keep_blank_values=True))
        queries.append(query)
        protocol = ServerProtocol(behaviour_factory, faults, flavour=kind, query=query)
        outbox = DelayedOutbox(ws, faults.extra_latency_s)
        try:
            with contextlib.suppress(ConnectionClosed):
                async with lock or contextlib.nullcontext():
                    if handshake_delay_s > 0:
                        await asyncio.sleep(handshake_delay_s)
                    if not await carry_out(ws, protocol.open(), outbox):
                        await converse(ws, Untimed(protocol.receive), outbox)
        finally:
            outbox.cancel()

    running = await serve_websockets(handler, host=host, port=port, faults=faults)
    return MoshiServer(running, queries)


def _flavour(flavour: str | Flavour) -> Flavour:
    if isinstance(flavour, Flavour):
        return flavour
    try:
        return FLAVOURS[flavour]
    except KeyError:
        known = ", ".join(FLAVOURS)
        raise ConfigError(f"unknown moshi flavour '{flavour}' (known: {known})") from None
