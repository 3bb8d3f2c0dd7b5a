"""``duplexsim benchmark check``: validate a benchmark and summarise what it holds;
``benchmark build``: build one from two-speaker calls; ``benchmark validate``: the mirroring
validation analysis of calls (docs/benchmark-build.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from duplexsim.cli.options import add_outside_paths_argument
from duplexsim.cli.score_cmd import add_scorer_arguments, resolve_scorer_name
from duplexsim.core.benchmark import Benchmark, load_benchmark
from duplexsim.core.emotions import EMOTIONS
from duplexsim.core.errors import ConfigError
from duplexsim.core.textable import render_table

if TYPE_CHECKING:
    from duplexsim.corpus import BuildOptions, BuildResult, Mirroring, ValidateOptions
    from duplexsim.scoring.service.api import Scoring

__all__ = ["register", "summarise"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = sub.add_parser("benchmark", help="check, build and validate benchmarks")
    bench_sub = bench.add_subparsers(dest="benchmark_command", metavar="ACTION", required=True)
    check = bench_sub.add_parser(
        "check", help="validate a benchmark; print counts by emotion x language and durations"
    )
    check.add_argument("path", help="benchmark directory or manifest.jsonl")
    check.add_argument(
        "--quick",
        action="store_true",
        help="read audio headers only instead of decoding every file",
    )
    add_outside_paths_argument(check)
    _add_power_arguments(check)
    check.set_defaults(func=_check)
    _register_build(bench_sub)
    _register_validate(bench_sub)
    fdb = bench_sub.add_parser(
        "import-fdb",
        help="a timing-only benchmark over Full-Duplex-Bench's <task>/<id>/input.wav folders",
    )
    fdb.add_argument("path", type=Path, metavar="DIR", help="its data folder, or one task folder")
    fdb.add_argument("--out", type=Path, help="where manifest.jsonl goes (default: DIR)")
    fdb.add_argument("--language", default="en", help="language of every sample (default en)")
    fdb.add_argument("--force", action="store_true", help="replace an existing manifest.jsonl")
    fdb.add_argument(
        "--reactive",
        action="store_true",
        help="v1.5 folders as partner scripts: clean_input.wav, and the overlap placed as far "
        "into the model's own speech as it fell after the user's speech",
    )
    add_outside_paths_argument(fdb)  # --out outside DIR: the manifest points out of its folder
    fdb.set_defaults(func=_import_fdb)


def _check(args: argparse.Namespace) -> int:
    bench = load_benchmark(
        args.path,
        audio_check="header" if args.quick else "full",
        allow_outside=args.allow_outside_paths,
    )
    line = detectable_line(bench, args)  # a bad flag fails before anything is printed
    print(summarise(bench))
    if line:
        print(f"\n{line}")
    return 0


def _add_power_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "minimum detectable difference (how big a difference in match rate N can see)"
    )
    g.add_argument(
        "--assume-rate",
        type=float,
        default=0.25,
        metavar="RATE",
        help="match rate assumed for the models compared, 0..1 (default 0.25)",
    )
    g.add_argument(
        "--assume-icc",
        type=float,
        default=0.05,
        metavar="ICC",
        help="intra-cluster correlation of matches among samples of one source_id, 0..1 "
        "(default 0.05; no effect without source_id)",
    )
    g.add_argument(
        "--models",
        type=int,
        default=2,
        help="how many models will be compared: alpha is Holm's first step over their pairs "
        "(default 2)",
    )
    g.add_argument("--alpha", type=float, default=0.05, help="family level (default 0.05)")
    g.add_argument("--power", type=float, default=0.8, help="power (default 0.8)")


def detectable_line(bench: Benchmark, args: argparse.Namespace) -> str | None:
    """The benchmark's minimum detectable difference from assumed rates (None: nothing scored)."""
    from duplexsim.scoring.power import detectable
    from duplexsim.scoring.resample import Clusters

    scored = [s for s in bench if s.emotion is not None]
    if not scored:
        return None
    checks = (
        ("--assume-rate", args.assume_rate, 0.0, 1.0),
        ("--assume-icc", args.assume_icc, 0.0, 1.0),
        ("--alpha", args.alpha, 1e-9, 1.0 - 1e-9),
        ("--power", args.power, 0.01, 0.999),
    )
    for flag, value, low, high in checks:
        if not low <= value <= high:
            raise ConfigError(f"{flag} must be between {low:g} and {high:g}, got {value:g}")
    if args.models < 2:
        raise ConfigError(f"--models must be at least 2, got {args.models}")
    clusters = Clusters.of([s.source_id for s in scored], len(scored))
    icc = args.assume_icc if clusters.clustered else 0.0
    found = detectable(
        clusters.sizes(),
        args.assume_rate,
        icc,
        models=args.models,
        alpha=args.alpha,
        power=args.power,
    )
    return f"{found.describe()}; {clusters.describe()}"


