"""Where a pacing run's late frames come from: stalls of the whole loop, collections, or the VM.

    python bench/pacing_stalls.py [--sessions 200] [--threshold-ms 3] [--out FILE.json]

Runs one batch of ``session_pacing.py``'s pacing sessions (same sessions, same fake, same loop) and
attributes its late frames:

- by phase: the ramp (until 1 s after the last session started), the steady state, the session
  ends;
- clustering: how many 20 ms windows hold the late frames (a few crowded windows: the whole loop
  stalled; many sparse ones: load);
- every garbage collection over 1 ms, with its generation and when it ran;
- every loop callback that ran longer than the threshold, with the coroutine chain it ran (where
  it was suspended afterwards) and the loop thread's CPU time during it: CPU time close to the
  wall time means the callback itself worked that long (or the VM took the vCPU away mid-step,
  which a guest cannot tell apart); much less means the thread waited (the GIL, a page fault).

Timing each callback costs a few percent of the loop's time; read figures side by side with
``session_pacing.py``, not as a substitute.
"""

from __future__ import annotations

import argparse
import asyncio
import asyncio.events
import gc
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import session_pacing as sp

from duplexsim.core.timing import speech_end
from duplexsim.core.turns import TurnSettings
from duplexsim.run.runner import worker_pool
from duplexsim.session import eventloop
from duplexsim.session.engine import CONTEXT_RATE, SessionSettings


@contextmanager
def collections_timed(into: list[dict[str, Any]]) -> Iterator[None]:
    started: list[float] = []

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[:] = [time.monotonic()]
        elif started:
            into.append({"at": started[0], "ms": (time.monotonic() - started[0]) * 1e3, **info})

    gc.callbacks.append(watch)
    try:
        yield
    finally:
        gc.callbacks.remove(watch)


def _chain(callback: Callable[..., Any]) -> str:
    """The coroutine chain of the task a callback steps, innermost last."""
    task = getattr(callback, "__self__", None)
    coro = task.get_coro() if isinstance(task, asyncio.Task) else None
    names = []
    while coro is not None and getattr(coro, "cr_frame", None) is not None:
        names.append(f"{coro.cr_frame.f_code.co_name}:{coro.cr_frame.f_lineno}")
        coro = coro.cr_await
    return " > ".join(names) or repr(callback)[:60]


@contextmanager
def slow_callbacks(into: list[dict[str, Any]], threshold_s: float) -> Iterator[None]:
    """Record loop callbacks that run longer than ``threshold_s`` (patches Handle._run)."""
    original = asyncio.events.Handle._run

    def timed(handle: asyncio.Handle) -> None:
        wall, cpu = time.monotonic(), time.thread_time()
        original(handle)
        took = time.monotonic() - wall
        if took > threshold_s:
            into.append(
                {
                    "at": wall,
                    "ms": took * 1e3,
                    "thread_cpu_ms": (time.thread_time() - cpu) * 1e3,
                    "chain": _chain(handle._callback),  # type: ignore[attr-defined]
                }
            )

    asyncio.events.Handle._run = timed  # type: ignore[method-assign]
    try:
        yield
    finally:
        asyncio.events.Handle._run = original  # type: ignore[method-assign]


def phases(batch: sp.Batch) -> dict[str, dict[str, Any]]:
    due = np.concatenate([r.t0 + r.due_s for r in batch.records if r.t0 is not None])
    err = np.concatenate([r.err_ms for r in batch.records if r.t0 is not None])
    last_start = max(r.t0 for r in batch.records if r.t0 is not None)
    first_end = min(r.t0 + r.due_s[-1] for r in batch.records if r.t0 is not None)
    masks = {
        "ramp": due < last_start + 1.0,
        "steady": (due >= last_start + 1.0) & (due < first_end),
        "ends": due >= first_end,
    }
    out = {name: sp.stats(err[m]) for name, m in masks.items() if m.any()}
    out["all"] = sp.stats(err)
    return out


def clustering(batch: sp.Batch, late_ms: float, window_s: float = 0.02) -> dict[str, Any]:
    sent = np.concatenate(
        [r.t0 + r.due_s + r.err_ms / 1e3 for r in batch.records if r.t0 is not None]
    )
    err = np.concatenate([r.err_ms for r in batch.records if r.t0 is not None])
    windows, counts = np.unique(np.floor(sent[err > late_ms] / window_s), return_counts=True)
    top = np.sort(counts)[::-1]
    return {
        "late_ms": late_ms,
        "late_frames": int(counts.sum()),
        "windows": int(windows.size),
        "share_in_top_10_windows": round(float(top[:10].sum() / max(1, counts.sum())), 3),
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    ctx = sp.pacing_context(10.0)
    settings = SessionSettings(turns=TurnSettings(reply_timeout_s=5.0))
    collections: list[dict[str, Any]] = []
    slow: list[dict[str, Any]] = []
    with worker_pool() as pool:
        loop = asyncio.get_running_loop()
        end_s = await loop.run_in_executor(pool, speech_end, ctx, CONTEXT_RATE)
        async with sp.fake("silent") as server:
            await sp.wait_idle(args.wait_idle)
            with collections_timed(collections), slow_callbacks(slow, args.threshold_ms / 1e3):
                batch = await sp.run_batch(
                    args.sessions,
                    [server.url],
                    ctx,
                    settings,
                    end_s,
                    pool,
                    (sp.pids([server]), []),
                )
    origin = batch.started
    return {
        "sessions": args.sessions,
        "phases": phases(batch),
        "clustering": clustering(batch, args.threshold_ms),
        "collections": [
            {**c, "at": round(c["at"] - origin, 3), "ms": round(c["ms"], 2)}
            for c in collections
            if c["ms"] > 1.0 and batch.started <= c["at"] <= batch.finished
        ],
        "slow_callbacks": [
            {
                **s,
                "at": round(s["at"] - origin, 3),
                "ms": round(s["ms"], 2),
                "thread_cpu_ms": round(s["thread_cpu_ms"], 2),
            }
            for s in slow
        ],
    }


def report(r: dict[str, Any]) -> str:
    lines = [f"### Late frames of {r['sessions']} sessions, by phase", ""]
    lines += ["| phase | frames | p50 ms | p99 ms | max ms |", "|---|---:|---:|---:|---:|"]
    for name, s in r["phases"].items():
        lines.append(f"| {name} | {s['frames']} | {s['p50_ms']} | {s['p99_ms']} | {s['max_ms']} |")
    c = r["clustering"]
    lines += [
        "",
        f"Frames later than {c['late_ms']:g} ms: {c['late_frames']} in {c['windows']} windows of "
        f"20 ms; {100 * c['share_in_top_10_windows']:.0f}% of them in the 10 most crowded.",
        "",
        "Collections over 1 ms: "
        + (
            ", ".join(
                f"gen {g['generation']} at {g['at']} s {g['ms']} ms" for g in r["collections"]
            )
            or "none"
        ),
        "",
        "| loop callback at s | wall ms | loop thread CPU ms | chain |",
        "|---:|---:|---:|---|",
    ]
    lines += [
        f"| {s['at']} | {s['ms']} | {s['thread_cpu_ms']} | {s['chain']} |"
        for s in r["slow_callbacks"]
    ]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sessions", type=int, default=200)
    p.add_argument("--threshold-ms", type=float, default=3.0, help="a late frame; a slow callback")
    p.add_argument("--wait-idle", type=float, default=30.0, help="s to wait for a quiet machine")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    result = eventloop.run(measure(args))
    print(report(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
