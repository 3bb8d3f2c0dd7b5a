"""Pacing of ``duplexsim run`` itself: sessions through the runner, with everything a run does.

    python bench/run_pacing.py [--concurrency 200] [--samples 400] [--context-s 10]
                               [--behaviour silent|echo]

``session_pacing.py`` drives ``run_session`` directly; this drives ``execute_run``, as the
``run`` command does: contexts decoded in the worker pool, the semaphore and staggered starts,
each finished session's bundle written by the pool and its row committed from a thread, new
sessions starting while others stream. The model is a pcm-ws fake in a second process
(``serve-model``): ``silent`` (no reply; the session ends at the reply timeout) or ``echo`` (each
session gets its last second of speech back after the context, so the run also receives audio,
measures replies and writes them). The benchmark is written to a temporary folder first:
``--samples`` samples of ``--context-s`` s (1 s of voiced signal then silence for ``silent``,
silence then 1 s of voiced signal for ``echo``), so a run of more samples than ``--concurrency``
has sessions ending and starting throughout.

Reports, from the run's results.sqlite (the runner keeps each session's send-time p50, p99 and
max), the distribution of those over sessions, plus wall time, this process's CPU and the share of
the whole machine's CPU in use (every core; the worker pool and the fake included).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import session_pacing as sp
import soundfile as sf

from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.turns import TurnSettings
from duplexsim.profiles.profile import ModelProfile
from duplexsim.run.runner import RunOptions, execute_run
from duplexsim.session import eventloop
from duplexsim.session.engine import SessionSettings


def write_benchmark(root: Path, samples: int, context_s: float, speech_last: bool) -> Path:
    context = sp.pacing_context(context_s)
    if speech_last:  # the turn ends with the context: a reply follows it
        context = context[::-1].copy()
    reference = sp.voiced_signal(0.5)
    (root / "audio").mkdir(parents=True)
    sf.write(root / "audio" / "context.wav", context, 16000, subtype="PCM_16")
    sf.write(root / "audio" / "reference.wav", reference, 16000, subtype="PCM_16")
    lines = [
        json.dumps(
            {
                "id": f"s{i}",
                "language": "en",
                "emotion": "Amusement",
                "context": "audio/context.wav",
                "reference": "audio/reference.wav",
            }
        )
        for i in range(samples)
    ]
    (root / "manifest.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def session_stats(db: Path) -> dict[str, Any]:
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT status, send_p50_ms, send_p99_ms, send_max_ms FROM results")
        got = rows.fetchall()
    p99 = np.array([r[2] for r in got if r[2] is not None])
    mx = np.array([r[3] for r in got if r[3] is not None])
    statuses: dict[str, int] = {}
    for r in got:
        statuses[r[0]] = statuses.get(r[0], 0) + 1

    def q(x: np.ndarray, p: float) -> float | None:
        return round(float(np.percentile(x, p)), 3) if x.size else None

    return {
        "sessions": len(got),
        "status": statuses,
        "session_p99_ms": {"median": q(p99, 50), "p90": q(p99, 90), "max": q(p99, 100)},
        "session_max_ms": {"median": q(mx, 50), "p90": q(mx, 90), "max": q(mx, 100)},
        "sessions_with_max_over_5_ms": int((mx > 5.0).sum()),
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bench = load_benchmark(
            write_benchmark(
                root / "bench", args.samples, args.context_s, args.behaviour != "silent"
            )
        )
        async with sp.fake(args.behaviour) as server:
            await sp.wait_idle(args.wait_idle)
            profile = ModelProfile(name=f"{args.behaviour}-fake", protocol="pcm-ws", url=server.url)
            opts = RunOptions(
                run_id="pacing",
                runs_dir=root / "runs",
                concurrency=args.concurrency,
                settings=SessionSettings(turns=TurnSettings(reply_timeout_s=5.0)),
                quiet=True,
            )
            wall, cpu, machine = time.monotonic(), time.process_time(), sp.machine_cpu()
            await execute_run(bench, profile, opts)
            wall, cpu = time.monotonic() - wall, time.process_time() - cpu
            busy = [b - a for a, b in zip(machine, sp.machine_cpu(), strict=True)]
        result = session_stats(opts.run_dir / "results.sqlite")
    return result | {
        "behaviour": args.behaviour,
        "concurrency": args.concurrency,
        "context_s": args.context_s,
        "wall_s": round(wall, 1),
        "client_cpu_cores": round(cpu / wall, 3),
        "machine_busy": round(busy[0] / busy[1], 3),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--concurrency", type=int, default=200)
    p.add_argument("--samples", type=int, default=400)
    p.add_argument("--context-s", type=float, default=10.0)
    p.add_argument("--wait-idle", type=float, default=30.0)
    p.add_argument("--behaviour", choices=("silent", "echo"), default="silent")
    args = p.parse_args()
    result = eventloop.run(measure(args))
    for key, value in result.items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