def _import_fdb(args: argparse.Namespace) -> int:
    from duplexsim.export.fdb import import_fdb

    result = import_fdb(
        args.path,
        args.out or args.path,
        language=args.language,
        force=args.force,
        allow_outside=args.allow_outside_paths,
        reactive=args.reactive,
    )
    tasks = ", ".join(f"{task} {n}" for task, n in result.tasks.items())
    print(f"{result.manifest}: {sum(result.tasks.values())} timing-only samples ({tasks})")
    return 0


def summarise(bench: Benchmark) -> str:
    """Counts by emotion x language and duration statistics."""
    languages = sorted({s.language for s in bench})
    counts = Counter((s.emotion, s.language) for s in bench)
    rows: list[list[object]] = []
    for emotion in EMOTIONS:
        row = [counts[(emotion.name, lang)] for lang in languages]
        rows.append([emotion.display, *row, sum(row)])
    totals = [sum(counts[(e.name, lang)] for e in EMOTIONS) for lang in languages]
    rows.append(["total", *totals, sum(totals)])
    parts = [
        f"{bench.manifest}: {len(bench)} samples, {len(languages)} languages, "
        f"{sum(1 for e in EMOTIONS if any(counts[(e.name, lang)] for lang in languages))} emotions",
        "",
        render_table(["emotion", *languages, "total"], rows),
        "",
        _durations(bench),
    ]
    timing_only = sum(1 for s in bench if s.emotion is None)
    if timing_only:
        parts.append(f"\ntiming only (no emotion or reference): {timing_only} samples")
    tasks = Counter(s.task for s in bench if s.task)
    if tasks:
        parts.append("tasks: " + ", ".join(f"{t} {n}" for t, n in sorted(tasks.items())))
    missing = [e.display for e in EMOTIONS if not any(counts[(e.name, lang)] for lang in languages)]
    if missing and timing_only < len(bench):
        parts.append(f"\nno samples for: {', '.join(missing)}")
    return "\n".join(parts)


def _durations(bench: Benchmark) -> str:
    rows: list[list[object]] = []
    for label, values in (
        ("context", [s.context_duration_s for s in bench]),
        ("reference", [s.reference_duration_s for s in bench]),
    ):
        known = [v for v in values if v is not None]
        if not known:
            rows.append([label, "-", "-", "-", "-", "-"])
            continue
        rows.append(
            [
                label,
                min(known),
                statistics.median(known),
                statistics.fmean(known),
                max(known),
                sum(known) / 60.0,
            ]
        )
    return render_table(["duration (s)", "min", "median", "mean", "max", "total min"], rows)


# ------------------------------------------------------------------------- build and validate


def _register_build(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "build",
        help="build a MIRRORING-style benchmark from two-speaker call recordings",
        description="Build a benchmark from two-speaker calls (docs/benchmark-build.md).",
    )
    p.add_argument("calls", nargs="+", metavar="CALLS", help="call listing (CSV or JSONL)")
    p.add_argument("--out", required=True, type=Path, help="benchmark folder to write")
    _add_turn_arguments(p, build=True)
    g = p.add_argument_group("balancing")
    g.add_argument("--cap-top", type=int, default=4, help="cap the N most frequent emotions (4)")
    g.add_argument("--cap", type=int, default=150, help="samples kept per capped emotion (150)")
    g.add_argument("--seed", type=int, default=0, help="seed of the capping draw (0)")
    o = p.add_argument_group("output")
    o.add_argument("--audio-format", choices=("flac", "wav"), default="flac")
    o.add_argument("--overwrite", action="store_true", help="replace a non-empty --out folder")
    o.add_argument("--quiet", action="store_true", help="no progress lines")
    _add_scoring_arguments(p)
    p.set_defaults(func=_build)


