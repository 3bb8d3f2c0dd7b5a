"""Memory per session while hostile servers flood it: N sessions at once against a pcm-ws server
that sends speech as fast as the socket takes it (audio flood) or tiny transcripts without end
(message flood). Prints each session's outcome and the process's peak RSS growth per session.

    python bench/flood_memory.py --sessions 20 --kind audio
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time
from collections.abc import Awaitable, Callable

import numpy as np
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from duplexsim.clients.base import ClientConfig
from duplexsim.clients.pcm_ws.client import PcmWsClient
from duplexsim.session.engine import SessionSettings, run_session

ACK = json.dumps({"type": "hello_ack", "sample_rate": 16000, "session_id": "s"})


def flood(kind: str) -> Callable[[ServerConnection], Awaitable[None]]:
    speech = (0.3 * np.sin(np.arange(8000) * 2 * np.pi * 180 / 16000) * 32767).astype("<i2")
    chunk = speech.tobytes()
    text = json.dumps({"type": "transcript", "text": "x"})

    async def handler(ws: ServerConnection) -> None:
        await ws.recv()
        await ws.send(ACK)
        reader = asyncio.create_task(_drain(ws))
        try:
            while True:
                await ws.send(chunk if kind == "audio" else text)
        except ConnectionClosed:
            pass
        finally:
            reader.cancel()

    return handler


async def _drain(ws: ServerConnection) -> None:
    try:
        async for _ in ws:
            pass
    except ConnectionClosed:
        pass


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def main(sessions: int, kind: str, context_s: float) -> None:
    async with serve(flood(kind), "127.0.0.1", 0, max_size=None) as server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        before = rss_mib()
        started = time.monotonic()
        context = np.zeros(int(context_s * 16000), np.float32)
        outs = await asyncio.gather(
            *(
                run_session(PcmWsClient(ClientConfig(url=url)), context, SessionSettings())
                for _ in range(sessions)
            )
        )
        took = time.monotonic() - started
    grown = rss_mib() - before
    reasons = {(o.status, o.end_reason, o.retryable) for o in outs}
    longest = max(o.output.size / o.output_rate for o in outs)
    print(f"{sessions} sessions, {kind} flood, {took:.1f} s: outcomes {sorted(reasons)}")
    print(f"  first error: {outs[0].error}")
    print(f"  longest output.wav: {longest:.1f} s")
    print(f"  peak RSS growth: {grown:.1f} MiB ({grown / sessions:.2f} MiB per session)")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=20)
    p.add_argument("--kind", choices=("audio", "messages"), default="audio")
    p.add_argument("--context", type=float, default=10.0, help="seconds of context per session")
    a = p.parse_args()
    asyncio.run(main(a.sessions, a.kind, a.context))
