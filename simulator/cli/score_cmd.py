"""``duplexsim score`` and ``duplexsim report``: scores for a run's replies and references, and the
leaderboard of any number of runs."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
import time
from argparse import SUPPRESS
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from duplexsim.cli.options import (
    add_run_paths_argument,
    add_selection_arguments,
    deprecated_alias,
    run_folder,
    select_samples,
)
from duplexsim.core.errors import ConfigError
from duplexsim.core.runfolder import RunFolder
from duplexsim.core.shown import terminal_lines
from duplexsim.runscores.score import score_run
from duplexsim.scoring.models.precision import PRECISIONS
from duplexsim.scoring.models.weights import DOWNLOADABLE

__all__ = ["check_runs", "register", "report_runs", "score_runs"]

AUTO = "auto"
SCORE_DEADLINE_S = 600.0  # per batch of clips; a CPU scorer may take a while


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("score", help="score each reply and reference of runs (cached per scorer)")
    p.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    add_selection_arguments(p)
    add_scorer_arguments(p)
    p.add_argument(
        "--rescore",
        action="store_true",
        help="score every clip anew, references included, whatever the caches hold",
    )
    add_run_paths_argument(p)
    p.set_defaults(func=_score)
    r = sub.add_parser("report", help="leaderboard of scored runs: terminal, Markdown, HTML, JSON")
    r.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    r.add_argument("--scorer", help="which cached scores to use (default: the run's best)")
    r.add_argument("--out", type=Path, help="report folder (default runs/report-<time>)")
    r.add_argument("--seed", type=int, default=0, help="seed of permutations and bootstrap")
    add_run_paths_argument(r)
    r.set_defaults(func=_report)


def add_scorer_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("scoring")
    g.add_argument(
        "--scorer",
        default=AUTO,
        help="prosody, empathic-insight-voice-small or -large, an installed plugin's name or "
        "module:Class (default: empathic-insight-voice-small with --model-path or once "
        "`duplexsim scorer download` installed it, else prosody)",
    )
    g.add_argument("--model-path", type=Path, help="local folder with the scorer's weights")
    g.add_argument(
        "--torch-device", default="cpu", help="cpu or cuda:N (in-process scoring; default cpu)"
    )
    g.add_argument(
        "--device", dest="torch_device", action=deprecated_alias("--torch-device"), help=SUPPRESS
    )
    g.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="Empathic-Insight-Voice precision, in-process scoring (default: bf16 on CUDA and on "
        "CPUs with AMX-BF16 or AVX512-BF16, else fp32; see docs/scorers.md); scores cached "
        "at another precision are rescored; prosody has none",
    )
    g.add_argument(
        "--endpoint",
        help="scoring service address, e.g. tcp://gpu-host:5555 (default: score in this process)",
    )
    g.add_argument(
        "--server-key",
        type=Path,
        help="the broker's CURVE public key file (non-loopback endpoints)",
    )


AUTO_NEURAL = "empathic-insight-voice-small"  # used without flags once installed


def _installed(name: str) -> Path | None:
    from duplexsim.scoring.models.weights import installed_scorer

    return installed_scorer(name)


def _neural_ready() -> bool:
    """Whether the default neural scorer can run without flags: installed by `scorer download`,
    or in the Hugging Face cache with torch and transformers there to run it."""
    if _installed(AUTO_NEURAL):
        return True
    from duplexsim.scoring.models.weights import in_hf_cache

    runnable = all(importlib.util.find_spec(m) for m in ("torch", "transformers"))
    return runnable and in_hf_cache(AUTO_NEURAL)


def resolve_scorer_name(args: argparse.Namespace) -> str:
    """The scorer's name; ConfigError if ``--precision`` does not fit it, ``--endpoint`` or
    ``--factory`` (benchmark commands)."""
    from duplexsim.scoring.models import check_precision, is_known_scorer, scorer_names

    name = AUTO_NEURAL if args.model_path or _neural_ready() else "prosody"
    if args.scorer != AUTO:
        name = str(args.scorer)
    if args.precision is not None and args.endpoint:
        raise ConfigError(
            "--precision applies to in-process scoring; give it to the scoring workers "
            "(duplexsim scoring worker --precision)"
        )
    if args.precision is not None and getattr(args, "factory", None):
        raise ConfigError("--precision applies to the registry's scorers, not to --factory")
    in_process = not args.endpoint and not getattr(args, "factory", None)
    if getattr(args, "factory", None) and args.scorer == AUTO:
        raise ConfigError("--factory needs --scorer NAME: the name its scores are recorded under")
    if in_process and not is_known_scorer(name):  # a service's workers name their own
        raise ConfigError(
            f"unknown scorer '{name}' (known: {', '.join(scorer_names())}; "
            "or a 'module:Class' name)"
        )
    check_precision(name, args.precision)
    return name


async def score_runs(args: argparse.Namespace, run_dirs: Sequence[Path]) -> tuple[str, int]:
    """What was scored, one line per run, and how many clips stayed unscored."""
    from duplexsim.scoring.service.api import open_scoring
    from duplexsim.scoring.service.client import ScoringClient

    name = resolve_scorer_name(args)
    scoring = open_scoring(
        args.endpoint,
        server_public_key=str(args.server_key) if args.server_key else None,
        device=args.torch_device,
        model_path=args.model_path,
        precision=args.precision,
    )

    async def score(clips: list[np.ndarray]) -> Sequence[Any]:
        return await scoring.score(clips, name, deadline_s=SCORE_DEADLINE_S)

    weights = None if args.endpoint else (args.model_path or _installed(name))
    lines = []
    unscored = 0
    try:
        if isinstance(scoring, ScoringClient):
            await scoring.probe()  # no broker: say so now, not after a deadline per batch
        for run_dir in run_dirs:
            started = time.monotonic()
            rescore = bool(getattr(args, "rescore", False))
            run = run_folder(run_dir, args)
            outcome = await score_run(run, name, score, rescore=rescore, samples=_chosen(args, run))
            shared = f", {outcome.shared} references from the benchmark's" if outcome.shared else ""
            source = "" if weights is None else f"; weights {weights}"
            if weights is None and not args.endpoint and name in DOWNLOADABLE:
                source = "; weights from the Hugging Face cache"
            lines.append(
                f"{run_dir}: {outcome.scored} clips scored, {outcome.cached} from cache{shared}, "
                f"{len(outcome.errors)} unscored ({time.monotonic() - started:.1f} s, "
                f"{outcome.identity.label()}){source}"
            )
            lines += [f"  {key}: {why}" for key, why in sorted(outcome.errors.items())[:10]]
            unscored += len(outcome.errors)
    finally:
        await scoring.aclose()
    return "\n".join(lines), unscored


def _chosen(args: argparse.Namespace, run_dir: RunFolder) -> set[str] | None:
    """The sample ids ``--sample``/``--limit`` pick in a run (None: no selection, all)."""
    patterns, limit = getattr(args, "sample", []), getattr(args, "limit", None)
    if not patterns and limit is None:
        return None
    from duplexsim.run.store import read_results

    _, rows = read_results(run_dir)
    return set(select_samples([r.sample_id for r in rows], patterns, limit))


def _score(args: argparse.Namespace) -> int:
    check_runs(args.run_dirs)
    text, unscored = asyncio.run(score_runs(args, args.run_dirs))
    print(terminal_lines(text))  # run folders' text, shown as it is
    if unscored:
        print(f"duplexsim: {unscored} clip(s) left unscored", file=sys.stderr)
        return 1
    return 0


def check_runs(run_dirs: Sequence[Path]) -> None:
    for run_dir in run_dirs:
        if not run_dir.is_dir() or not any(run_dir.glob("results*.sqlite")):
            raise ConfigError(f"{run_dir}: not a run directory (no results*.sqlite)")


def report_runs(
    run_dirs: Sequence[Path | RunFolder], scorer: str | None, out: Path, seed: int
) -> tuple[str, dict[str, Path]]:
    from duplexsim.report.data import build_report
    from duplexsim.report.tables import terminal_report
    from duplexsim.report.write import write_report

    reports = [build_report(d, scorer, seed=seed) for d in run_dirs]
    return terminal_report(reports), write_report(reports, out)


def _report(args: argparse.Namespace) -> int:
    check_runs(args.run_dirs)
    out = args.out or args.run_dirs[0].parent / f"report-{time.strftime('%Y%m%d-%H%M%S')}"
    runs = [run_folder(d, args) for d in args.run_dirs]
    text, paths = report_runs(runs, args.scorer, out, args.seed)
    print(terminal_lines(text))  # run folders' text, shown as it is
    print("\nreport: " + ", ".join(str(p) for p in paths.values()))
    if "png_emotion" not in paths:
        from duplexsim.report.write import PLOTS_MISSING

        print(PLOTS_MISSING)
    return 0