def _register_validate(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "validate",
        help="share of adjacent turns with the same dominant emotion vs a permutation baseline",
        description="The mirroring validation analysis (docs/benchmark-build.md).",
    )
    p.add_argument("calls", nargs="+", metavar="CALLS", help="call listing (CSV or JSONL)")
    _add_turn_arguments(p, build=False)
    g = p.add_argument_group("statistics")
    g.add_argument("--permutations", type=int, default=1000, help="seeded shuffles (1000)")
    g.add_argument("--seed", type=int, default=0, help="seed of the shuffles (0)")
    g.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers as JSON")
    g.add_argument("--quiet", action="store_true", help="no progress lines")
    _add_scoring_arguments(p)
    p.set_defaults(func=_validate)


def _add_turn_arguments(p: argparse.ArgumentParser, *, build: bool) -> None:
    g = p.add_argument_group("turns")
    g.add_argument("--min-pause", type=float, default=0.5, help="bridge shorter pauses (0.5 s)")
    g.add_argument("--min-turn", type=float, default=0.5, help="shortest turn (0.5 s)")
    if build:
        g.add_argument(
            "--max-gap", type=float, default=5.0, help="reply starts within this of A's end (5 s)"
        )
        g.add_argument("--context", type=float, default=10.0, help="target context length (10 s)")
        g.add_argument("--max-context", type=float, help="longest context (1.5 x --context)")
        g.add_argument(
            "--boundary-pause",
            type=float,
            default=0.3,
            help="silence of both speakers that makes a pause boundary (0.3 s)",
        )
        g.add_argument(
            "--lead", type=float, default=0.2, help="silence kept before the context (0.2 s)"
        )
    else:
        g.add_argument(
            "--max-gap",
            type=float,
            help="only replies starting 0..S after the turn (default: all adjacent pairs)",
        )
    g.add_argument(
        "--max-clip", type=float, default=30.0, help="scored clips and references (30 s)"
    )
    g.add_argument("--vad", choices=("webrtc", "energy"), default="webrtc")
    g.add_argument("--vad-aggressiveness", type=int, default=2, choices=range(4))
    g.add_argument(
        "--length-tolerance",
        type=float,
        default=0.05,
        help="two mono files of a call may differ this much in length (0.05 s)",
    )


def _add_scoring_arguments(p: argparse.ArgumentParser) -> None:
    add_scorer_arguments(p)
    p.add_argument(
        "--factory",
        metavar="MODULE:CALLABLE",
        help="build scorers with this instead of the registry (plugins, tests)",
    )


