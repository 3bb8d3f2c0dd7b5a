"""Scoring-service overhead: what the broker + worker add per request over an in-process call.

    python bench/service_overhead.py [--requests 500] [--clip-s 5] [--max-wait-ms 0] [--out FILE.json]

A broker and one worker run as child processes (``duplexsim scoring broker|worker``) on tcp loopback;
the worker serves a trivial scorer (returns zeros: no model time), so what is measured is the
service path itself: encode, client DEALER -> broker ROUTER -> worker DEALER, decode, clip checks,
batching, scoring thread hand-off, and the way back. Clips are ``--clip-s`` seconds of 16 kHz
float32 (5 s = 320 kB per request).

1. in-process  ``scorer.score([clip])`` called directly, ``--requests`` times.
2. local       ``LocalScoring.score([clip])`` (the no-endpoint path: a scoring thread, no sockets).
3. service     ``ScoringClient.score([clip])``, one request at a time (latency).
4. concurrent  ``--requests`` requests, 16 in flight (throughput; batches form at the worker).
5. zmq floor   the same three processes and hops with nothing but zmq in them: a sync DEALER, a
               ROUTER/ROUTER relay, a DEALER echo. What this machine charges before any of our
               code runs; on a loaded machine it moves, so compare the service against it.

Overhead = p50 / p99 of (path latency); the in-process call is microseconds, so the latency is the
overhead. ``--max-wait-ms`` is the worker's batching wait, a deliberate delay added under light
load (0 = score as soon as the scorer is free).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import zmq
from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from duplexsim.core.emotions import HEAD_NAMES  # noqa: E402
from duplexsim.scoring.models.base import EmotionModel  # noqa: E402
from duplexsim.scoring.service import LocalScoring, ScoringClient  # noqa: E402

WARMUP = 20


class TrivialScorer(EmotionModel):
    name = "trivial"

    @property
    def dimensions(self) -> tuple[str, ...]:
        return HEAD_NAMES

    def score(self, clips: Sequence[NDArray[np.float32]]) -> NDArray[np.float32]:
        return np.zeros((len(clips), len(HEAD_NAMES)), dtype=np.float32)


def trivial_factory(name: str) -> EmotionModel:
    return TrivialScorer()


def percentiles(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {
        "p50_ms": float(np.percentile(a, 50)),
        "p99_ms": float(np.percentile(a, 99)),
        "max_ms": float(a.max()),
        "n": len(ms),
    }


def in_process(clip: NDArray[np.float32], n: int) -> list[float]:
    scorer = TrivialScorer()
    out = []
    for i in range(n + WARMUP):
        t = time.perf_counter()
        scorer.score([clip])
        if i >= WARMUP:
            out.append((time.perf_counter() - t) * 1000)
    return out


async def sequential(scoring: Any, clip: NDArray[np.float32], n: int) -> list[float]:
    out = []
    for i in range(n + WARMUP):
        t = time.perf_counter()
        [result] = await scoring.score([clip], "trivial", 30.0)
        elapsed = (time.perf_counter() - t) * 1000
        if not result.ok:
            raise SystemExit(f"request failed: {result.error}")
        if i >= WARMUP:
            out.append(elapsed)
    return out


async def concurrent(
    client: ScoringClient, clip: NDArray[np.float32], n: int, width: int = 16
) -> dict[str, float]:
    gate = asyncio.Semaphore(width)
    latencies: list[float] = []

    async def one() -> None:
        async with gate:
            t = time.perf_counter()
            [result] = await client.score([clip], "trivial", 30.0)
            latencies.append((time.perf_counter() - t) * 1000)
            if not result.ok:
                raise SystemExit(f"request failed: {result.error}")

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    wall = time.perf_counter() - t0
    return {**percentiles(latencies), "requests_per_s": n / wall, "in_flight": width}


def relay(frontend: str, backend: str) -> None:
    """The floor's broker: forward frames, nothing else."""
    ctx = zmq.Context()
    front, back = ctx.socket(zmq.ROUTER), ctx.socket(zmq.ROUTER)
    front.bind(frontend)
    back.bind(backend)
    print(f"relay: clients on {front.getsockopt_string(zmq.LAST_ENDPOINT)}", flush=True)
    print(f"relay: workers on {back.getsockopt_string(zmq.LAST_ENDPOINT)}", flush=True)
    worker, _ = back.recv_multipart()  # the echo's READY, before any request is forwarded
    poller = zmq.Poller()
    poller.register(front, zmq.POLLIN)
    poller.register(back, zmq.POLLIN)
    while True:
        ready = dict(poller.poll())
        if back in ready:
            _, *rest = back.recv_multipart()
            front.send_multipart(rest, copy=False)
        if front in ready:
            client, *rest = front.recv_multipart()
            back.send_multipart([worker, client, *rest], copy=False)


