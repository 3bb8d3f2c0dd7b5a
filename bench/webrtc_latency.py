"""openai-webrtc latency truth over real loopback WebRTC, one session at a time.

The delayed-echo fake (0.5 s) in this process; the context is the tests' voiced signal faded out
over its last 10 ms (Opus smears an abrupt end a few ms later, and the fake would hear the turn
end that much late). Per session: measured latency minus the injected one (13 ms of it is the
codec's fixed delay, ``CODEC_DELAY_S``), the session's latency bound (with the fake's own stalls
and held frames, as a run counts a fake it started), and the last audible frame's arrival minus
the end-of-turn event's (negative: the reply's audio came first).

Our frames are encoded on the loop (``OutgoingAudioTrack.recv``); ``--encode both`` runs rounds
alternating with aiortc's own way (a raw frame encoded in a worker thread), side by side.

    python bench/webrtc_latency.py [--sessions 10] [--encode loop|thread|both] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from duplexsim.clients.base import ClientConfig
from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.openai_webrtc.client import CODEC_DELAY_S, OpenAIWebRTCClient
from duplexsim.clients.openai_webrtc.server import start_server
from duplexsim.clients.transport.rtc import OutgoingAudioTrack
from duplexsim.core.timing import TimingBudget
from duplexsim.core.turns import TurnSettings
from duplexsim.session import eventloop
from duplexsim.session.engine import SessionOutcome, SessionSettings, run_session

RATE = 16000
LATENCY_S = 0.5
SETTINGS = SessionSettings(
    turns=TurnSettings(hangover_s=0.5, max_reply_s=4.0, reply_timeout_s=1.0),
    stall_timeout_s=0.6,
    deadline_margin_s=2.0,
    # in one process with the fake and both peers' codecs: the bound is tens of ms, and shown
    budget=TimingBudget(latency_ms=50.0),
)
TRANSIT_MS = 2.0  # loopback UDP and SRTP between the answer's send and its read: in no log


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
    """The last audible frame's arrival minus the end-of-turn event's, ms (nan: the session
    ended at its hangover, before the event came)."""
    ends = [e["t"] for e in out.events if e["kind"] == "end_of_turn"]
    if not ends:
        return float("nan")
    end = ends[0]
    audible = [t for t, _, _, _, silent in out.records.received if not silent]
    return 1000.0 * float(audible[-1] - end)


async def sessions_with(
    encode: str, sessions: int
) -> list[tuple[float, float | None, bool, float]]:
    """(error beyond the codec delay ms, bound ms, vouched, end order ms) per session."""
    # "thread", aiortc's way: the sender gets raw frames and encodes them in its worker thread
    OutgoingAudioTrack.encode_on_loop = encode == "loop"
    server = await start_server(
        behaviour_factory("delayed-echo", latency_s=LATENCY_S, hangover_s=0.25)
    )
    out_rows = []
    try:
        for _ in range(sessions):
            client = OpenAIWebRTCClient(ClientConfig(url=server.url, connect_timeout_s=3.0))
            out = await run_session(client, context(), SETTINGS, server_stalls=server.held)
            if out.status != "ok" or out.timing is None or out.timing.latency_s is None:
                raise SystemExit(f"session failed: {out.status} {out.error}")
            error = 1000 * (out.timing.latency_s - LATENCY_S - CODEC_DELAY_S)
            vouched = out.check.valid and out.check.paced
            out_rows.append((error, out.check.latency_bound_ms, vouched, end_order_ms(out)))
    finally:
        await server.aclose()
        OutgoingAudioTrack.encode_on_loop = True
    return out_rows


def show(encode: str, rows: list[tuple[float, float | None, bool, float]]) -> None:
    errors = [r[0] for r in rows]
    over = [r for r in rows if r[1] is not None and r[0] > r[1] + TRANSIT_MS]
    print(
        f"{encode:6s} error beyond the codec delay ms: p50 {statistics.median(errors):.1f}, "
        f"max {max(errors):.1f}; bound p50 {statistics.median([r[1] or 0.0 for r in rows]):.1f}; "
        f"vouched {sum(r[2] for r in rows)}/{len(rows)}; error - bound max "
        f"{max(r[0] - (r[1] or 0.0) for r in rows):.1f}; over bound + {TRANSIT_MS:g} ms: "
        f"{len(over)} ({', '.join(f'{e:.1f}>{b}' for e, b, _, _ in over[:4])})"
    )
    print("       last audible frame - end_of_turn, ms:", " ".join(f"{r[3]:.2f}" for r in rows))


async def main(sessions: int, encode: str, rounds: int) -> None:
    kinds = ["thread", "loop"] if encode == "both" else [encode]
    for k in range(rounds):
        for kind in kinds:
            print(f"round {k + 1}:", end=" ")
            show(kind, await sessions_with(kind, sessions))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--encode", choices=("loop", "thread", "both"), default="loop")
    parser.add_argument("--rounds", type=int, default=1)
    a = parser.parse_args()
    eventloop.run(main(a.sessions, a.encode, a.rounds))
