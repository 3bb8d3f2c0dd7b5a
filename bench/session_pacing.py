"""Session pacing benchmark: send-time error, drift, latency truth and memory per session.

    python bench/session_pacing.py [--quick] [--out FILE.json]

The client side (run_session + PcmWsClient) runs in this process, exactly as the runner drives it:
staggered starts (index * (RAMP_STEP_S + frame_s / N)), the runner's worker_pool() as the executor,
the runner's GIL switch interval, the end of Speaker A's speech measured before the session starts.
The fake models run in child processes (FakeModelProcess, ``duplexsim serve-model``), all started
before the first session.

1. pacing   N = 1, 50, 200, 500 concurrent ~15 s sessions against ``silent`` servers: send error
            (actual send instant - due instant) pooled over every frame of every session; CPU of
            this process (process_time / wall), of the servers and pool workers (/proc/PID/stat)
            and of the whole machine (/proc/stat); RSS of this process (VmRSS, VmHWM).
2. drift    200 sessions streaming 60 s: send error of each session's first 5 s vs its last 5 s,
            and per 5 s window.
3. latency  ``delayed-echo`` servers with --latency 0.3 / 0.8 / 1.5 and --hangover 0.25, 20
            concurrent sessions each: measured latency minus injected latency.
4. memory   (peak RSS - RSS before the batch) / sessions, for the 200- and 500-session batches.

``--quick`` (smoke test, under a minute): pacing at 1 and 50 sessions of 10 s, 50 sessions of 10 s
drift, one latency (0.8 s). Prints Markdown tables; ``--out`` writes every number as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import platform
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import websockets

from clients.base import ClientConfig
from clients.pcm_ws.client import PcmWsClient
from simulator.core.timing import speech_end
from simulator.core.turns import TurnSettings
from simulator.fakes import FakeModelProcess
from simulator.runner import RAMP_STEP_S, SWITCH_INTERVAL_S, worker_pool
from simulator.session import CONTEXT_RATE, SessionOutcome, SessionSettings, run_session

PROTOCOL = "pcm-ws"
HANGOVER_S = 0.25  # server-side turn hangover for the latency runs (must be < every latency)
TICKS = os.sysconf("SC_CLK_TCK")

TARGETS = {
    "p99_ms_at_200": 1.5,
    "max_ms_at_200": 5.0,
    "p99_ms_at_500": 5.0,
    "drift_tolerance_ms": 0.5,  # last-5 s p50/p99 may exceed first-5 s p50/p99 by at most this
    "latency_p99_abs_error_ms": 5.0,
}


# --------------------------------------------------------------------------- signals


def voiced_signal(
    seconds: float, rate: int = CONTEXT_RATE, *, f0: float = 140.0, peak: float = 0.3
) -> np.ndarray:
    """Speech-like audio webrtcvad accepts (a copy of tests/conftest.py's ``voiced_signal``)."""
    t = np.arange(round(seconds * rate)) / rate
    tone = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 8))
    envelope = 0.6 + 0.4 * np.sin(2 * np.pi * 4.0 * t)
    x = tone * envelope
    return (peak * x / np.max(np.abs(x))).astype(np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(round(seconds * CONTEXT_RATE), dtype=np.float32)


def pacing_context(context_s: float) -> np.ndarray:
    """1 s of speech, then silence up to ``context_s``."""
    return np.concatenate((voiced_signal(1.0), silence(context_s - 1.0)))


def latency_context() -> np.ndarray:
    """0.5 s silence, 2 s speech, 0.5 s silence."""
    return np.concatenate((silence(0.5), voiced_signal(2.0), silence(0.5)))


# --------------------------------------------------------------------------- /proc probes


def rss_kb(field: str = "VmRSS") -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_peak_rss() -> bool:
    """Reset VmHWM (Linux >= 4.0: write 5 to clear_refs) so it holds the peak of one batch."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def pid_cpu_s(pid: int) -> float | None:
    """utime + stime of one process, in seconds (not its children)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(rest[11]) + int(rest[12])) / TICKS


def machine_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies over all CPUs."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values[:8])
    return total - idle, total


@dataclass
class Sample:
    wall: float
    cpu: float
    rss_kb: int
    servers: list[float | None]
    workers: list[float | None]
    machine: tuple[int, int]


