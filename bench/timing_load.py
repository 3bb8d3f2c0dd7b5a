"""Timing under load: what ``duplexsim run`` vouches for at 1x, 2x and 4x the concurrency this
machine paces, and what the client's own timing checks cost.

    python bench/timing_load.py [--base N] [--context-s 3] [--rounds 3] [--cpu-sessions 8]

Part 1 (``ladder``): the concurrency this machine paces (1x) is found first unless ``--base``
gives it (doubling from 2 while 90% of a run's sessions keep their schedule: send p99 and max,
loop and receive lag); then one run per load, side by side in one process, against a
delayed-echo fake (pcm-ws, in a second process; its reply's first sample lies exactly
``--latency`` after the end of the user's speech; it reports its stalls to the run). Each run
has 2 x its concurrency samples (at least 10), no retries (so the share of timing-valid sessions
shows the load, not the retries), and admission control off (the load is the one asked for); a
last run at 4x with admission on shows what the runner does by itself. Reported per run:
sessions per second of wall time, the shares that kept the schedule and that had valid timing,
the latency error of the valid ones against the truth and against a re-measurement from their
own input.wav/output.wav (p50, p99, max), the sessions whose error exceeds the bound they
claimed (soundness), the bounds' p50/p90, and the run's wall time.

Part 2 (``cpu``): CPU per paced frame of duplexsim's client (``run_session`` + ``PcmWsClient``)
against a minimal sender written with websockets alone (the same hello, the same frames on the
same absolute schedule, every reply message read and dropped), against the same silent fake,
alternating for ``--rounds`` rounds of ``--cpu-sessions`` concurrent sessions each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import websockets

from duplexsim.clients.base import ClientConfig
from duplexsim.clients.pcm_ws.client import PcmWsClient
from duplexsim.core.audio import frame_signal, read_audio
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.retry import RetryPolicy
from duplexsim.core.timing import measure_reply, speech_end
from duplexsim.core.turns import TurnSettings
from duplexsim.profiles.profile import ModelProfile
from duplexsim.run.fakes import FakeModelProcess
from duplexsim.run.runner import Endpoint, RunOptions, execute_run
from duplexsim.run.store import ResultRow
from duplexsim.session import eventloop
from duplexsim.session.engine import SessionSettings, run_session

RATE = 16000
FRAME = 320
SETTINGS = SessionSettings(turns=TurnSettings(hangover_s=0.5, max_reply_s=5.0, reply_timeout_s=3.0))


def voiced(seconds: float, f0: float = 140.0) -> np.ndarray:
    """Speech-like: harmonics under a 4 Hz syllable envelope (webrtcvad calls it speech)."""
    t = np.arange(round(seconds * RATE)) / RATE
    x = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 8)) * (
        0.6 + 0.4 * np.sin(2 * np.pi * 4.0 * t)
    )
    return (0.3 * x / np.max(np.abs(x))).astype(np.float32)


def context(seconds: float) -> np.ndarray:
    """0.2 s silence, speech, then 0.3 s silence."""
    x = np.zeros(round(seconds * RATE), np.float32)
    x[round(0.2 * RATE) : round((seconds - 0.3) * RATE)] = voiced(seconds - 0.5)
    return x


def write_benchmark(root: Path, samples: int, context_s: float) -> Path:
    (root / "audio").mkdir(parents=True)
    sf.write(root / "audio" / "c.wav", context(context_s), RATE, subtype="PCM_16")
    sf.write(root / "audio" / "r.wav", voiced(0.5), RATE, subtype="PCM_16")
    line = {"language": "en", "emotion": "Amusement", "context": "audio/c.wav"}
    lines = [
        json.dumps({"id": f"s{i:04d}", **line, "reference": "audio/r.wav"}) for i in range(samples)
    ]
    (root / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    return root


def pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


async def ladder_run(
    fake: FakeModelProcess,
    root: Path,
    concurrency: int,
    args: argparse.Namespace,
    *,
    admission: bool,
    name: str | None = None,
) -> dict[str, Any]:
    name = name or f"c{concurrency}{'-admission' if admission else ''}"
    # at least 10 sessions: one invalid session in a handful is not a share
    samples = max(2 * concurrency, 10)
    bench = load_benchmark(write_benchmark(root / name, samples, args.context_s))
    opts = RunOptions(
        run_id=name,
        runs_dir=root / "runs",
        concurrency=concurrency,
        settings=SETTINGS,
        retry=RetryPolicy(max_attempts=1),
        quiet=True,
        admission=admission,
    )
    profile = ModelProfile(name="delayed-echo", protocol="pcm-ws", url=fake.url)
    wall = time.monotonic()
    # the fake is ours, on these cores: its stalls are checked with ours
    rows = await execute_run(bench, profile, opts, endpoint=Endpoint(fake.url, fake.stalls))
    wall = time.monotonic() - wall
    valid = [r for r in rows if r.timing_valid and r.status == "ok" and r.latency_s is not None]
    truth_ms = [abs(r.latency_s - args.latency) * 1000 for r in valid]  # type: ignore[operator]
    # soundness of the bound: no session's error beyond what it says the machine may have added
    # (1 ms for the reply's own placement: our read and the fake's turn-around, below a stall)
    timed = [r for r in rows if r.status == "ok" and r.latency_s is not None]
    beyond = [
        r
        for r in timed
        if abs(r.latency_s - args.latency) * 1000 > (r.latency_bound_ms or 0.0) + 1.0  # type: ignore[operator]
    ]
    audio_ms = []
    for r in valid:
        folder = opts.run_dir / str(r.bundle)
        sent, heard = read_audio(folder / "input.wav"), read_audio(folder / "output.wav")
        end = speech_end(sent.samples, sent.sample_rate)
        again = measure_reply(heard.samples, heard.sample_rate, speech_end_s=end)
        if again.latency_s is not None:
            audio_ms.append(abs(again.latency_s - r.latency_s) * 1000)  # type: ignore[operator]
    reasons = [" ".join(str(r.timing_invalid).split()[:2]) for r in rows if r.timing_invalid]
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    return {
        "run": name,
        "sessions": len(rows),
        "status": statuses,
        "sessions_per_s": round(len(rows) / wall, 2),
        "valid_share": round(sum(bool(r.timing_valid) for r in rows) / len(rows), 3),
        # the schedule kept (send p99 and max, lags): what "this machine paces" means
        "paced_share": round(sum(paced(r) for r in rows) / len(rows), 3),
        "valid_replies": len(valid),
        "latency_error_vs_truth_ms": {q: pct(truth_ms, q) for q in (50, 99, 100)},
        "latency_error_vs_audio_ms": {q: pct(audio_ms, q) for q in (50, 99, 100)},
        "invalid_by": dict(Counter(reasons)),
        "errors_beyond_their_bound": len(beyond),
        "valid_beyond_their_bound": sum(bool(r.timing_valid) for r in beyond),
        "latency_bound_ms": {
            q: pct([r.latency_bound_ms or 0.0 for r in timed], q) for q in (50, 90)
        },
        "wall_s": round(wall, 1),
    }


def paced(row: ResultRow) -> bool:
    """The session kept its schedule: valid, or invalid only by its latency window."""
    return row.timing_valid is not False or str(row.timing_invalid).startswith("latency window")


async def capacity(fake: FakeModelProcess, root: Path, args: argparse.Namespace) -> int:
    """The concurrency this machine paces now: doubling from 2 while at least 90% of a run's
    sessions keep their schedule (admission off, no retries)."""
    best, c = 1, 2
    while c <= 512:
        probe = await ladder_run(fake, root, c, args, admission=False, name=f"probe{c}")
        print(json.dumps(probe), flush=True)
        if probe["paced_share"] < 0.9:
            break
        best, c = c, 2 * c
    return best


async def client_round(url: str, n: int, ctx: np.ndarray) -> tuple[float, int]:
    async def one() -> int:
        out = await run_session(PcmWsClient(ClientConfig(url=url)), ctx, SETTINGS)
        return out.send.frames

    cpu = time.process_time()
    frames = sum(await asyncio.gather(*(one() for _ in range(n))))
    return time.process_time() - cpu, frames


async def minimal_round(url: str, n: int, ctx: np.ndarray) -> tuple[float, int]:
    """The same frames on the same schedule, with websockets alone."""
    frames = frame_signal(ctx, FRAME)
    total = len(frames) + math.ceil(SETTINGS.turns.reply_timeout_s / 0.02)
    pcm = [(np.clip(f, -1, 1) * 32767).astype("<i2").tobytes() for f in frames]
    silence = bytes(2 * FRAME)
    hello = json.dumps({"type": "hello", "sample_rate": RATE, "frame_ms": 20, "version": 1,
                        "encoding": "pcm16le", "channels": 1}, separators=(",", ":"))  # fmt: skip

    async def one() -> int:
        loop = asyncio.get_running_loop()
        async with websockets.connect(url, compression=None, max_queue=None) as ws:
            await ws.send(hello)
            await ws.recv()

            async def drain() -> None:
                async for _ in ws:
                    pass

            reader = asyncio.create_task(drain())
            t0 = math.ceil(loop.time() * 1000) / 1000
            for k in range(total):
                delay = t0 + 0.02 * k - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                await ws.send(pcm[k] if k < len(pcm) else silence)
            reader.cancel()
        return total

    cpu = time.process_time()
    sent = sum(await asyncio.gather(*(one() for _ in range(n))))
    return time.process_time() - cpu, sent


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "command": " ".join(["python", *sys.argv]),
        "cores": os.cpu_count(),
        "load_before": os.getloadavg(),
    }
    if "ladder" in args.parts:
        fake_args = ("--latency", str(args.latency), "--hangover", "0.25")
        async with FakeModelProcess("pcm-ws", "delayed-echo", *fake_args) as fake:
            with tempfile.TemporaryDirectory() as tmp:
                base = args.base or await capacity(fake, Path(tmp), args)
                result["base"] = base
                runs = []
                for factor in (1, 2, 4):
                    runs.append(await ladder_run(fake, Path(tmp), factor * base, args,
                                                 admission=False))  # fmt: skip
                    print(json.dumps(runs[-1]), flush=True)
                runs.append(await ladder_run(fake, Path(tmp), 4 * base, args, admission=True))
                print(json.dumps(runs[-1]), flush=True)
        result["ladder"] = runs
    if "cpu" in args.parts:
        ctx = context(args.context_s)
        per_frame: dict[str, list[float]] = {"duplexsim": [], "websockets": []}
        async with FakeModelProcess("pcm-ws", "silent") as fake:
            for _ in range(args.rounds):
                for kind, fn in (("duplexsim", client_round), ("websockets", minimal_round)):
                    cpu, frames = await fn(fake.url, args.cpu_sessions, ctx)
                    per_frame[kind].append(1e6 * cpu / frames)
                    print(kind, round(per_frame[kind][-1], 1), "us/frame", flush=True)
        ratio = [
            a / b for a, b in zip(per_frame["duplexsim"], per_frame["websockets"], strict=True)
        ]
        result["cpu_us_per_frame"] = {k: [round(x, 1) for x in v] for k, v in per_frame.items()}
        result["cpu_ratio"] = [round(x, 2) for x in ratio]
    result["load_after"] = os.getloadavg()
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--base",
        type=int,
        default=0,
        help="the concurrency this machine paces (1x); 0 (default): find it first",
    )
    p.add_argument("--context-s", type=float, default=3.0)
    p.add_argument("--latency", type=float, default=0.5, help="the fake's latency (s)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cpu-sessions", type=int, default=8)
    p.add_argument("--parts", default="ladder,cpu")
    args = p.parse_args()
    result = eventloop.run(main_async(args))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