def _options(args: argparse.Namespace, *, build: bool) -> BuildOptions | ValidateOptions:
    from duplexsim.core.vad import VadConfig
    from duplexsim.corpus import BuildOptions, ValidateOptions
    from duplexsim.corpus.balance import BalanceConfig
    from duplexsim.corpus.turns import TurnConfig

    try:
        vad = VadConfig(kind=args.vad, aggressiveness=args.vad_aggressiveness)
        common: dict[str, Any] = {
            "min_pause_s": args.min_pause,
            "min_turn_s": args.min_turn,
            "max_reference_s": args.max_clip,
        }
        if args.length_tolerance < 0:
            raise ValueError("--length-tolerance must be >= 0")
        if not build:
            return ValidateOptions(
                turns=TurnConfig(**common),
                vad=vad,
                max_gap_s=args.max_gap,
                permutations=args.permutations,
                seed=args.seed,
                length_tolerance_s=args.length_tolerance,
            )
        turns = TurnConfig(
            **common,
            max_gap_s=args.max_gap,
            context_s=args.context,
            max_context_s=args.max_context,
            boundary_pause_s=args.boundary_pause,
            lead_s=args.lead,
        )
        return BuildOptions(
            turns=turns,
            balance=BalanceConfig(top=args.cap_top, cap=args.cap, seed=args.seed),
            vad=vad,
            audio_format=args.audio_format,
            length_tolerance_s=args.length_tolerance,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _open_scoring(args: argparse.Namespace) -> Scoring:
    from duplexsim.scoring.service.api import open_scoring
    from duplexsim.scoring.service.cli import load_factory

    return open_scoring(
        args.endpoint,
        server_public_key=str(args.server_key) if args.server_key else None,
        device=args.torch_device,
        model_path=args.model_path,
        precision=args.precision,
        factory=load_factory(args.factory) if args.factory else None,
    )


def _progress(args: argparse.Namespace) -> Callable[[str], None] | None:
    if args.quiet:
        return None
    return lambda line: print(line, file=sys.stderr, flush=True)


def _build(args: argparse.Namespace) -> int:
    from duplexsim.corpus import BuildOptions, build_benchmark
    from duplexsim.corpus.report import steps_table

    opts = _options(args, build=True)
    assert isinstance(opts, BuildOptions)
    scorer = resolve_scorer_name(args)

    async def go() -> BuildResult:
        scoring = _open_scoring(args)
        try:
            return await build_benchmark(
                args.calls,
                args.out,
                scoring,
                scorer,
                opts,
                overwrite=args.overwrite,
                progress=_progress(args),
            )
        finally:
            await scoring.aclose()

    result = asyncio.run(go())
    report, t = result.report, result.timings
    print(
        f"{result.out}: {result.samples} samples from {report['calls']} calls "
        f"({report['audio_hours']:.2f} h of audio), scorer {scorer}, seed {report['seed']}"
    )
    print()
    print(steps_table(report))
    print(
        f"\ntime: {t.total_s:.1f} s (decoding {t.decode_s:.1f} s, VAD and turns "
        f"{t.turns_s:.1f} s, scoring {t.score_s:.1f} s, writing {t.write_s:.1f} s)"
    )
    print(f"report: {result.out / 'build-report.md'}")
    if not result.samples:
        print("duplexsim: no pair survived the build; see the report", file=sys.stderr)
        return 1
    return 0


def _validate(args: argparse.Namespace) -> int:
    from duplexsim.core.files import write_text_atomic
    from duplexsim.corpus import ValidateOptions, validate_calls

    opts = _options(args, build=False)
    assert isinstance(opts, ValidateOptions)
    scorer = resolve_scorer_name(args)
    if args.json:
        _check_json_path(args.json)  # before the calls are scored, not after

    async def go() -> Mirroring:
        scoring = _open_scoring(args)
        try:
            return await validate_calls(args.calls, scoring, scorer, opts, progress=_progress(args))
        finally:
            await scoring.aclose()

    result = asyncio.run(go())
    print(_validation_text(result, scorer))
    if args.json:
        data = {"scorer": scorer, **result.to_dict()}
        try:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(args.json, json.dumps(data, indent=2) + "\n")
        except OSError as exc:
            raise ConfigError(f"--json {args.json}: cannot write: {exc.strerror or exc}") from None
    return 0


def _check_json_path(path: Path) -> None:
    """Refuse a ``--json`` path that is a folder, or below a file."""
    try:
        if path.is_dir():
            raise ConfigError(f"--json {path}: is a folder; give a file name")
        for folder in path.absolute().parents:
            if folder.exists() or folder.is_symlink():
                if not folder.is_dir():
                    raise ConfigError(f"--json {folder}: exists and is not a folder")
                return
    except OSError as exc:
        raise ConfigError(f"--json {path}: cannot use: {exc.strerror or exc}") from None


def _validation_text(m: Mirroring, scorer: str) -> str:
    gap = f"; {m.excluded} left out: a turn could not be scored" if m.excluded else ""
    lines = [f"{m.calls} calls, {m.pairs} adjacent turn pairs{gap}; scorer {scorer}"]
    if not m.n:
        return "\n".join([*lines, "no pair with both turns scored"])
    lines += [
        f"same dominant emotion:  {100 * m.observed:.1f}% ({m.same} of {m.n})",
        f"permutation baseline:   {100 * m.baseline:.1f}% (mean of {m.permutations} seeded "
        f"shuffles, seed {m.seed}; exact expectation {100 * m.expected:.2f}%)",
        f"lift:                   {100 * (m.observed - m.baseline):+.1f} pp",
        f"p-value:                {m.p_value:.4g} = (1 + #shuffles >= observed) / "
        f"(1 + {m.permutations})",
        "",
        render_table(
            ["language", "pairs", "same", "observed %", "expected %"],
            [
                [lang, g["n"], g["same"], 100 * g["observed"], 100 * g["expected"]]
                for lang, g in m.per_language.items()
            ],
        ),
    ]
    return "\n".join(lines)
