"""Send-time error, CPU and latency truth per protocol, N concurrent sessions against its fake.

Each protocol's fake model (delayed-echo) runs in a child process, as `duplexsim serve-model`;
sessions run in this process exactly as `duplexsim run` runs them (absolute schedule, staggered
starts, CPU work in the worker pool). Codec cost (Opus for moshi and WebRTC) lands on this
process's event loop, which is what the send-time error shows.

    python bench/protocol_pacing.py [--sessions 10,25,50] [--protocols moshi,...] [--out f.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time
from typing import Any

import numpy as np

from duplexsim.clients.base import ClientConfig
from duplexsim.clients.fakekit.behaviours import synthetic_voice
from duplexsim.clients.registry import client_class, client_protocols, server_protocols
from duplexsim.core.timing import speech_end
from duplexsim.core.turns import TurnSettings
from duplexsim.profiles.profile import FAKE_KEY
from duplexsim.run.fakes import FakeModelProcess
from duplexsim.run.runner import RAMP_STEP_S, worker_pool
from duplexsim.session import eventloop
from duplexsim.session.engine import SessionSettings, run_session

RATE = 16000
LATENCY_S = 0.8
SETTINGS = SessionSettings(turns=TurnSettings(hangover_s=1.0, max_reply_s=5.0, reply_timeout_s=3.0))
# a codec's fixed, documented delay is not latency error
CODEC_DELAY_S = {"moshi": 0.013, "openai-webrtc": 0.013}


def context() -> np.ndarray:
    x = np.zeros(int(4.0 * RATE), np.float32)
    x[int(0.5 * RATE) : int(3.5 * RATE)] = synthetic_voice(RATE, 3.0)
    return x


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def one_batch(protocol: str, n: int, pool: Any) -> dict[str, Any]:
    args = ("--latency", str(LATENCY_S), "--hangover", "0.25")
    async with FakeModelProcess(protocol, "delayed-echo", *args) as fake:
        ctx = context()
        end_s = speech_end(ctx, RATE)
        step = RAMP_STEP_S + 0.02 / n

        async def session(i: int) -> Any:
            await asyncio.sleep(i * step)
            client = client_class(protocol)(ClientConfig(url=fake.url, api_key=FAKE_KEY))
            return await run_session(client, ctx, SETTINGS, speech_end_s=end_s, executor=pool)

        wall0, cpu0 = time.monotonic(), cpu_s()
        outcomes = await asyncio.gather(*(session(i) for i in range(n)))
        wall, cpu = time.monotonic() - wall0, cpu_s() - cpu0
    errors = (
        np.concatenate(
            [np.subtract(o.records.send_t, o.records.send_due) for o in outcomes] or [np.zeros(0)]
        )
        * 1000
    )
    lat = (
        np.array(
            [
                o.timing.latency_s - LATENCY_S - CODEC_DELAY_S.get(protocol, 0.0)
                for o in outcomes
                if o.timing is not None and o.timing.latency_s is not None
            ]
        )
        * 1000
    )
    return {
        "protocol": protocol,
        "sessions": n,
        "ok": sum(o.status == "ok" for o in outcomes),
        "failed": [o.error for o in outcomes if o.status == "failed"][:3],
        "send_p50_ms": float(np.percentile(errors, 50)),
        "send_p99_ms": float(np.percentile(errors, 99)),
        "send_max_ms": float(errors.max()),
        "cpu_share": cpu / wall,
        "latency_err_p50_ms": float(np.percentile(lat, 50)) if lat.size else None,
        "latency_err_max_ms": float(np.abs(lat).max()) if lat.size else None,
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| protocol | sessions | ok | send p50 ms | send p99 ms | send max ms | client CPU "
        "(cores) | latency err p50 ms | latency err max ms |\n|---|---|---|---|---|---|---|---|---|"
    )

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    lines = [
        f"| {r['protocol']} | {r['sessions']} | {r['ok']} | {f(r['send_p50_ms'])} | "
        f"{f(r['send_p99_ms'])} | {f(r['send_max_ms'])} | {r['cpu_share']:.2f} | "
        f"{f(r['latency_err_p50_ms'])} | {f(r['latency_err_max_ms'])} |"
        for r in rows
    ]
    return "\n".join([head, *lines])


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    protocols = (
        args.protocols.split(",")
        if args.protocols
        else sorted(set(client_protocols()) & set(server_protocols()))
    )
    rows = []
    with worker_pool() as pool:
        for protocol in protocols:
            for n in (int(x) for x in args.sessions.split(",")):
                row = await one_batch(protocol, n, pool)
                print(table([row]).splitlines()[-1], flush=True)
                rows.append(row)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="10,25,50")
    parser.add_argument("--protocols", help="comma-separated (default: every protocol with a fake)")
    parser.add_argument("--out", help="write every number as JSON")
    ns = parser.parse_args()
    results = eventloop.run(main(ns))
    print()
    print(table(results))
    if ns.out:
        with open(ns.out, "w") as fh:
            json.dump(results, fh, indent=2)