class Probe:
    """Samples CPU time and RSS every ``interval_s`` while a batch runs (cheap: a few /proc reads)."""

    def __init__(self, server_pids: Sequence[int], worker_pids: Sequence[int], interval_s=0.25):
        self.server_pids = list(server_pids)
        self.worker_pids = list(worker_pids)
        self.interval_s = interval_s
        self.samples: list[Sample] = []

    def sample(self) -> Sample:
        s = Sample(
            time.monotonic(),
            time.process_time(),
            rss_kb(),
            [pid_cpu_s(p) for p in self.server_pids],
            [pid_cpu_s(p) for p in self.worker_pids],
            machine_jiffies(),
        )
        self.samples.append(s)
        return s

    async def run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self.interval_s)

    def shares(self, lo: float, hi: float) -> dict[str, Any]:
        """CPU shares (1.0 = one full core; machine: fraction of all cores) between the samples
        nearest to [lo, hi]."""
        inside = [s for s in self.samples if lo <= s.wall <= hi]
        if len(inside) < 2:
            return {}
        a, b = inside[0], inside[-1]
        dt = b.wall - a.wall
        if dt <= 0:
            return {}

        def share(x: float | None, y: float | None) -> float | None:
            return None if x is None or y is None else round((y - x) / dt, 3)

        busy = b.machine[0] - a.machine[0]
        total = b.machine[1] - a.machine[1]
        return {
            "window_s": round(dt, 2),
            "client": share(a.cpu, b.cpu),
            "servers": [share(x, y) for x, y in zip(a.servers, b.servers, strict=True)],
            "pool_workers": [share(x, y) for x, y in zip(a.workers, b.workers, strict=True)],
            "machine_busy": round(busy / total, 3) if total else None,
        }


class GcWatch:
    """Durations of the cyclic garbage collector's pauses (they stall the pacing loop)."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float]] = []
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.pauses.append((info["generation"], time.perf_counter() - self._start))

    def summary(self) -> dict[str, Any]:
        ms = [d * 1000 for _, d in self.pauses]
        gen2 = [d * 1000 for g, d in self.pauses if g == 2]
        return {
            "collections": len(ms),
            "gen2_collections": len(gen2),
            "max_pause_ms": round(max(ms), 3) if ms else 0.0,
            "max_gen2_pause_ms": round(max(gen2), 3) if gen2 else 0.0,
            "total_pause_ms": round(sum(ms), 3),
        }


# --------------------------------------------------------------------------- sessions


def stats(ms: np.ndarray) -> dict[str, Any]:
    if ms.size == 0:
        return {"frames": 0}
    p50, p99, p999 = np.percentile(ms, [50, 99, 99.9])
    return {
        "frames": int(ms.size),
        "p50_ms": round(float(p50), 4),
        "p99_ms": round(float(p99), 4),
        "p99_9_ms": round(float(p999), 4),
        "max_ms": round(float(ms.max()), 4),
        "min_ms": round(float(ms.min()), 4),
        "mean_ms": round(float(ms.mean()), 4),
        "frames_over_1_5_ms": int((ms > 1.5).sum()),
        "frames_over_5_ms": int((ms > 5.0).sum()),
        "frames_over_20_ms": int((ms > 20.0).sum()),
    }


@dataclass
class Record:
    """What is kept of one session; the outcome itself (audio, events) is dropped at once, so the
    RSS peak measures sessions in flight rather than finished ones."""

    index: int
    server: int
    status: str
    end_reason: str
    error: str | None
    t0: float | None  # absolute monotonic T0
    due_s: np.ndarray  # per frame, relative to T0
    err_ms: np.ndarray  # per frame: send instant - due instant
    send_p99_ms: float  # SendStats of the outcome (cross-check of err_ms)
    send_max_ms: float
    latency_s: float | None
    onset_s: float | None
    speech_end_s: float | None
    wall_s: float
    ended_at: float  # monotonic when run_session returned


def first_call_clock() -> tuple[Callable[[], float], list[float]]:
    """time.monotonic that remembers its first reading: run_session's first clock() call is T0."""
    first: list[float] = []

    def clock() -> float:
        t = time.monotonic()
        if not first:
            first.append(t)
        return t

    return clock, first


