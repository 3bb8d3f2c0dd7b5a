"""``duplexsim benchmark check``: validate a benchmark and summarise what it holds."""

from __future__ import annotations

import argparse
import statistics
from collections import Counter

from simulator.core.benchmark import Benchmark, load_benchmark
from simulator.core.emotions import EMOTIONS
from simulator.textable import render_table

__all__ = ["register", "summarise"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = sub.add_parser("benchmark", help="inspect benchmarks")
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
    check.set_defaults(func=_check)


def _check(args: argparse.Namespace) -> int:
    bench = load_benchmark(args.path, audio_check="header" if args.quick else "full")
    print(summarise(bench))
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
    missing = [e.display for e in EMOTIONS if not any(counts[(e.name, lang)] for lang in languages)]
    if missing:
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
