"""Hostile WebSocket model servers, in process: each completes its protocol's handshake, then runs
a script on the connection while it reads (and drops) whatever the client streams. Shared by the
hostile-peer suites."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from duplexsim.clients.base import ClientConfig
from duplexsim.clients.registry import client_class
from duplexsim.session.engine import run_session
from tests.helpers.sessions import settings

__all__ = ["KEY", "SETTINGS", "Script", "drain", "hostile_server", "sending", "session"]

KEY = "sk-hostile-0123456789abcdef"
SETTINGS = settings(reply_timeout_s=1.2, stall_timeout_s=2.0, deadline_margin_s=3.0)
Script = Callable[[ServerConnection], Any]

# each protocol's answer to the client's first message (moshi: the server speaks first)
_ACK = {
    "pcm-ws": json.dumps({"type": "hello_ack", "sample_rate": 16000, "session_id": "s"}),
    "openai-realtime": json.dumps({"type": "session.updated", "session": {}}),
    "gemini-live": json.dumps({"setupComplete": {}}),
}


@asynccontextmanager
async def hostile_server(protocol: str, script: Script) -> AsyncIterator[str]:
    """A server that completes ``protocol``'s handshake, then runs ``script`` on the connection
    while it reads (and drops) whatever the client streams."""

    async def handler(ws: ServerConnection) -> None:
        if protocol == "openai-realtime":
            await ws.send(json.dumps({"type": "session.created", "session": {}}))
        if protocol == "moshi":
            await ws.send(b"\x00")
        elif protocol == "hume-evi":
            await ws.send(
                json.dumps({"type": "chat_metadata", "chat_id": "c", "chat_group_id": "g"})
            )
        else:
            await ws.recv()
            await ws.send(_ACK[protocol])
        reader = asyncio.create_task(drain(ws))  # reading also answers the client's pings
        try:
            await script(ws)
            await reader
        finally:
            reader.cancel()

    async with serve(handler, "127.0.0.1", 0, max_size=None) as server:
        port = server.sockets[0].getsockname()[1]
        path = "/v1/realtime" if protocol == "openai-realtime" else "/"
        yield f"ws://127.0.0.1:{port}{path}"


async def drain(ws: ServerConnection) -> None:
    with contextlib.suppress(ConnectionClosed):
        async for _ in ws:
            pass


def sending(*messages: str | bytes, close_reason: str | None = None) -> Script:
    async def script(ws: ServerConnection) -> None:
        for message in messages:
            await ws.send(message)
        if close_reason is not None:
            await ws.close(1011, close_reason)

    return script


async def session(protocol: str, url: str, context_s: float = 1.0) -> Any:
    client = client_class(protocol)(ClientConfig(url=url, api_key=KEY, connect_timeout_s=15.0))
    return await run_session(client, np.zeros(int(context_s * 16000), np.float32), SETTINGS)
