"""The demo at the machine's pace: wall time, retries, sessions at once and the capacity learnt,
for one or more checkouts side by side (alternating, so a machine shared with other jobs
disturbs each alike).

    python bench/demo_pace.py [--tree NAME=DIR ...] [--rounds 2] [--limit N] [--trace]

Each round runs ``duplexsim demo --no-score`` from each tree (its own ``.venv``) in turn, in a
fresh runs folder, and reads the runs' results back:

- wall s: the command's wall time (start-up of its fake and pool included, scoring not);
- sessions, retries (attempts beyond the first) and the samples retried;
- fidelity kept: the rows' ``input_faithful`` (a tree recorded before fidelity was told apart:
  the latest frame no later than 60 ms, from the row's send max), precise at first attempt:
  sessions whose timing kept its budget in their only attempt;
- at once: the mean sessions in flight (the run's own record where it keeps one, else the
  sessions' wall time, every attempt counted, over the wall time);
- capacity: what admission learnt (``pace`` in the run's metadata; "-" where none is kept);
- load: the machine's 1-minute load average before and after.

``--trace`` runs every process of the demo with ``bench/pacetrace`` (``sitecustomize``): each
writes its event loop's stalls by kind and its long callbacks (where they spent their time),
summarised per process after the table. Default trees: ``work`` = this checkout; add the code
before a change with ``--tree base=/path/to/checkout`` (a worktree with its own ``.venv``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRACER = REPO / "bench" / "pacetrace"
FIDELITY_MS = 60.0  # the one limit before each receiver declared its own


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", action="append", default=[], metavar="NAME=DIR")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--limit", type=int, help="samples per model (default: all 60)")
    p.add_argument("--concurrency", type=int, help="the demo's ceiling per model (its default)")
    p.add_argument("--trace", action="store_true", help="stalls and long callbacks per process")
    p.add_argument(
        "--sample",
        action="store_true",
        help="with --trace: sample where long callbacks spend their time (a thread per process "
        "waking every millisecond: it disturbs the pacing it looks at)",
    )
    p.add_argument("--timeout", type=float, default=900.0, help="per demo (s)")
    p.add_argument("--out", type=Path, help="every figure as JSON")
    p.add_argument("--keep", type=Path, help="keep each demo's runs under this folder")
    args = p.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree) or {"work": str(REPO)}
    results: list[dict[str, Any]] = []
    for k in range(args.rounds):
        for name, tree in trees.items():
            print(f"round {k + 1}: {name} ...", file=sys.stderr, flush=True)
            results.append({"tree": name, "round": k + 1, **one_demo(Path(tree), args)})
            print(row_text(results[-1]), file=sys.stderr, flush=True)
    print(table(results))
    for r in results:
        print(f"{r['tree']} round {r['round']}: imprecise by {r['imprecise_by']}; pace {r['pace']}")
    if args.trace:
        for r in results:
            print(f"\n{r['tree']} round {r['round']}:\n{trace_text(r['trace'])}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


def one_demo(tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="demo-pace-"))
    env = dict(os.environ)
    if args.trace:
        (work / "trace").mkdir()
        env |= {"DEMO_PACE_TRACE": str(work / "trace"), "PYTHONPATH": str(TRACER)}
        if args.sample:
            env["DEMO_PACE_SAMPLE"] = "1"
    cmd = [str(tree / ".venv" / "bin" / "duplexsim"), "demo", "--no-score", "--quiet"]
    cmd += ["--runs-dir", str(work / "runs"), "--run-prefix", "d"]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    if args.concurrency:
        cmd += ["--concurrency", str(args.concurrency)]
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                          timeout=args.timeout)  # fmt: skip
    wall = time.monotonic() - t0
    figures = {"wall_s": round(wall, 1), "load": (round(load0, 2), round(os.getloadavg()[0], 2))}
    figures |= {"rc": done.returncode, **read_runs(work / "runs", wall)}
    if args.trace:
        figures["trace"] = [json.loads(f.read_text()) for f in (work / "trace").glob("*.json")]
    if done.returncode not in (0, 1):
        figures["stderr"] = done.stderr[-2000:]
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        shutil.move(work, args.keep / f"{tree.name}-{time.strftime('%H%M%S')}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return figures


def read_runs(runs: Path, wall_s: float) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    pace: dict[str, Any] = {}
    for db in sorted(runs.glob("*/results*.sqlite")):
        con = sqlite3.connect(db)
        con.row_factory = sqlite3.Row
        rows += [dict(r) for r in con.execute("SELECT * FROM results")]
        meta = {k: json.loads(v) for k, v in con.execute("SELECT key, value FROM run_meta")}
        pace = meta.get("pace") or pace  # shared by the demo's runs: the last one's is latest
        con.close()
    n = len(rows)
    busy = sum((r["wall_s"] or 0.0) * r["attempts"] for r in rows)
    faithful = sum(_faithful(r) for r in rows if r["status"] != "failed")
    first = sum(r["attempts"] == 1 and r["timing_valid"] == 1 for r in rows)
    return {
        "sessions": n,
        "failed": sum(r["status"] == "failed" for r in rows),
        "retries": sum(r["attempts"] - 1 for r in rows),
        "retried": sum(r["attempts"] > 1 for r in rows),
        "fidelity_kept": faithful,
        "precise_first": first,
        "at_once": pace.get("mean_in_flight") or round(busy / wall_s, 1),
        "imprecise_by": dict(
            Counter(_reason(r["timing_invalid"]) for r in rows if r["timing_invalid"])
        ),
        "capacity": pace.get("capacity"),
        "pace": pace,
    }


def _faithful(row: dict[str, Any]) -> bool:
    """The row's own verdict; a tree recorded before fidelity was told apart: its send max
    against the limit it used then."""
    if row.get("input_faithful") is not None:
        return bool(row["input_faithful"])
    return (row["send_max_ms"] or 0.0) <= FIDELITY_MS


def _reason(text: str) -> str:
    """A precision reason without its figures: "latency window (model server)", "send p99"."""
    head = " ".join(text.split()[:2])
    if head == "latency window":
        parts = text.split("(", 1)[1].rstrip(")").split(", ")
        worst = max(parts, key=lambda p: float(p.rsplit(" ", 1)[1]))
        return f"latency window ({worst.rsplit(' ', 1)[0]})"
    return head


HEADERS = ["tree", "round", "wall s", "sessions", "retries (samples)", "fidelity kept",
           "precise at 1st attempt", "at once", "capacity", "load before/after"]  # fmt: skip


def cells(r: dict[str, Any]) -> list[str]:
    n = r["sessions"] or 1
    return [
        r["tree"],
        str(r["round"]),
        f"{r['wall_s']:.0f}",
        str(r["sessions"]),
        f"{r['retries']} ({r['retried']})",
        f"{r['fidelity_kept']}/{r['sessions']}",
        f"{r['precise_first']}/{r['sessions']} ({100 * r['precise_first'] / n:.0f}%)",
        f"{r['at_once']}",
        "-" if r["capacity"] is None else str(r["capacity"]),
        f"{r['load'][0]} / {r['load'][1]}",
    ]


def row_text(r: dict[str, Any]) -> str:
    return "  " + " | ".join(f"{h}: {c}" for h, c in zip(HEADERS, cells(r), strict=True))


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(cells(r)) + " |" for r in results]
    return "\n".join(lines)


def trace_text(records: list[dict[str, Any]]) -> str:
    out = []
    for rec in sorted(records, key=lambda x: x["role"]):
        stalls = rec["stalls"]
        kinds = ", ".join(
            f"{k} >=5ms {v['>=5ms']} >=20ms {v['>=20ms']} >=60ms {v['>=60ms']} (max {v['max_ms']})"
            for k, v in stalls.items()
        )
        out.append(f"  {rec['role']} (cpu {rec['cpu_s']} s of {rec['wall_s']} s): {kinds}")
        for s in rec.get("long_callback_samples", [])[:5]:
            where = " < ".join(s["stack"].split(" < ")[:5])
            out.append(f"      {s['samples']:4d} ms in {where}")
        for w in rec.get("long_steps_then_waiting_at", [])[:8]:
            out.append(f"      {w['count']:4d} task steps >= 3 ms, then waiting at {w['at']}")
        for c in rec.get("callbacks", [])[:6]:
            out.append(
                f"      callback {c['name']}: {c['count']} over 0.5 ms, {c['total_ms']} ms, "
                f"max {c['max_ms']} ms"
            )
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