def record(index: int, server: int, outcome: SessionOutcome, t0: float | None) -> Record:
    sends = [e for e in outcome.events if e["dir"] == "send" and e["kind"] == "audio"]
    due = np.fromiter((e["due"] for e in sends), dtype=np.float64, count=len(sends))
    sent = np.fromiter((e["t"] for e in sends), dtype=np.float64, count=len(sends))
    t = outcome.timing
    return Record(
        index=index,
        server=server,
        status=outcome.status,
        end_reason=outcome.end_reason,
        error=outcome.error,
        t0=t0,
        due_s=due,
        err_ms=(sent - due) * 1000.0,  # event times are rounded to 1 us
        send_p99_ms=outcome.send.p99_ms,
        send_max_ms=outcome.send.max_ms,
        latency_s=t.latency_s if t else None,
        onset_s=t.onset_s if t else None,
        speech_end_s=t.speech_end_s if t else None,
        wall_s=outcome.wall_s,
        ended_at=time.monotonic(),
    )


@dataclass
class Batch:
    records: list[Record]
    probe: Probe
    gc: dict[str, Any]
    started: float
    finished: float
    rss_base_kb: int
    rss_hwm_kb: int | None  # VmHWM after the batch (None if it could not be reset)
    step_s: float


async def run_batch(
    n: int,
    urls: Sequence[str],
    context: np.ndarray,
    settings: SessionSettings,
    speech_end_s: float | None,
    pool: Any,
    probe_pids: tuple[Sequence[int], Sequence[int]],
) -> Batch:
    """N concurrent sessions, started like the runner starts them; session i uses urls[i % k]."""
    step_s = RAMP_STEP_S + settings.frame_ms / 1000.0 / n
    gc.collect()
    can_reset = reset_peak_rss()
    base = rss_kb()
    probe = Probe(*probe_pids)
    watch = GcWatch()

    async def one(i: int) -> Record:
        await asyncio.sleep(i * step_s)
        clock, first = first_call_clock()
        k = i % len(urls)
        client = PcmWsClient(ClientConfig(url=urls[k]))
        outcome = await run_session(
            client, context, settings, speech_end_s=speech_end_s, clock=clock, executor=pool
        )
        return record(i, k, outcome, first[0] if first else None)

    gc.callbacks.append(watch)
    sampler = asyncio.create_task(probe.run())
    started = time.monotonic()
    try:
        records = await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        finished = time.monotonic()
        probe.sample()
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
        gc.callbacks.remove(watch)
    hwm = rss_kb("VmHWM") if can_reset else None
    return Batch(list(records), probe, watch.summary(), started, finished, base, hwm, step_s)


def batch_report(b: Batch, n_servers: int) -> dict[str, Any]:
    recs = b.records
    n = len(recs)
    all_err = np.concatenate([r.err_ms for r in recs]) if recs else np.zeros(0)
    # steady state: every session has started (+1 s) and none has finished sending
    t0s = [r.t0 for r in recs if r.t0 is not None]
    ends = [r.t0 + r.due_s[-1] for r in recs if r.t0 is not None and r.due_s.size]
    steady: dict[str, Any] = {}
    if t0s and ends:
        lo, hi = max(t0s) + 1.0, min(ends)
        if hi - lo >= 1.0:
            parts = [
                r.err_ms[(r.t0 + r.due_s >= lo) & (r.t0 + r.due_s < hi)]
                for r in recs
                if r.t0 is not None
            ]
            steady = {
                "window_s": round(hi - lo, 2),
                "send": stats(np.concatenate(parts)),
                "cpu": b.probe.shares(lo, hi),
            }
    peak = max([s.rss_kb for s in b.probe.samples] + [b.rss_hwm_kb or 0])
    per_session_p99 = np.array([r.send_p99_ms for r in recs]) if recs else np.zeros(1)
    # cross-check: the percentiles recomputed from the event log match the session's SendStats
    check = max(
        (abs(float(np.percentile(r.err_ms, 99)) - r.send_p99_ms) for r in recs if r.err_ms.size),
        default=0.0,
    )
    statuses = Counter(r.status for r in recs)
    return {
        "sessions": n,
        "servers": n_servers,
        "stagger_step_s": round(b.step_s, 6),
        "wall_s": round(b.finished - b.started, 2),
        "session_wall_s_median": round(float(np.median([r.wall_s for r in recs])), 2),
        "frames_per_session_median": int(np.median([r.due_s.size for r in recs])),
        "status": dict(statuses),
        "end_reasons": dict(Counter(r.end_reason for r in recs)),
        "errors": sorted({r.error for r in recs if r.error})[:5],
        "send": stats(all_err),
        "send_steady": steady.get("send", {}),
        "steady_window_s": steady.get("window_s"),
        "per_session_p99_ms": {
            "median": round(float(np.median(per_session_p99)), 4),
            "max": round(float(per_session_p99.max()), 4),
        },
        "sendstats_crosscheck_max_diff_ms": round(check, 4),
        "cpu": b.probe.shares(b.started, b.finished + 1.0),
        "cpu_steady": steady.get("cpu", {}),
        "rss": {
            "base_kb": b.rss_base_kb,
            "peak_sampled_kb": max(s.rss_kb for s in b.probe.samples),
            "peak_hwm_kb": b.rss_hwm_kb,
            "peak_kb": peak,
            "per_session_kb": round((peak - b.rss_base_kb) / n, 1) if n else None,
        },
        "gc": b.gc,
    }


