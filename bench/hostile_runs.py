"""Every command that reads a run folder, on run folders edited by hand as a hostile sender would:
what the user sees (the last line), peak RSS and wall time of each command on each folder.

A real two-session run is recorded once (a local fake pcm-ws model), scored with prosody, then
copied and damaged one way per case. Each command runs in its own process under a 2 GB address
space limit and a 30 s timeout; a file outside the run folder holds a marker, and a command whose
output holds it has published that file.

    python bench/hostile_runs.py --work /tmp/hostile            # every case
    python bench/hostile_runs.py --work /tmp/hostile --case fifo-events --command replay
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import soundfile as sf

MARKER = "OUTSIDE-MARKER-7f3a"
LIMIT_KB = 2_000_000  # ulimit -v
TIMEOUT_S = 30
COMMANDS = {
    "view": ["view", "{run}", "--out", "{out}/view"],
    "report": ["report", "{run}", "--out", "{out}/report"],
    "score": ["score", "{run}", "--scorer", "prosody"],
    "replay": ["replay", "{run}"],
    "export": ["export", "samples", "{run}", "--out", "{out}/samples.jsonl"],
    "export-fdb": ["export", "fdb", "{run}", "{out}/fdb"],
}


def _voiced(seconds: float, f0: float) -> np.ndarray:
    t = np.arange(round(seconds * 16000)) / 16000
    x = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 8))
    x = x * (0.6 + 0.4 * np.sin(2 * np.pi * 4.0 * t))
    return (0.3 * x / np.max(np.abs(x))).astype(np.float32)


def _benchmark(root: Path) -> Path:
    lines = []
    for i, emotion in enumerate(("Anger", "Sadness")):
        ctx = np.zeros(int(1.4 * 16000), np.float32)
        ctx[3200 : 3200 + 16000] = _voiced(1.0, 120.0 + 10 * i)
        (root / "audio").mkdir(parents=True, exist_ok=True)
        sf.write(root / "audio" / f"s{i}.ctx.wav", ctx, 16000, subtype="PCM_16")
        sf.write(root / "audio" / f"s{i}.ref.wav", _voiced(0.6, 200.0), 16000, subtype="PCM_16")
        lines.append(
            {
                "id": f"s{i}",
                "language": "en",
                "emotion": emotion,
                "context": f"audio/s{i}.ctx.wav",
                "reference": f"audio/s{i}.ref.wav",
            }
        )
    (root / "manifest.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return root


async def _record(run_dir: Path, bench_dir: Path) -> None:
    from duplexsim.clients.fakekit.behaviours import behaviour_factory
    from duplexsim.clients.pcm_ws.server import start_server
    from duplexsim.core.benchmark import load_benchmark
    from duplexsim.core.timing import TimingBudget
    from duplexsim.core.turns import TurnSettings
    from duplexsim.profiles.profile import ModelProfile
    from duplexsim.run.runner import RunOptions, execute_run
    from duplexsim.session.engine import SessionSettings

    settings = SessionSettings(
        turns=TurnSettings(hangover_s=0.5, max_reply_s=3.0, reply_timeout_s=1.0),
        stall_timeout_s=1.0,
        deadline_margin_s=3.0,
        budget=TimingBudget(1000.0, 5000.0, 5000.0, 5000.0, 1000.0),
    )
    server = await start_server(behaviour_factory("echo", hangover_s=0.25))
    try:
        profile = ModelProfile(name="fake-echo", protocol="pcm-ws", url=server.url)
        opts = RunOptions(
            run_id=run_dir.name, runs_dir=run_dir.parent, settings=settings, quiet=True
        )
        await execute_run(load_benchmark(bench_dir), profile, opts)
    finally:
        await server.aclose()


def base_run(work: Path) -> Path:
    """The recorded, scored run every case starts from, and a bundle outside it with a marker."""
    run = work / "base" / "runs" / "r1"
    if not (run / "results.sqlite").is_file():
        shutil.rmtree(work / "base", ignore_errors=True)
        asyncio.run(_record(run, _benchmark(work / "base" / "bench")))
        _cli(["score", str(run), "--scorer", "prosody"], {})
    outside = work / "outside" / "s1"
    if not outside.is_dir():
        shutil.copytree(run / "sessions" / "s1", outside)
        with open(outside / "events.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"t": 0.5, "dir": "recv", "kind": "transcript", "text": MARKER}))
            fh.write("\n")
        (work / "outside" / "secret.txt").write_text(MARKER + "\n")
    return run


# ---- the cases: each damages a copy of the run ---------------------------------------------------


def _sql(run: Path, statement: str, *params: object) -> None:
    db = sqlite3.connect(run / "results.sqlite")
    with db:
        db.execute(statement, params)
    db.close()


def _meta(run: Path, change: Callable[[dict], None], sample: str = "s1") -> None:
    path = run / "sessions" / sample / "meta.json"
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


def _event(run: Path, text: str, sample: str = "s1") -> None:
    with open(run / "sessions" / sample / "events.jsonl", "a", encoding="utf-8") as fh:
        fh.write(text + "\n")


def _run_meta(run: Path, key: str, value: object) -> None:
    _sql(run, "INSERT OR REPLACE INTO run_meta VALUES (?, ?)", key, json.dumps(value))


def _benchmark_digest(run: Path, digest: str) -> None:
    db = sqlite3.connect(run / "results.sqlite")
    (text,) = db.execute("SELECT value FROM run_meta WHERE key = 'benchmark'").fetchone()
    db.close()
    _run_meta(run, "benchmark", {**json.loads(text), "digest": digest})
    shutil.rmtree(run / "scores", ignore_errors=True)  # so that score scores references anew


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _stall(run: Path, reply_timeout_s: float) -> None:
    """A recording whose model never answered, replayed with a long wait for the answer."""
    events = run / "sessions" / "s1" / "events.jsonl"
    kept = [ln for ln in events.read_text().splitlines() if '"dir":"recv"' not in ln]
    events.write_text("".join(ln + "\n" for ln in kept))

    def change(meta: dict) -> None:
        meta["settings"]["turns"]["reply_timeout_s"] = reply_timeout_s
        meta["settings"]["stall_timeout_s"] = reply_timeout_s  # silence is not a stall either

    _meta(run, change)


def _silent_wav(path: Path, seconds: float, rate: int) -> None:
    """A PCM16 mono WAV of ``seconds`` of silence whose data is a hole (no disk cost)."""
    frames = int(seconds * rate)
    fmt = struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
    head = b"RIFF" + struct.pack("<I", 36 + 2 * frames) + b"WAVEfmt " + fmt
    head += b"data" + struct.pack("<I", 2 * frames)
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(len(head) + 2 * frames)


def _long_session(run: Path, seconds: float) -> None:
    _silent_wav(run / "sessions" / "s1" / "input.wav", seconds, 16000)
    _silent_wav(run / "sessions" / "s1" / "output.wav", seconds, 24000)


def _sparse(path: Path, size: int) -> None:
    with open(path, "ab") as fh:
        fh.truncate(size)


CASES: dict[str, Callable[[Path, Path], None]] = {
    "bundle-dotdot": lambda run, out: _sql(
        run,
        "UPDATE results SET bundle = ? WHERE sample_id = 's1'",
        os.path.relpath(out / "outside" / "s1", run),  # ../../../../../outside/s1
    ),
    "bundle-absolute": lambda run, out: _sql(
        run, "UPDATE results SET bundle = ? WHERE sample_id = 's1'", str(out / "outside" / "s1")
    ),
    "bundle-symlink": lambda run, out: (
        shutil.rmtree(run / "sessions" / "s1"),
        (run / "sessions" / "s1").symlink_to(out / "outside" / "s1"),
    ),
    "context-outside": lambda run, out: _meta(
        run, lambda m: m["sample"].update(context=str(out / "outside" / "secret.txt"))
    ),
    "events-sparse-2g": lambda run, out: _sparse(run / "sessions" / "s1" / "events.jsonl", 2 << 30),
    "events-t-1e13": lambda run, out: _event(
        run, '{"t": 1e13, "dir": "recv", "kind": "transcript", "text": "x"}'
    ),
    "events-fifo": lambda run, out: _fifo(run / "sessions" / "s1" / "events.jsonl"),
    "settings-huge": lambda run, out: _meta(
        run,
        lambda m: m["settings"]["turns"].update(
            reply_timeout_s=1e9, max_reply_s=1e9, hangover_s=1e9
        ),
    ),
    "results-string": lambda run, out: _sql(
        run, "UPDATE results SET latency_s = 'soon', onset_s = 'x' WHERE sample_id = 's1'"
    ),
    "results-inf": lambda run, out: _sql(
        run, "UPDATE results SET onset_s = ? WHERE sample_id = 's1'", math.inf
    ),
    "events-inf": lambda run, out: _event(
        run, '{"t": 0.5, "dir": "send", "kind": "audio", "n": Infinity, "due": 0.5}'
    ),
    "events-nan": lambda run, out: _event(
        run, '{"t": 0.5, "dir": "send", "kind": "audio", "n": NaN, "due": 0.5}'
    ),
    "score-shape": lambda run, out: _edit_scores(run),
    "meta-deep": lambda run, out: (run / "sessions" / "s1" / "meta.json").write_text(
        '{"bundle_version": 2, "kind": "benchmark", "model": ' + _deep(100_000) + "}"
    ),
    "events-deep": lambda run, out: _event(run, '{"t": 0.5, "x": ' + _deep(100_000) + "}"),
    "replay-stall-1e5": lambda run, out: _stall(run, 1e5),
    "replay-stall-1200": lambda run, out: _stall(run, 1200.0),
    "long-session-30min": lambda run, out: _long_session(run, 1800.0),
    "digest-dotdot": lambda run, out: _benchmark_digest(run, "../../poison"),
    "digest-absolute": lambda run, out: _benchmark_digest(run, str(out / "poison-abs")),
}


def _edit_scores(run: Path) -> None:
    path = run / "scores" / "prosody.json"
    data = json.loads(path.read_text())
    data["items"]["reply/s1"]["values"] = [[1.0, 2.0], [3.0]]
    path.write_text(json.dumps(data))


# ---- running a command -------------------------------------------------------------------------


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "duplexsim", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=False,
    )


def measure(argv: list[str], env: dict[str, str]) -> tuple[int, str, float, float, bool]:
    """(exit status, last line, peak RSS in MiB, seconds, whether it was killed at the timeout)."""
    script = f"ulimit -v {LIMIT_KB}; exec timeout -k 5 {TIMEOUT_S} " + " ".join(
        _quote(a) for a in [sys.executable, "-m", "duplexsim", *argv]
    )
    started = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, **env},
        text=True,
    )
    assert proc.stdout is not None
    text = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - started
    lines = [ln for ln in text.splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    if MARKER in text:
        last = f"[MARKER PRINTED] {last}"
    killed = proc.returncode in (124, 137, -9)
    return proc.returncode, last[:160], usage.ru_maxrss / 1024, seconds, killed


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


def _published(out: Path) -> bool:
    for path in out.rglob("*"):
        if path.is_file() and not path.is_symlink():
            with open(path, "rb") as fh:
                if MARKER.encode() in fh.read():
                    return True
    return False


def run_case(work: Path, base: Path, case: str, commands: list[str]) -> list[str]:
    lines = []
    for command in commands:
        dest = work / "cases" / case / command
        shutil.rmtree(dest, ignore_errors=True)
        run = dest / "runs" / "r1"
        shutil.copytree(base, run, symlinks=True, ignore=shutil.ignore_patterns("view"))
        out = dest / "out"
        out.mkdir()
        CASES[case](run, work)
        argv = [a.format(run=run, out=out) for a in COMMANDS[command]]
        env = {"DUPLEXSIM_CACHE": str(dest / "cache")}
        code, last, rss, seconds, killed = measure(argv, env)
        published = " PUBLISHED-OUTSIDE-FILE" if _published(out) else ""
        traps = (dest / "poison", work / "poison-abs")  # where a digest taken as a path leads
        poisoned = " WROTE-OUTSIDE" if any(p.exists() for p in traps) else ""
        end = "killed at timeout" if killed else f"exit {code}"
        lines.append(
            f"{case:18} {command:10} {end:17} {rss:8.0f} MiB {seconds:6.1f} s  "
            f"{last}{published}{poisoned}"
        )
        print(lines[-1], flush=True)
        for trap in traps:
            shutil.rmtree(trap, ignore_errors=True)
        if not os.environ.get("HOSTILE_KEEP"):
            shutil.rmtree(run / "sessions", ignore_errors=True)  # the sparse file, the FIFO
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--case", action="append", choices=sorted(CASES))
    p.add_argument("--command", action="append", choices=sorted(COMMANDS))
    args = p.parse_args()
    work = args.work.resolve()
    base = base_run(work)
    for case in args.case or list(CASES):
        run_case(work, base, case, args.command or list(COMMANDS))


if __name__ == "__main__":
    main()
