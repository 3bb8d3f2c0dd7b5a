"""``duplexsim replay``: re-run recorded sessions without the model and report timing differences."""

from __future__ import annotations

import argparse
from pathlib import Path

from duplexsim.cli.options import add_run_paths_argument, run_folder
from duplexsim.core.shown import terminal_lines
from duplexsim.replay.sessions import render_replay, replay_run
from duplexsim.session import eventloop

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "replay",
        help="replay recorded sessions, compare their timing, and report sessions whose "
        "recorded sends broke their timing budget or whose reply re-measures differently",
    )
    p.add_argument("run_dir", type=Path, help="a run directory (runs/<run-id>)")
    p.add_argument("--sample", action="append", default=[], help="replay only this sample id")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument(
        "--tolerance-ms",
        type=float,
        default=5.0,
        help="timing difference still counted as agreement (default 5)",
    )
    add_run_paths_argument(p)
    p.set_defaults(func=_replay)


def _replay(args: argparse.Namespace) -> int:
    run = run_folder(args.run_dir, args)
    results = eventloop.run(replay_run(run, args.sample, args.concurrency))
    print(terminal_lines(render_replay(results, args.tolerance_ms)))  # a run from elsewhere
    ok = all(r.agrees(args.tolerance_ms) and not r.over_budget for r in results)
    return 0 if ok else 1