def drift_report(b: Batch, window_s: float = 5.0) -> dict[str, Any]:
    recs = [r for r in b.records if r.due_s.size]
    first = np.concatenate([r.err_ms[r.due_s < window_s] for r in recs])
    last = np.concatenate([r.err_ms[r.due_s > r.due_s[-1] - window_s] for r in recs])
    longest = max(r.due_s[-1] for r in recs)
    windows = []
    for k in range(int(np.ceil(longest / window_s))):
        lo, hi = k * window_s, (k + 1) * window_s
        part = np.concatenate([r.err_ms[(r.due_s >= lo) & (r.due_s < hi)] for r in recs])
        windows.append({"from_s": lo, "to_s": hi, **stats(part)})
    p50s = [w["p50_ms"] for w in windows if w["frames"]]
    mids = [w["from_s"] + window_s / 2 for w in windows if w["frames"]]
    slope = float(np.polyfit(mids, p50s, 1)[0]) * 60.0 if len(p50s) >= 2 else 0.0
    return {
        "first_5s": stats(first),
        "last_5s": stats(last),
        "windows": windows,
        "p50_slope_ms_per_min": round(slope, 5),
        "stream_s_median": round(float(np.median([r.due_s[-1] for r in recs])), 2),
    }


def latency_report(b: Batch, injected_s: float) -> dict[str, Any]:
    lat = [r.latency_s for r in b.records if r.latency_s is not None]
    err = (np.array(lat) - injected_s) * 1000.0
    out: dict[str, Any] = {
        "injected_s": injected_s,
        "sessions": len(b.records),
        "measured": len(lat),
        "status": dict(Counter(r.status for r in b.records)),
        "end_reasons": dict(Counter(r.end_reason for r in b.records)),
        "errors": sorted({r.error for r in b.records if r.error})[:5],
        "speech_end_s": sorted({r.speech_end_s for r in b.records if r.speech_end_s is not None}),
        "send": stats(np.concatenate([r.err_ms for r in b.records])),
    }
    if err.size:
        abs_err = np.abs(err)
        out.update(
            {
                "error_ms": [round(float(e), 3) for e in err],
                "p50_error_ms": round(float(np.percentile(err, 50)), 3),
                "p99_abs_error_ms": round(float(np.percentile(abs_err, 99)), 3),
                "max_abs_error_ms": round(float(abs_err.max()), 3),
                "min_error_ms": round(float(err.min()), 3),
                "max_error_ms": round(float(err.max()), 3),
            }
        )
    return out


# --------------------------------------------------------------------------- plan and main


@dataclass(frozen=True)
class Plan:
    sizes: tuple[int, ...]
    pacing_context_s: float
    pacing_timeout_s: float
    drift_sessions: int
    drift_context_s: float
    drift_timeout_s: float
    latencies: tuple[float, ...]
    latency_sessions: int
    split_above: int  # batches larger than this are split over two silent servers
    memory_sizes: tuple[int, ...]


