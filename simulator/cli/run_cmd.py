"""``duplexsim run``: stream a benchmark to a model and record every session."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from duplexsim.cli.options import (
    add_model_option_argument,
    add_outside_paths_argument,
    add_selection_arguments,
    model_options,
    select_samples,
)
from duplexsim.cli.spending import add_spending_arguments, check_spending
from duplexsim.cli.talk_cmd import add_audio_arguments, add_stall_argument, audio_options
from duplexsim.core.benchmark import Benchmark, load_benchmark
from duplexsim.core.errors import ConfigError
from duplexsim.core.partnerturns import PartnerLimits
from duplexsim.core.provenance import run_label
from duplexsim.core.retry import RetryPolicy
from duplexsim.core.timing import TimingBudget
from duplexsim.core.turns import TurnSettings
from duplexsim.core.vad import VadConfig
from duplexsim.profiles.profile import ModelProfile, resolve_model
from duplexsim.run.budget import BudgetReached
from duplexsim.run.partnerrun import PartnerOptions
from duplexsim.run.runner import RunOptions, default_run_id, execute_run, parse_shard
from duplexsim.run.store import ResultRow, read_results
from duplexsim.run.summary import render_summaries, summarise_rows
from duplexsim.session import eventloop
from duplexsim.session.engine import SessionSettings

__all__ = ["add_session_arguments", "register", "session_settings", "with_overrides"]

STOPPED_BY_BUDGET = 3  # exit status of a run that stopped at --max-cost (it resumes later)


def add_session_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("session")
    g.add_argument(
        "--concurrency",
        type=int,
        default=8,
        help="the most sessions of this run at once (default 8; the demo: 32 per model); "
        "fewer run while the machine has no room: starting from 16 (of every run on this "
        "machine's loop), the window doubles while its sessions keep input fidelity and all but "
        "a few percent keep precision, and searches between the most that did and the least "
        "that did not once one round fails; 4 at once are never held back",
    )
    g.add_argument(
        "--frame-ms",
        type=int,
        help="send frame size in ms (default: the protocol's own, 20 for pcm-ws)",
    )
    g.add_argument(
        "--hangover",
        type=float,
        default=2.0,
        help="model silence (s) that ends its reply (default 2)",
    )
    g.add_argument("--max-reply", type=float, default=20.0, help="longest reply kept (s)")
    g.add_argument(
        "--reply-timeout",
        type=float,
        default=10.0,
        help="no speech this long after the context means no reply (s)",
    )
    add_stall_argument(g)
    g.add_argument(
        "--timing-budget",
        default="5/20",
        metavar="P99_MS/MAX_MS[/LATENCY_MS[/INPUT_MS]]",
        help="measurement precision: a reply's latency counts while what the machine may have "
        "added to it (late sends from speech end to onset, our loop's and a local fake's "
        "stalls as the reply came) keeps LATENCY_MS (default: P99_MS); a session with a "
        "partner that reacts also needs its send-time error within P99_MS and MAX_MS, loop "
        "and receive lag within MAX_MS. An imprecise session stays in every emotion metric, "
        "out of latency figures only. Input fidelity: no frame later than INPUT_MS (default: "
        "what the model's receiver absorbs, 250 over WebSocket, 60 over WebRTC; never below "
        "MAX_MS), else the model did not hear the stream a person's client sends: out of "
        "every metric, and run again (default 5/20)",
    )
    g.add_argument("--vad", choices=("webrtc", "energy"), default="webrtc")
    g.add_argument("--vad-aggressiveness", type=int, default=2, choices=range(4))
    g.add_argument(
        "--retries",
        type=int,
        default=2,
        help="retries of a retryable failure or of a session that lost input fidelity",
    )
    g.add_argument(
        "--retry-imprecise",
        action="store_true",
        help="also run again a session that kept input fidelity but not measurement precision "
        "(only its latency is lost). Off by default: against a hosted model every attempt is "
        "a paid session",
    )
    g.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are written")
    g.add_argument("--quiet", action="store_true", help="no progress line")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="run a benchmark against a model")
    p.add_argument(
        "--model",
        required=True,
        help="profile.toml, a built-in profile, fake:BEHAVIOUR[@PROTOCOL] or ws://URL",
    )
    p.add_argument("--benchmark", required=True, type=Path, help="benchmark dir or manifest")
    add_outside_paths_argument(p)
    p.add_argument(
        "--url",
        help="override the profile's endpoint, e.g. a local serve-model fake "
        "for a dry run before spending money on a hosted API",
    )
    p.add_argument("--run-id", help="name of the run (rerun the same id to resume)")
    p.add_argument("--shard", help="i/n: run only shard i of n (results merge by run id)")
    p.add_argument(
        "--trials",
        type=int,
        default=1,
        metavar="K",
        help="run each sample K times, each trial its own session (resumable; rerun with a "
        "larger K to add trials); the report averages each sample's trials and shows how "
        "much they agree (default 1)",
    )
    add_selection_arguments(p)
    add_model_option_argument(p)
    p.add_argument(
        "--monitor",
        action="store_true",
        help="play sessions (user and model mixed) on the output device while they run: "
        "one at a time, the first to start, then the next to start after it",
    )
    add_partner_arguments(p)
    add_session_arguments(p)
    add_spending_arguments(p)
    add_audio_arguments(p, latency_ms=150)
    p.set_defaults(func=_run)


def add_partner_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("another model as the user")
    g.add_argument(
        "--partner",
        metavar="PROFILE",
        help="a second model plays the user, live: profile.toml, a built-in profile, "
        "fake:BEHAVIOUR[@PROTOCOL] or ws://URL; the sample's context opens the conversation, "
        "then each hears the other as it speaks and each of the partner's utterances is a turn",
    )
    g.add_argument(
        "--partner-instructions",
        type=Path,
        metavar="FILE",
        help="the partner's system prompt for samples that carry none of their own "
        "(partner_instructions in the manifest)",
    )
    g.add_argument(
        "--partner-turns",
        type=int,
        help=f"the partner's utterances played to the model (default {PartnerLimits.turns})",
    )
    g.add_argument(
        "--partner-time-s",
        type=float,
        help=f"the longest a session lasts, in seconds (default {PartnerLimits.time_s:g})",
    )


def partner_options(args: argparse.Namespace) -> PartnerOptions | None:
    """``--partner`` and its settings (None: the user is the sample's audio)."""
    given = [
        f"--{name.replace('_', '-')}"
        for name in ("partner_instructions", "partner_turns", "partner_time_s")
        if getattr(args, name) is not None
    ]
    if args.partner is None:
        if given:
            raise ConfigError(f"{given[0]} needs --partner")
        return None
    defaults = PartnerLimits()
    try:
        limits = PartnerLimits(
            defaults.turns if args.partner_turns is None else args.partner_turns,
            defaults.time_s if args.partner_time_s is None else args.partner_time_s,
        )
    except ValueError as exc:
        raise ConfigError(f"--partner: {exc}") from None
    path = args.partner_instructions
    return PartnerOptions(
        profile=resolve_model(args.partner),
        limits=limits,
        instructions=None if path is None else _instructions(path),
        instructions_source=None if path is None else str(path),
    )


def _instructions(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read the partner's instructions ({exc.strerror})"
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: the partner's instructions are not UTF-8 (byte {exc.start})"
        ) from None
    if not text.strip():
        raise ConfigError(f"{path}: the partner's instructions are empty")
    return text


def session_settings(args: argparse.Namespace) -> SessionSettings:
    if not args.stall_timeout > 0:
        raise ConfigError("--stall-timeout must be > 0")
    try:
        return SessionSettings(
            frame_ms=args.frame_ms,
            turns=TurnSettings(
                hangover_s=args.hangover,
                max_reply_s=args.max_reply,
                reply_timeout_s=args.reply_timeout,
            ),
            vad=VadConfig(kind=args.vad, aggressiveness=args.vad_aggressiveness),
            stall_timeout_s=args.stall_timeout,
            budget=timing_budget(getattr(args, "timing_budget", "5/20")),
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def timing_budget(text: str) -> TimingBudget:
    """``P99_MS/MAX_MS[/LATENCY_MS[/INPUT_MS]]`` -> the budget (loop and receive lag get the
    max; the latency window's bound is the p99 unless given; input fidelity's late frame is
    the model's receiver's unless given)."""
    try:
        parts = [float(part) for part in text.split("/")]
        if len(parts) not in (2, 3, 4):
            raise ValueError(text)
        p99, worst = parts[:2]
        extra = {} if len(parts) < 4 else {"input_late_ms": parts[3]}
        return TimingBudget(send_p99_ms=p99, send_max_ms=worst, loop_lag_max_ms=worst,
                            recv_lag_max_ms=worst, latency_ms=parts[2] if len(parts) >= 3 else p99,
                            **extra)  # fmt: skip
    except ValueError:
        raise ConfigError(
            "--timing-budget must be P99_MS/MAX_MS[/LATENCY_MS[/INPUT_MS]], each > 0, e.g. 5/20 "
            f"or 5/20/5/60 (got {text!r})"
        ) from None


def run_options(
    args: argparse.Namespace,
    run_id: str,
    shard: tuple[int, int] | None = None,
    sample_ids: tuple[str, ...] = (),
) -> RunOptions:
    if args.frame_ms is not None and not 0 < args.frame_ms <= 1000:
        raise ConfigError("--frame-ms must be between 1 and 1000")
    if args.retries < 0:
        raise ConfigError("--retries must be >= 0")
    return RunOptions(
        run_id=run_id,
        runs_dir=args.runs_dir,
        concurrency=args.concurrency,
        shard=shard,
        settings=session_settings(args),
        retry=RetryPolicy(max_attempts=args.retries + 1),
        retry_imprecise=bool(getattr(args, "retry_imprecise", False)),
        sample_ids=sample_ids,
        quiet=args.quiet,
        trials=getattr(args, "trials", 1),
        max_cost=getattr(args, "max_cost", None),
    )


def _run(args: argparse.Namespace) -> int:
    profile = with_overrides(resolve_model(args.model), args)
    bench = load_benchmark(args.benchmark, allow_outside=args.allow_outside_paths)
    shard = parse_shard(args.shard) if args.shard else None
    chosen: tuple[str, ...] = ()
    if args.sample or args.limit is not None:
        chosen = tuple(select_samples([s.id for s in bench], args.sample, args.limit))
    opts = run_options(args, args.run_id or default_run_id(profile), shard, chosen)
    opts = dataclasses.replace(opts, partner=partner_options(args))
    check_spending(args, bench, profile, opts)
    if opts.retry_imprecise and profile.endpoint == "hosted":
        print(
            f"duplexsim: --retry-imprecise against {profile.name}: every retry is a paid session",
            file=sys.stderr,
        )
    stopped: BudgetReached | None = None
    try:
        if args.monitor:
            rows = _run_monitored(bench, profile, opts, args)
        else:
            rows = eventloop.run(execute_run(bench, profile, opts))
    except BudgetReached as exc:  # what was recorded stands; the rest waits for a resume
        stopped = exc
        rows = read_results(opts.run_dir)[1]
    summary = summarise_rows(run_label(opts.run_id, profile.describe()), rows, profile.price)
    print(render_summaries([summary]))
    print(f"\nresults: {opts.run_dir}")
    if stopped is not None:
        print(f"\nstopped: {stopped}")
        return STOPPED_BY_BUDGET
    return 1 if summary.failed else 0


def with_overrides(profile: ModelProfile, args: argparse.Namespace) -> ModelProfile:
    """The profile with ``--url`` and ``-M`` applied."""
    if args.url:
        profile = dataclasses.replace(profile, url=args.url, url_overridden=True)
    if args.model_option:
        options = model_options(args.model_option, profile.options)
        profile = dataclasses.replace(profile, options=options)
    return profile


def _run_monitored(
    bench: Benchmark, profile: ModelProfile, opts: RunOptions, args: argparse.Namespace
) -> list[ResultRow]:
    from duplexsim.live.audio_io import Player, open_output

    audio = audio_options(args)
    player = Player(open_output(audio, audio.rate), latency_s=audio.latency_ms / 1000)
    try:
        rows = eventloop.run(
            execute_run(bench, profile, dataclasses.replace(opts, monitor=player.claim))
        )
    finally:
        player.close()
    late = f", {player.late_samples / player.rate:.2f} s of model audio too late to play"
    print(
        f"monitor: played {player.sessions_played} session(s)"
        + (late if player.late_samples else ""),
        file=sys.stderr,
    )
    if player.error is not None:
        print(f"monitor: playback stopped: {player.error}", file=sys.stderr)
    return rows
