"""``duplexsim view``: write a run's session pages and index, openable from disk."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "view",
        help="session pages in the browser: both lanes, players on one playhead, scores",
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory (runs/<run-id>)")
    p.add_argument("--sample", help="write only this session's page (and the index)")
    p.add_argument("--out", type=Path, help="where the pages go (default RUN_DIR/view)")
    p.add_argument("--scorer", help="which cached scores to show (default: as `duplexsim report`)")
    p.set_defaults(func=_view)


def _view(args: argparse.Namespace) -> int:
    from simulator.viewer import write_view

    path = write_view(args.run_dir, args.out, sample=args.sample, scorer=args.scorer)
    print(path)
    return 0