def make_plan(args: argparse.Namespace) -> Plan:
    if args.quick:
        return Plan((1, 50), 5.0, 5.0, 50, 5.0, 5.0, (0.8,), 20, args.split_above, ())
    sizes = tuple(int(x) for x in args.sizes.split(","))
    drift_timeout = args.drift_s - 10.0
    return Plan(
        sizes, 10.0, 5.0, args.drift_sessions, 10.0, drift_timeout,
        (0.3, 0.8, 1.5), 20, args.split_above, (200, 500),
    )  # fmt: skip


def servers_for(n: int, plan: Plan) -> int:
    return 2 if n > plan.split_above else 1


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    plan = make_plan(args)
    result: dict[str, Any] = {
        "command": " ".join(["python", *sys.argv]),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "plan": vars(plan) | {"quick": bool(args.quick)},
        "targets": TARGETS,
        "switch_interval_s": SWITCH_INTERVAL_S,
    }
    pace_ctx = pacing_context(plan.pacing_context_s)
    drift_ctx = pacing_context(plan.drift_context_s)
    lat_ctx = latency_context()
    n_silent = max([servers_for(n, plan) for n in (*plan.sizes, plan.drift_sessions)])
    with worker_pool() as pool:
        loop = asyncio.get_running_loop()
        ends = {}
        for name, ctx in (("pacing", pace_ctx), ("drift", drift_ctx), ("latency", lat_ctx)):
            # measured once, in the pool (this also starts the pool's worker before any session)
            ends[name] = await loop.run_in_executor(pool, speech_end, ctx, CONTEXT_RATE)
        worker_pids = list(getattr(pool, "_processes", {}) or {})
        async with contextlib.AsyncExitStack() as stack:
            silent = [
                await stack.enter_async_context(FakeModelProcess(PROTOCOL, "silent"))
                for _ in range(n_silent)
            ]
            echoes = [
                await stack.enter_async_context(
                    FakeModelProcess(
                        PROTOCOL,
                        "delayed-echo",
                        "--latency",
                        str(lat),
                        "--hangover",
                        str(HANGOVER_S),
                    )
                )
                for lat in plan.latencies
            ]
            log(f"servers up: {len(silent)} silent, {len(echoes)} delayed-echo; pool {worker_pids}")
            interval = sys.getswitchinterval()
            sys.setswitchinterval(SWITCH_INTERVAL_S)  # as the runner does during a run
            try:
                result["pacing"] = await pacing(
                    plan, silent, pace_ctx, ends["pacing"], pool, worker_pids
                )
                result["drift"] = await drift(
                    plan, silent, drift_ctx, ends["drift"], pool, worker_pids
                )
                result["latency"] = await latency(
                    plan, echoes, lat_ctx, ends["latency"], pool, worker_pids
                )
            finally:
                sys.setswitchinterval(interval)
    result["verdict"] = verdict(result, plan)
    result["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    return result


def pids(servers: Sequence[FakeModelProcess]) -> list[int]:
    return [p.pid for s in servers if (p := getattr(s, "_proc", None)) is not None]


async def pacing(plan, silent, ctx, end_s, pool, worker_pids) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    settings = SessionSettings(turns=TurnSettings(reply_timeout_s=plan.pacing_timeout_s))
    out = []
    for n in plan.sizes:
        used = silent[: servers_for(n, plan)]
        log(f"pacing: {n} sessions over {len(used)} silent server(s) ...")
        b = await run_batch(
            n, [s.url for s in used], ctx, settings, end_s, pool, (pids(used), worker_pids)
        )
        rep = batch_report(b, len(used))
        out.append(rep)
        s = rep["send"]
        log(
            f"  p50 {s['p50_ms']:.3f}  p99 {s['p99_ms']:.3f}  max {s['max_ms']:.3f} ms; "
            f"client cpu {rep['cpu'].get('client')}; status {rep['status']}; {rep['wall_s']} s"
        )
    return out


async def drift(plan, silent, ctx, end_s, pool, worker_pids) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    n = plan.drift_sessions
    used = silent[: servers_for(n, plan)]
    settings = SessionSettings(turns=TurnSettings(reply_timeout_s=plan.drift_timeout_s))
    log(f"drift: {n} sessions for ~{plan.drift_context_s + plan.drift_timeout_s:.0f} s ...")
    b = await run_batch(
        n, [s.url for s in used], ctx, settings, end_s, pool, (pids(used), worker_pids)
    )
    rep = batch_report(b, len(used)) | drift_report(b)
    log(
        f"  first 5 s p99 {rep['first_5s']['p99_ms']:.3f}, last 5 s p99 {rep['last_5s']['p99_ms']:.3f} ms"
    )
    return rep


async def latency(plan, echoes, ctx, end_s, pool, worker_pids) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    out = []
    for lat, server in zip(plan.latencies, echoes, strict=True):
        log(f"latency: {plan.latency_sessions} sessions, delayed-echo {lat} s ...")
        b = await run_batch(
            plan.latency_sessions, [server.url], ctx, SessionSettings(), end_s, pool,
            (pids([server]), worker_pids),
        )  # fmt: skip
        rep = latency_report(b, lat)
        rep["cpu"] = batch_report(b, 1)["cpu"]
        out.append(rep)
        log(
            f"  p50 {rep.get('p50_error_ms')}  p99|e| {rep.get('p99_abs_error_ms')} ms; {rep['status']}"
        )
    return out


def verdict(r: dict[str, Any], plan: Plan) -> dict[str, Any]:
    v: dict[str, Any] = {}
    by_n = {p["sessions"]: p for p in r["pacing"]}
    if 200 in by_n:
        s = by_n[200]["send"]
        v["p99_at_200"] = {"value_ms": s["p99_ms"], "target_ms": TARGETS["p99_ms_at_200"],
                           "met": s["p99_ms"] <= TARGETS["p99_ms_at_200"]}  # fmt: skip
        v["max_at_200"] = {"value_ms": s["max_ms"], "target_ms": TARGETS["max_ms_at_200"],
                           "met": s["max_ms"] <= TARGETS["max_ms_at_200"]}  # fmt: skip
    if 500 in by_n:
        s = by_n[500]["send"]
        v["p99_at_500"] = {"value_ms": s["p99_ms"], "target_ms": TARGETS["p99_ms_at_500"],
                           "met": s["p99_ms"] <= TARGETS["p99_ms_at_500"]}  # fmt: skip
    d = r["drift"]
    tol = TARGETS["drift_tolerance_ms"]
    v["no_drift"] = {
        "first_5s_p50_ms": d["first_5s"]["p50_ms"],
        "last_5s_p50_ms": d["last_5s"]["p50_ms"],
        "first_5s_p99_ms": d["first_5s"]["p99_ms"],
        "last_5s_p99_ms": d["last_5s"]["p99_ms"],
        "tolerance_ms": tol,
        "met": d["last_5s"]["p50_ms"] <= d["first_5s"]["p50_ms"] + tol
        and d["last_5s"]["p99_ms"] <= d["first_5s"]["p99_ms"] + tol,
    }
    for lat in r["latency"]:
        e = lat.get("p99_abs_error_ms")
        v[f"latency_{lat['injected_s']}"] = {
            "p99_abs_error_ms": e,
            "target_ms": TARGETS["latency_p99_abs_error_ms"],
            "met": e is not None
            and e <= TARGETS["latency_p99_abs_error_ms"]
            and lat["measured"] == lat["sessions"],
        }
    return v


def machine_info() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    mem_kb = 0
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        mem_kb = int(next(ln for ln in f if ln.startswith("MemTotal")).split()[1])
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "mem_gb": round(mem_kb / 2**20, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": np.__version__,
        "websockets": websockets.__version__,
    }


# --------------------------------------------------------------------------- tables


def fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def tables(r: dict[str, Any]) -> str:
    lines = ["### Pacing (send error = actual - due send instant, all frames of all sessions)", ""]
    lines += [
        "| sessions | servers | frames | p50 ms | p99 ms | p99.9 ms | max ms | frames > 5 ms "
        "| client CPU (run / steady) | server CPU (steady) | machine busy (steady) | status |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---|",
    ]
    for p in r["pacing"]:
        s, c, cs = p["send"], p["cpu"], p["cpu_steady"]
        servers = " + ".join(pct(x) for x in cs.get("servers", [])) or "-"
        status = ", ".join(f"{k} {v}" for k, v in p["status"].items())
        lines.append(
            f"| {p['sessions']} | {p['servers']} | {s['frames']} | {fmt(s['p50_ms'])} "
            f"| {fmt(s['p99_ms'])} | {fmt(s['p99_9_ms'])} | {fmt(s['max_ms'])} "
            f"| {s['frames_over_5_ms']} | {pct(c.get('client'))} / {pct(cs.get('client'))} "
            f"| {servers} | {pct(cs.get('machine_busy'))} | {status} |"
        )
    lines += ["", "Steady state only (all sessions started + 1 s, none finished):", ""]
    lines += ["| sessions | window s | p50 ms | p99 ms | max ms |", "|---:|---:|---:|---:|---:|"]
    for p in r["pacing"]:
        s = p["send_steady"]
        if s:
            lines.append(
                f"| {p['sessions']} | {fmt(p['steady_window_s'], 1)} | {fmt(s['p50_ms'])} "
                f"| {fmt(s['p99_ms'])} | {fmt(s['max_ms'])} |"
            )
    lines += ["", "### Memory (RSS of this process)", ""]
    lines += [
        "| sessions | base MB | peak MB | per session KB | max GC pause ms |",
        "|---:|---:|---:|---:|---:|",
    ]
    for p in [*r["pacing"], r["drift"]]:
        m = p["rss"]
        tag = f"{p['sessions']}" + (" (drift)" if p is r["drift"] else "")
        lines.append(
            f"| {tag} | {m['base_kb'] / 1024:.0f} | {m['peak_kb'] / 1024:.0f} "
            f"| {fmt(m['per_session_kb'], 0)} | {fmt(p['gc']['max_pause_ms'], 1)} |"
        )
    d = r["drift"]
    lines += [
        "",
        f"### Drift ({d['sessions']} sessions, ~{d['stream_s_median']:.0f} s each)",
        "",
        "| window | frames | p50 ms | p99 ms | max ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, s in (("first 5 s", d["first_5s"]), ("last 5 s", d["last_5s"])):
        lines.append(
            f"| {name} | {s['frames']} | {fmt(s['p50_ms'])} | {fmt(s['p99_ms'])} "
            f"| {fmt(s['max_ms'])} |"
        )
    for w in d["windows"]:
        if w["frames"]:
            lines.append(
                f"| {w['from_s']:.0f}-{w['to_s']:.0f} s | {w['frames']} | {fmt(w['p50_ms'])} "
                f"| {fmt(w['p99_ms'])} | {fmt(w['max_ms'])} |"
            )
    lines += [
        "",
        f"p50 trend over the 5 s windows: {d['p50_slope_ms_per_min']:+.4f} ms/min",
        "",
        "### Latency truth (measured latency - injected latency)",
        "",
        "| injected s | sessions | measured | p50 ms | p99 abs ms | max abs ms | min / max ms |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for lat in r["latency"]:
        lines.append(
            f"| {lat['injected_s']} | {lat['sessions']} | {lat['measured']} "
            f"| {fmt(lat.get('p50_error_ms'))} | {fmt(lat.get('p99_abs_error_ms'))} "
            f"| {fmt(lat.get('max_abs_error_ms'))} | {fmt(lat.get('min_error_ms'))} / "
            f"{fmt(lat.get('max_error_ms'))} |"
        )
    lines += ["", "### Targets", "", "| target | result | met |", "|---|---|---|"]
    for name, v in r["verdict"].items():
        shown = {k: x for k, x in v.items() if k != "met"}
        lines.append(f"| {name} | {shown} | {'yes' if v['met'] else 'NO'} |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="reduced smoke run (under a minute)")
    p.add_argument("--out", type=Path, help="write every number as JSON here")
    p.add_argument("--sizes", default="1,50,200,500", help="concurrency levels of the pacing runs")
    p.add_argument("--drift-sessions", type=int, default=200)
    p.add_argument("--drift-s", type=float, default=60.0, help="length of the drift sessions")
    p.add_argument(
        "--split-above",
        type=int,
        default=200,
        help="batches with more sessions than this use two silent servers (default 200)",
    )
    args = p.parse_args()
    result = asyncio.run(main_async(args))
    print(tables(result))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
