"""``duplexsim view``: write a run's session pages and index, openable from disk."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from duplexsim.cli.options import add_run_paths_argument, run_folder

__all__ = ["register"]

DEFAULT_MAX_EMBED_S = 600.0  # as duplexsim.viewer.write, without importing the viewer here


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "view",
        help="session pages in the browser: both lanes, players on one playhead, scores",
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory (runs/<run-id>)")
    p.add_argument(
        "--sample",
        help="write only this session's page (the index only if there is none, or a partial one)",
    )
    p.add_argument("--out", type=Path, help="where the pages go (default RUN_DIR/view)")
    p.add_argument("--scorer", help="which cached scores to show (default: as `duplexsim report`)")
    p.add_argument(
        "--max-embed-s",
        type=_seconds,
        default=DEFAULT_MAX_EMBED_S,
        metavar="S",
        help="embed a session's audio in its page up to S seconds, its three players together "
        f"(default {DEFAULT_MAX_EMBED_S:.0f}); above that the page plays the run folder's WAV "
        "files",
    )
    add_run_paths_argument(p)
    p.set_defaults(func=_view)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"not a number of seconds >= 0: {text!r}")
    return value


def _view(args: argparse.Namespace) -> int:
    from duplexsim.viewer import write_view

    path = write_view(
        run_folder(args.run_dir, args),
        args.out,
        sample=args.sample,
        scorer=args.scorer,
        max_embed_s=args.max_embed_s,
    )
    print(path)
    return 0
