"""``duplexsim scorer``: the scorers there are, and their weights (download, where installed)."""

from __future__ import annotations

import argparse
from pathlib import Path

from duplexsim.core.textable import render_table

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("scorer", help="scorers: list them, download their weights")
    actions = p.add_subparsers(dest="scorer_action", metavar="ACTION", required=True)
    lst = actions.add_parser("list", help="known scorers and where their weights are installed")
    lst.set_defaults(func=_list)
    dl = actions.add_parser(
        "download",
        help="fetch a scorer's encoder and heads from the Hugging Face Hub into the folder "
        "scoring reads by default (needs the scoring extra)",
    )
    dl.add_argument("name", help="empathic-insight-voice-small or empathic-insight-voice-large")
    dl.add_argument(
        "--dir",
        type=Path,
        help="where to put them (default: $DUPLEXSIM_SCORERS/NAME or "
        "~/.cache/duplexsim/scorers/NAME, used without flags); another folder is used with "
        "--model-path",
    )
    dl.add_argument(
        "--all-heads",
        action="store_true",
        help="every head of the model, not only the 12 MIRRORING emotions' (about 16 GB, not 3.5)",
    )
    dl.set_defaults(func=_download)


def _list(args: argparse.Namespace) -> int:
    from duplexsim.scoring.models import scorer_names
    from duplexsim.scoring.models.weights import DOWNLOADABLE, installed_scorer

    rows = []
    for name in scorer_names():
        where = installed_scorer(name)
        weights = str(where) if where else ("not installed" if name in DOWNLOADABLE else "-")
        rows.append([name, weights])
    print(render_table(["scorer", "weights"], rows, align="ll"))
    return 0


def _download(args: argparse.Namespace) -> int:
    from duplexsim.scoring.models.weights import download_scorer, scorer_home

    folder = download_scorer(args.name, args.dir, all_heads=args.all_heads)
    used = args.dir is None or folder.resolve() == (scorer_home() / args.name).resolve()
    hint = (
        "used by `duplexsim score` without flags"
        if used
        else f"use it with --scorer {args.name} --model-path {folder}"
    )
    print(f"{args.name}: weights in {folder} ({hint})")
    return 0
