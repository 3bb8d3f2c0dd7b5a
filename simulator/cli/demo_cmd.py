"""``duplexsim demo``: the whole pipeline offline, on the shipped demo benchmark.

Reference models (echo, neutral, silent) are served on loopback by one child process; the demo
benchmark is streamed to all of them at once in real time, and the run summary is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

from duplexsim.cli.options import (
    add_outside_paths_argument,
    add_selection_arguments,
    select_samples,
)
from duplexsim.cli.run_cmd import add_session_arguments, run_options
from duplexsim.cli.score_cmd import (
    add_scorer_arguments,
    report_runs,
    resolve_scorer_name,
    score_runs,
)
from duplexsim.core.benchmark import Benchmark, load_benchmark
from duplexsim.core.provenance import run_label
from duplexsim.core.textable import render_table
from duplexsim.profiles.profile import FAKE_PRICE, ModelProfile
from duplexsim.run.demo_data import demo_benchmark, demo_partner_benchmark
from duplexsim.run.fakes import FakeModelProcess
from duplexsim.run.progress import Progress
from duplexsim.run.runner import Endpoint, execute_run, realtime_tuning, started_pool
from duplexsim.run.store import read_results
from duplexsim.run.summary import RunSummary, render_summaries, summarise_rows
from duplexsim.session import eventloop

__all__ = ["register"]

DEMO_MODELS = ("echo", "neutral", "silent")
# the partner set's reference models: one talks through an interruption, one stops
PARTNER_MODELS = ("talk-through", "stop-on-overlap")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo", help="run the demo benchmark against local reference models")
    p.add_argument("--protocol", default="pcm-ws", help="protocol the reference models speak")
    p.add_argument(
        "--models",
        help="comma-separated behaviours (default echo,neutral,silent; with --partner "
        "talk-through,stop-on-overlap)",
    )
    p.add_argument(
        "--partner",
        action="store_true",
        help="the demo's partner set: interruptions, backchannels and a conversation of three "
        "turns, played in reaction to the models",
    )
    p.add_argument(
        "--benchmark", type=Path, help="benchmark dir or manifest (default: the shipped demo)"
    )
    add_outside_paths_argument(p)
    add_selection_arguments(p)
    p.add_argument("--run-prefix", help="run ids become PREFIX-BEHAVIOUR (default demo-<time>)")
    p.add_argument("--no-score", action="store_true", help="skip scoring and the leaderboard")
    add_session_arguments(p)
    add_scorer_arguments(p)
    # a ceiling per model: admission control starts a session only while the machine keeps
    # pace, so the demo stays inside its timing budget on a small machine with the fakes on it
    p.set_defaults(func=_demo, concurrency=32)


def _demo(args: argparse.Namespace) -> int:
    if not args.no_score:
        resolve_scorer_name(args)  # a scoring flag that does not fit fails now, not after the run
    default = demo_partner_benchmark() if args.partner else demo_benchmark()
    bench = load_benchmark(args.benchmark or default, allow_outside=args.allow_outside_paths)
    if args.sample or args.limit is not None:
        chosen = set(select_samples([s.id for s in bench], args.sample, args.limit))
        bench = Benchmark(bench.manifest, tuple(s for s in bench.samples if s.id in chosen))
    models = args.models or ",".join(PARTNER_MODELS if args.partner else DEMO_MODELS)
    behaviours = [b.strip() for b in models.split(",") if b.strip()]
    prefix = args.run_prefix or f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    print(
        f"demo: {len(bench)} samples x {len(behaviours)} reference models over {args.protocol}, "
        f"streamed in real time (at most {args.concurrency} sessions per model at once, "
        "fewer while this machine has no room for more)"
    )
    summaries = eventloop.run(_run_models(bench, behaviours, args, prefix))
    print()
    print(render_summaries(summaries))
    if args.partner and args.no_score:  # the partner's table needs no scores
        print()
        print(partner_table(run_dirs_of(args, prefix, behaviours)))
    run_dirs = run_dirs_of(args, prefix, behaviours)
    if not args.no_score:
        print()
        scored, unscored = eventloop.run(score_runs(args, run_dirs))
        print(scored)
        if unscored:
            print(f"duplexsim: {unscored} clip(s) left unscored", file=sys.stderr)
        text, paths = report_runs(run_dirs, None, args.runs_dir / f"{prefix}-report", seed=0)
        print()
        print(text)
        from duplexsim.report.write import PLOTS_MISSING

        plots = "the PNG plots" if "png_emotion" in paths else "no PNG plots"
        print(
            f"\nleaderboard: {paths['html']} (also {paths['markdown'].name}, "
            f"{paths['json'].name} and {plots} beside it)"
        )
        if "png_emotion" not in paths:
            print(PLOTS_MISSING)
    print(
        f"\nruns written to {args.runs_dir}/{prefix}-*; look at its sessions in a browser with "
        f"`duplexsim view {run_dirs[0]}`, replay them with `duplexsim replay {run_dirs[0]}`"
    )
    return 1 if any(s.failed for s in summaries) else 0


def run_dirs_of(args: argparse.Namespace, prefix: str, behaviours: list[str]) -> list[Path]:
    return [args.runs_dir / f"{prefix}-{b}" for b in behaviours]


def partner_table(run_dirs: list[Path]) -> str:
    """What each model did at the partner's steps, by task (as the report shows it)."""
    from duplexsim.report.data import partner_by_task
    from duplexsim.report.tables import PARTNER_HEADERS, PARTNER_NOTE, partner_table_rows

    runs = [(d.name, partner_by_task(read_results(d)[1])) for d in run_dirs]
    table = render_table(PARTNER_HEADERS, partner_table_rows(runs))
    return f"partner by task:\n{table}\n{PARTNER_NOTE}"


async def _run_models(
    bench: Benchmark, behaviours: list[str], args: argparse.Namespace, prefix: str
) -> list[RunSummary]:
    # one process serves every model, one pool does every run's CPU work, and both are up
    # before the first session starts, so start-up never competes with pacing; the process
    # settings for pacing are held from the first run's start to the last one's end
    async with FakeModelProcess(args.protocol, behaviours) as server, _shared_pool() as pool:

        async def one(behaviour: str) -> RunSummary:
            url = server.urls[behaviour]
            profile = ModelProfile(
                name=f"fake-{behaviour}",
                protocol=args.protocol,
                url=url,
                fake_behaviour=behaviour,
                source=f"fake:{behaviour}@{args.protocol}",
                price=FAKE_PRICE,
            )
            opts = run_options(args, f"{prefix}-{behaviour}")
            # the server's stalls count in each reply's latency window: it runs on our cores
            endpoint = Endpoint(url, server.stalls)
            rows = await execute_run(bench, profile, opts, progress, endpoint=endpoint, pool=pool)
            label = run_label(opts.run_id, profile.describe())
            # the other models' sessions still pace on this loop (its first call imports numpy's
            # quantiles: tens of ms)
            return await asyncio.to_thread(summarise_rows, label, rows, profile.price)

        progress = Progress(prefix, 0, quiet=args.quiet)
        try:
            with realtime_tuning():
                return list(await asyncio.gather(*(one(b) for b in behaviours)))
        finally:
            progress.close()


@contextlib.asynccontextmanager
async def _shared_pool() -> AsyncIterator[concurrent.futures.Executor]:
    pool = await started_pool()
    try:
        yield pool
    finally:
        await asyncio.to_thread(pool.shutdown)
