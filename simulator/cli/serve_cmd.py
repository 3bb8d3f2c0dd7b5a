"""``duplexsim serve-model``: serve a reference behaviour over any protocol's fake server."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import inspect
import signal
import ssl
import sys
from pathlib import Path
from typing import Any

from duplexsim.core.audio import read_audio
from duplexsim.core.errors import ConfigError
from duplexsim.core.stalls import StallLog, stall_line
from duplexsim.run.lifeline import watch_owner_from_env
from duplexsim.session import eventloop

__all__ = ["register", "serve"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve-model", help="serve a reference model behaviour on loopback")
    p.add_argument("--protocol", default="pcm-ws", help="wire protocol of the fake server")
    p.add_argument(
        "--behaviour",
        default="echo",
        help="echo, silent, neutral, delayed-echo or barge-in; several, comma-separated, are "
        "served by this one process, each on its own port (--port, --port + 1, ...)",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765, help="0 picks free ports")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow binding a non-loopback address (the fake has no authentication)",
    )
    p.add_argument(
        "--tls-cert",
        type=Path,
        metavar="PEM",
        help="serve wss:// with this certificate (with --tls-key), for clients that insist on "
        "TLS, such as google-genai's live client (gemini-live, openai-realtime)",
    )
    p.add_argument("--tls-key", type=Path, metavar="PEM", help="the certificate's private key")
    b = p.add_argument_group("behaviour")
    b.add_argument(
        "--latency", type=float, help="delayed-echo: seconds from end of speech to reply"
    )
    b.add_argument(
        "--hangover",
        type=float,
        default=1.0,
        help="silence (s) that ends the user's turn (default 1.0: longer than the "
        "pauses inside a context)",
    )
    b.add_argument("--echo-seconds", type=float, help="echo: seconds of the user's speech replayed")
    b.add_argument("--barge-after", type=float, help="barge-in: seconds into the user's speech")
    b.add_argument("--utterance", type=Path, help="neutral/barge-in: audio file to speak")
    f = p.add_argument_group("faults (for testing clients)")
    f.add_argument(
        "--refuse", type=int, metavar="STATUS", help="reject every handshake with STATUS"
    )
    f.add_argument(
        "--rate-limit-first",
        type=int,
        default=0,
        metavar="N",
        help="answer the first N connections with 429",
    )
    f.add_argument("--retry-after", type=float, default=1.0, help="Retry-After for 429 (s)")
    f.add_argument(
        "--rate-limit",
        type=int,
        default=0,
        metavar="N",
        help="accept at most N connections per --rate-window, say how many remain "
        "(x-ratelimit-* headers, rate_limits.updated) and refuse past them with 429",
    )
    f.add_argument(
        "--rate-window", type=float, default=60.0, metavar="S", help="the rate limit's window (s)"
    )
    f.add_argument("--close-after", type=float, metavar="S", help="close mid-stream after S s")
    f.add_argument("--stall-after", type=float, metavar="S", help="go silent after S s")
    f.add_argument("--malformed-after", type=float, metavar="S", help="send garbage after S s")
    f.add_argument("--extra-latency", type=float, default=0.0, help="delay every reply message (s)")
    # for the run that started this server on its own machine: its loop's stalls, on stdout
    p.add_argument("--report-stalls", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=_serve_command)


def behaviour_params(args: argparse.Namespace) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for arg, key in (
        ("latency", "latency_s"),
        ("hangover", "hangover_s"),
        ("echo_seconds", "echo_s"),
        ("barge_after", "barge_after_s"),
    ):
        value = getattr(args, arg, None)
        if value is not None:
            params[key] = value
    return params


def fault_settings(args: argparse.Namespace) -> Any:
    from duplexsim.clients.fakekit.faults import Faults

    try:
        return _faults(Faults, args)
    except ValueError as exc:
        raise ConfigError(f"fault settings: {exc}") from None


def _faults(make: Any, args: argparse.Namespace) -> Any:
    return make(
        refuse_status=args.refuse,
        rate_limit_first=args.rate_limit_first,
        retry_after_s=args.retry_after,
        close_after_s=args.close_after,
        stall_after_s=args.stall_after,
        malformed_after_s=args.malformed_after,
        extra_latency_s=args.extra_latency,
        rate_limit=args.rate_limit,
        rate_window_s=args.rate_window,
    )


def _demo_utterance() -> Path | None:
    from duplexsim.run.demo_data import demo_utterance

    try:
        path = demo_utterance()
    except ConfigError:  # no demo data: the behaviour's own synthetic tone
        return None
    return path if path.exists() else None


def _serve_command(args: argparse.Namespace) -> int:
    watch_owner_from_env()  # started for a run: end with it, even if it is killed
    if args.host not in _LOOPBACK and not args.allow_remote:
        raise ConfigError(
            f"--host {args.host} is not loopback; the fake server has no "
            "authentication (pass --allow-remote to bind it anyway)"
        )
    behaviours = [b.strip() for b in args.behaviour.split(",") if b.strip()]
    if not behaviours or len(set(behaviours)) < len(behaviours):
        raise ConfigError(f"--behaviour {args.behaviour!r}: name each behaviour once")
    spoken = any(b in ("neutral", "barge-in") for b in behaviours)
    utterance = args.utterance or (_demo_utterance() if spoken else None)
    eventloop.run(
        serve(
            args.protocol,
            behaviours,
            behaviour_params(args),
            fault_settings(args),
            host=args.host,
            port=args.port,
            utterance=utterance,
            tls=_tls(args.tls_cert, args.tls_key),
            report_stalls=args.report_stalls,
        )
    )
    return 0


def _tls(cert: Path | None, key: Path | None) -> ssl.SSLContext | None:
    """A server TLS context from PEM files; ConfigError if only one is given or they do not load."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise ConfigError("--tls-cert and --tls-key go together")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the TLS certificate or key: {exc}") from None
    return context


