"""openai-webrtc latency truth over real loopback WebRTC, one session at a time.

The delayed-echo fake (0.5 s) in this process; the context is the tests' voiced signal faded out
over its last 10 ms (Opus smears an abrupt end a few ms later, and the fake would hear the turn
end that much late). Per session: measured latency minus the injected one (13 ms of it is the
codec's fixed delay, ``CODEC_DELAY_S``), whether the session's own timing was valid, and the last
audible frame's arrival minus the end-of-turn event's (negative: the reply's audio came first).

    python bench/webrtc_latency.py [--sessions 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

import numpy as np

from duplexsim.clients.base import ClientConfig
from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.openai_webrtc.client import CODEC_DELAY_S, OpenAIWebRTCClient
from duplexsim.clients.openai_webrtc.server import start_server
from duplexsim.core.turns import TurnSettings
from duplexsim.session.engine import SessionOutcome, SessionSettings, run_session

RATE = 16000
LATENCY_S = 0.5
SETTINGS = SessionSettings(
    turns=TurnSettings(hangover_s=0.5, max_reply_s=4.0, reply_timeout_s=1.0),
    stall_timeout_s=0.6,
    deadline_margin_s=2.0,
)


def context() -> np.ndarray:
    """0.2 s silence, 1 s of harmonics under a 4 Hz envelope (tests/conftest.py's voiced_signal,
    whose abrupt onset webrtcvad finds at the same frame wherever it lands), 0.1 s silence."""
    t = np.arange(RATE) / RATE
    tone = sum(np.sin(2 * np.pi * 140.0 * k * t) / k for k in range(1, 8))
    speech = tone * (0.6 + 0.4 * np.sin(2 * np.pi * 4.0 * t))
    speech = (0.3 * speech / np.max(np.abs(speech))).astype(np.float32)
    fade = RATE // 100
    speech[-fade:] *= np.linspace(1.0, 0.0, fade, endpoint=False, dtype=np.float32)
    x = np.zeros(int(1.3 * RATE), np.float32)
    x[int(0.2 * RATE) : int(0.2 * RATE) + speech.size] = speech
    return x


def end_order_ms(out: SessionOutcome) -> float:
    """The last audible frame's arrival minus the end-of-turn event's, ms."""
    [end] = [e["t"] for e in out.events if e["kind"] == "end_of_turn"]
    audible = [t for t, _, _, _, silent in out.records.received if not silent]
    return 1000.0 * float(audible[-1] - end)


async def main(sessions: int) -> None:
    server = await start_server(
        behaviour_factory("delayed-echo", latency_s=LATENCY_S, hangover_s=0.25)
    )
    errors, order, invalid = [], [], []
    try:
        for _ in range(sessions):
            client = OpenAIWebRTCClient(ClientConfig(url=server.url, connect_timeout_s=3.0))
            out = await run_session(client, context(), SETTINGS)
            if out.status != "ok" or out.timing is None or out.timing.latency_s is None:
                raise SystemExit(f"session failed: {out.status} {out.error}")
            errors.append(1000 * (out.timing.latency_s - LATENCY_S))
            order.append(end_order_ms(out))
            invalid.append(out.check.invalid)
    finally:
        await server.aclose()
    beyond = [e - 1000 * CODEC_DELAY_S for e in errors]
    print("measured - injected, ms:", " ".join(f"{e:.1f}" for e in errors))
    print(
        f"beyond the {1000 * CODEC_DELAY_S:.1f} ms codec delay: p50 {statistics.median(beyond):.1f}"
        f" ms, min {min(beyond):.1f}, max {max(beyond):.1f}"
    )
    print("last audible frame - end_of_turn, ms:", " ".join(f"{x:.2f}" for x in order))
    print(f"invalid timing: {sum(i is not None for i in invalid)} of {sessions}", end=" ")
    print(sorted({i for i in invalid if i is not None})[:3])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    asyncio.run(main(parser.parse_args().sessions))
