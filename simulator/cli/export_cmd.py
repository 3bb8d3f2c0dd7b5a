"""``duplexsim export``: a run's per-sample log (JSON lines or CSV)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from duplexsim.cli.options import add_run_paths_argument, run_folder
from duplexsim.core.errors import ConfigError
from duplexsim.core.shown import for_terminal

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("export", help="export a run: per-sample log, Full-Duplex-Bench layout")
    actions = p.add_subparsers(dest="export_action", metavar="WHAT", required=True)
    s = actions.add_parser(
        "samples",
        help="one record per sample: result, timing, validity, scores of every scorer, paths",
    )
    s.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    s.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    s.add_argument("--out", type=Path, help="file to write (default: standard output)")
    add_run_paths_argument(s)
    s.set_defaults(func=_samples)
    f = actions.add_parser(
        "fdb",
        help="Full-Duplex-Bench layout: OUT/<id>/input.wav and output.wav at the input's "
        "rate and length, for its evaluation scripts",
    )
    f.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    f.add_argument("out", type=Path, metavar="OUT")
    add_run_paths_argument(f)
    f.set_defaults(func=_fdb)


def _samples(args: argparse.Namespace) -> int:
    from duplexsim.export.samples import sample_records, write_records

    records = sample_records(run_folder(args.run_dir, args))
    if args.out is None:
        try:
            write_records(records, args.format, sys.stdout)
            sys.stdout.flush()
        except BrokenPipeError:  # the reader stopped early (| head): not an error
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - so exit's flush cannot fail
        return 0
    try:
        with args.out.open("w", encoding="utf-8", newline="") as fh:
            n = write_records(records, args.format, fh)
    except OSError as exc:
        raise ConfigError(f"{args.out}: cannot write ({exc.strerror})") from None
    print(f"{n} samples written to {args.out}", file=sys.stderr)
    return 0


def _fdb(args: argparse.Namespace) -> int:
    from duplexsim.export.fdb import export_fdb

    result = export_fdb(run_folder(args.run_dir, args), args.out)
    print(f"{result.written} sessions written to {args.out} (<id>/input.wav, <id>/output.wav)")
    for sample_id, why in sorted(result.skipped.items()):
        print(for_terminal(f"  skipped {sample_id}: {why}"))
    return 0