async def serve(
    protocol: str,
    behaviours: list[str],
    params: dict[str, Any],
    faults: Any,
    *,
    host: str,
    port: int,
    utterance: Path | None,
    tls: ssl.SSLContext | None = None,
    report_stalls: bool = False,
) -> None:
    from duplexsim.clients.registry import fake_server_factory

    factories = [make_factory(b, params, utterance) for b in behaviours]
    start = fake_server_factory(protocol)
    extra: dict[str, Any] = {}
    if tls is not None:
        if "ssl_context" not in inspect.signature(start).parameters:
            raise ConfigError(f"the {protocol} fake does not serve TLS")
        extra["ssl_context"] = tls
    # one loop serves them all: several models on this machine cost one process, not one each
    # (on two cores, every extra process is another loop waiting for a core as its reply leaves)
    servers = []
    for i, factory in enumerate(factories):
        at = 0 if port == 0 else port + i
        servers.append(await start(factory, host=host, port=at, faults=faults, **extra))
    # everything alive now (modules, the behaviours' audio) stays out of the collector's walks:
    # a full collection over it would stall every connection's replies at once
    gc.collect()
    gc.freeze()
    for behaviour, server in zip(behaviours, servers, strict=True):
        print(f"serving {behaviour} over {protocol} on {server.url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    held = [server.held for server in servers if server.held is not None]
    reporter = asyncio.create_task(_report_stalls(held)) if report_stalls else None
    try:
        await stop.wait()
    finally:
        if reporter is not None:
            reporter.cancel()
        for server in servers:
            await server.aclose()
        print("server stopped", file=sys.stderr, flush=True)


STALL_REPORT_S = 0.05  # how often the stalls go out: long before a session's end needs them


async def _report_stalls(held: list[StallLog]) -> None:
    """This loop's stalls and the spans its servers ``held`` answers off the loop, as lines on
    stdout (``duplexsim.core.stalls.stall_line``), every ``STALL_REPORT_S``: a co-located run
    checks its sessions' latency windows against them."""
    loop_log = eventloop.stall_log()
    logs = ([] if loop_log is None else [loop_log]) + held
    if not logs:
        return
    after = [0.0] * len(logs)
    while True:
        await asyncio.sleep(STALL_REPORT_S)
        stalls = []
        for i, log in enumerate(logs):
            new = log.since(after[i])
            if new:
                after[i] = new[-1][1]
                stalls += new
        if stalls:
            stalls.sort()  # in time order, as the run's log keeps them
            sys.stdout.write("".join(stall_line(a, b) + "\n" for a, b in stalls))
            sys.stdout.flush()


def make_factory(behaviour: str, params: dict[str, Any], utterance: Path | None) -> Any:
    """sample rate -> fresh behaviour; a spoken utterance is resampled once per rate."""
    from duplexsim.clients.fakekit.behaviours import behaviour_factory, make_behaviour
    from duplexsim.core.audio import resample

    if utterance is None or behaviour not in ("neutral", "barge-in"):
        return behaviour_factory(behaviour, **params)
    audio = read_audio(utterance)
    cache: dict[int, Any] = {}

    def factory(rate: int) -> Any:
        if rate not in cache:
            cache[rate] = resample(audio.samples, audio.sample_rate, rate)
        return make_behaviour(behaviour, rate, utterance=cache[rate], **params)

    factory(16000)  # bad parameters fail now, not on the first connection
    return factory
