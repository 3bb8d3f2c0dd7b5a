"""A local model for the ``raw-pcm`` protocol: it echoes every frame it hears, so a run has
replies to measure and score. ``python -m duplexsim_example_plugin.server --port 8799``."""

from __future__ import annotations

import argparse
import asyncio

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

__all__ = ["echo", "main"]


async def echo(ws: ServerConnection) -> None:
    try:
        async for message in ws:
            if isinstance(message, bytes):
                await ws.send(message)
    except ConnectionClosed:  # the session ended while a frame was on its way back
        pass


async def _serve(host: str, port: int) -> None:
    async with serve(echo, host, port, compression=None) as server:
        port = server.sockets[0].getsockname()[1]  # the one picked, for --port 0
        print(f"raw-pcm echo on ws://{host}:{port}", flush=True)
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8799, help="0 picks a free port")
    args = parser.parse_args()
    asyncio.run(_serve(args.host, args.port))


if __name__ == "__main__":
    main()
