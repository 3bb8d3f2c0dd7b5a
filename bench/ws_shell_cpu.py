"""CPU per frame of the WebSocket shell: pcm-ws clients and their fake, one process, two threads.

The fake (``silent``: one output frame per input frame) runs on its own event loop in a thread,
the clients on the main loop, each sending 20 ms frames on an absolute schedule and polling what
came back once per frame, as a session does. Each side's CPU is its thread's CPU time
(``time.thread_time``), divided by the frames sent: CPU time is what the code costs, which a busy
machine disturbs far less than wall-clock pacing figures.

    python bench/ws_shell_cpu.py [--sessions 20] [--seconds 4] [--rounds 1]

Prints one line per round: ``client_us_per_frame server_us_per_frame frames``. To compare two
revisions side by side, run it alternately from each tree (``bench/ab_ws_shell.sh``).
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time

import numpy as np

from duplexsim.clients.base import ClientConfig
from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.pcm_ws.client import PcmWsClient
from duplexsim.clients.pcm_ws.server import start_server

RATE = 16000
FRAME = RATE // 50


def serve_in_thread() -> tuple[str, asyncio.AbstractEventLoop, list[float], threading.Event]:
    """The fake on its own loop in a thread; returns its URL, loop, CPU probe and stop flag."""
    ready = threading.Event()
    stop = threading.Event()
    out: dict[str, object] = {}
    cpu = [0.0]

    def run() -> None:
        async def main() -> None:
            server = await start_server(behaviour_factory("silent"))
            out["url"] = server.url
            out["loop"] = asyncio.get_running_loop()
            ready.set()
            while not stop.is_set():
                cpu[0] = time.thread_time()
                await asyncio.sleep(0.05)
            await server.aclose()

        asyncio.run(main())

    threading.Thread(target=run, daemon=True).start()
    ready.wait()
    return str(out["url"]), out["loop"], cpu, stop  # type: ignore[return-value]


async def session(url: str, frames: int, start: float) -> int:
    client = PcmWsClient(ClientConfig(url=url, options={"sample_rate": RATE}))
    await client.connect()
    loop = asyncio.get_running_loop()
    silence = np.zeros(FRAME, dtype=np.float32)
    got = 0
    for n in range(frames):
        await asyncio.sleep(max(0.0, start + n * 0.02 - loop.time()))
        await client.send_audio(silence)
        events, _ = client.poll_events()
        got += len(events)
    await client.aclose()
    return got


async def round_(url: str, sessions: int, seconds: float) -> tuple[float, int]:
    frames = round(seconds / 0.02)
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.2
    t0 = time.thread_time()
    await asyncio.gather(*(session(url, frames, start + i * 0.001) for i in range(sessions)))
    return time.thread_time() - t0, sessions * frames


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sessions", type=int, default=20)
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--rounds", type=int, default=1)
    args = p.parse_args()
    url, _, server_cpu, stop = serve_in_thread()
    for _ in range(args.rounds):
        s0 = server_cpu[0]
        client_s, frames = asyncio.run(round_(url, args.sessions, args.seconds))
        time.sleep(0.1)  # the server thread's probe catches up
        server_s = server_cpu[0] - s0
        print(f"{1e6 * client_s / frames:.1f} {1e6 * server_s / frames:.1f} {frames}")
    stop.set()


if __name__ == "__main__":
    main()
