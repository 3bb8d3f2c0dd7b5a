"""What ``run`` says and asks before it spends: the expected cost of the run against a billed
endpoint, a confirmation above a threshold (``--yes`` for scripts), and ``--max-cost``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from duplexsim.clients.registry import client_class
from duplexsim.core.benchmark import Benchmark, Sample
from duplexsim.core.errors import ConfigError
from duplexsim.core.prices import format_amount
from duplexsim.profiles.profile import ModelProfile
from duplexsim.run.estimate import Estimate, earlier_rows, estimate_run, learn
from duplexsim.run.runner import DONE_STATUSES, RunOptions, in_shard
from duplexsim.run.store import read_results

__all__ = ["add_spending_arguments", "check_spending", "estimate_for", "todo_samples"]

DEFAULT_CONFIRM_ABOVE = 5.0
BILLED = ("hosted", "override")  # where a run is (or stands for) a billed one


def add_spending_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cost")
    g.add_argument(
        "--max-cost",
        type=float,
        metavar="AMOUNT",
        help="start no session once the run's cost so far, the expected cost of the sessions "
        "under way and of the next one would pass AMOUNT (the price table's currency; earlier "
        "invocations of the same --run-id count); the run then stops like an interrupted one "
        "and resumes with the same --run-id",
    )
    g.add_argument(
        "--confirm-above",
        type=float,
        default=DEFAULT_CONFIRM_ABOVE,
        metavar="AMOUNT",
        help=f"ask before a run against a hosted model expected to cost more than AMOUNT "
        f"(default {DEFAULT_CONFIRM_ABOVE:g})",
    )
    g.add_argument("--yes", action="store_true", help="go ahead without asking (for scripts)")


def todo_samples(bench: Benchmark, opts: RunOptions) -> list[Sample]:
    """The samples the run will start: its selection and shard, less those already done."""
    done: set[str] = set()
    if any(opts.run_dir.glob("results*.sqlite")):
        _, rows = read_results(opts.run_dir)
        done = {r.sample_id for r in rows if r.status in DONE_STATUSES}
    wanted = set(opts.sample_ids)
    return [
        s
        for s in bench
        if in_shard(s.id, opts.shard) and s.id not in done and (not wanted or s.id in wanted)
    ]


def estimate_for(
    samples: list[Sample], profile: ModelProfile, opts: RunOptions, runs_dir: Path
) -> Estimate:
    """The run's estimate, learnt from earlier runs of the model under ``runs_dir``."""
    metering = client_class(profile.protocol).metering
    earlier = earlier_rows(runs_dir, profile.name, profile.protocol)
    trials = int(getattr(opts, "trials", 1))  # ``run --trials`` where the runner has it
    return estimate_run(
        samples,
        learn(earlier, metering),
        profile.price,
        trials=trials,
        max_attempts=opts.retry.max_attempts,
    )


def check_spending(
    args: argparse.Namespace,
    bench: Benchmark,
    profile: ModelProfile,
    opts: RunOptions,
    *,
    ask: Callable[[str], str] = input,
    interactive: bool | None = None,
) -> Estimate | None:
    """Print the estimate of a billed run and ask where it passes ``--confirm-above``; raises
    ConfigError where the run must not go ahead. None: nothing billed to estimate."""
    if args.max_cost is not None and not args.max_cost >= 0:
        raise ConfigError("--max-cost must be an amount >= 0")
    if profile.endpoint not in BILLED:
        return None
    estimate = estimate_for(todo_samples(bench, opts), profile, opts, opts.runs_dir)
    print("\n".join(estimate.lines(profile.name)))
    cost = estimate.cost
    if profile.endpoint != "hosted" or cost is None or estimate.price is None:
        return estimate
    expected = cost.known  # all of it, or the part that is known
    if expected <= args.confirm_above or args.yes:
        return estimate
    amount = format_amount(expected, estimate.price.currency)
    above = format_amount(args.confirm_above, estimate.price.currency)
    tty = sys.stdin.isatty() if interactive is None else interactive
    if not tty:
        raise ConfigError(
            f"this run is expected to cost {'at least ' if cost.amount is None else ''}{amount}, "
            f"over --confirm-above {above}: pass --yes to go ahead"
        )
    answer = ask(f"spend about {amount} on this run? [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise ConfigError("run not confirmed: nothing was started")
    return estimate