def echo(backend: str) -> None:
    """The floor's worker: answer every request with a small reply."""
    sock = zmq.Context().socket(zmq.DEALER)
    sock.connect(backend)
    sock.send(b"READY")
    while True:
        client, *_ = sock.recv_multipart()
        sock.send_multipart([client, b"ok"])


def floor(clip: NDArray[np.float32], n: int) -> list[float]:
    procs = [start_script(["--relay"])]
    try:
        frontend, backend = broker_endpoints(procs[0])
        procs.append(start_script(["--echo", backend]))
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        sock.connect(frontend)
        payload, out = clip.tobytes(), []
        for i in range(n + WARMUP):
            t = time.perf_counter()
            sock.send_multipart([b"header", payload], copy=False)
            if not sock.poll(30_000):  # the first waits in the relay until the echo is up
                raise SystemExit("zmq floor: no answer from the relay/echo in 30 s")
            sock.recv_multipart()
            if i >= WARMUP:
                out.append((time.perf_counter() - t) * 1000)
        sock.close(0)
        return out
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(10)


def start_script(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, *args], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )


def start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "duplexsim", "scoring", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def broker_endpoints(proc: subprocess.Popen[str]) -> tuple[str, str]:
    assert proc.stdout is not None
    lines = [proc.stdout.readline().strip() for _ in range(2)]
    if not all(" on " in line for line in lines):
        raise SystemExit(f"broker did not start: {lines}")
    clients, workers = (line.rsplit(" on ", 1)[1] for line in lines)
    return clients, workers


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    clip = (0.1 * np.sin(np.arange(int(args.clip_s * 16000)) / 7.0)).astype(np.float32)
    results: dict[str, Any] = {"in_process": percentiles(in_process(clip, args.requests))}
    results["zmq_floor"] = percentiles(floor(clip, args.requests))
    async with LocalScoring(trivial_factory, max_wait_ms=args.max_wait_ms) as local:
        results["local"] = percentiles(await sequential(local, clip, args.requests))
    broker = start(["broker", "--bind", "tcp://127.0.0.1:*"])
    worker = None
    try:
        frontend, backend = broker_endpoints(broker)
        worker = start(
            [
                "worker", "--connect", backend, "--scorer", "trivial",
                "--factory", "bench.service_overhead:trivial_factory",
                "--max-wait-ms", str(args.max_wait_ms), "--max-batch", "16",
            ]
        )  # fmt: skip
        async with ScoringClient(frontend) as client:
            await wait_for_worker(client, clip)
            results["service"] = percentiles(await sequential(client, clip, args.requests))
            results["concurrent"] = await concurrent(client, clip, args.requests)
    finally:
        for proc in (worker, broker):
            if proc is not None:
                proc.terminate()
                proc.wait(10)
    return results


async def wait_for_worker(client: ScoringClient, clip: NDArray[np.float32]) -> None:
    """The first request waits in the broker's queue until the worker has registered."""
    [result] = await client.score([clip], "trivial", 30.0)
    if not result.ok:
        raise SystemExit(f"worker did not come up: {result.error}")


def report(results: dict[str, Any], args: argparse.Namespace) -> str:
    rows = [
        ("in-process score()", results["in_process"]),
        ("LocalScoring (thread)", results["local"]),
        ("service, 1 in flight", results["service"]),
        ("service, 16 in flight", results["concurrent"]),
        ("zmq floor (same hops, no logic)", results["zmq_floor"]),
    ]
    lines = [
        f"Scoring-service overhead: {args.clip_s:g} s clips, {args.requests} requests, "
        f"max_wait_ms={args.max_wait_ms:g}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "",
        "| path | p50 ms | p99 ms | max ms |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {name} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f} | {r['max_ms']:.2f} |"
        for name, r in rows
    ]
    c, svc, low = results["concurrent"], results["service"], results["zmq_floor"]
    lines += [
        "",
        f"Service overhead per request (1 in flight): p50 {svc['p50_ms']:.2f} ms, "
        f"p99 {svc['p99_ms']:.2f} ms; of which our code above the zmq floor: "
        f"p50 {svc['p50_ms'] - low['p50_ms']:.2f} ms.",
        f"Throughput with {c['in_flight']} in flight: {c['requests_per_s']:.0f} requests/s.",
    ]
    return "\n".join(lines)


def main() -> None:
    if sys.argv[1:2] == ["--relay"]:
        relay("tcp://127.0.0.1:*", "tcp://127.0.0.1:*")
    if sys.argv[1:2] == ["--echo"]:
        echo(sys.argv[2])
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--requests", type=int, default=500)
    p.add_argument("--clip-s", type=float, default=5.0)
    p.add_argument("--max-wait-ms", type=float, default=0.0)
    p.add_argument("--out", type=Path, help="write every number as JSON")
    args = p.parse_args()
    results = asyncio.run(measure(args))
    print(report(results, args))
    if args.out:
        args.out.write_text(
            json.dumps({"args": vars(args) | {"out": str(args.out)}, **results}, indent=2)
        )


if __name__ == "__main__":
    main()
