"""The ``duplexsim`` command line. Each subcommand lives in its own module and registers itself."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

from duplexsim import __version__
from duplexsim.cli import (
    benchmark_cmd,
    compare_cmd,
    demo_cmd,
    export_cmd,
    models_cmd,
    replay_cmd,
    run_cmd,
    score_cmd,
    scorer_weights_cmd,
    scoring_service_cmd,
    serve_cmd,
    talk_cmd,
    view_cmd,
)
from duplexsim.core.errors import DuplexsimError
from duplexsim.core.shown import for_terminal, terminal_lines

__all__ = ["build_parser", "main"]

_COMMANDS = (
    demo_cmd,
    run_cmd,
    score_cmd,
    compare_cmd,
    export_cmd,
    replay_cmd,
    view_cmd,
    talk_cmd,
    models_cmd,
    benchmark_cmd,
    serve_cmd,
    scorer_weights_cmd,
    scoring_service_cmd,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="duplexsim",
        description="Streaming full-duplex evaluation simulator for speech-to-speech models.",
    )
    parser.add_argument("--version", action="version", version=f"duplexsim {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _COMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    with _sigterm_as_sigint():
        return _dispatch(args)


@contextlib.contextmanager
def _sigterm_as_sigint() -> Iterator[None]:
    """SIGTERM (a job scheduler, kill) ends a command as Ctrl-C does: sessions are cancelled,
    children stopped, what is recorded stays recorded."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _as_interrupt)
    # a script's background job starts with SIGINT ignored (POSIX shells do that without job
    # control), and so would ignore the SIGINT a SIGTERM becomes: the command answers both
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _as_interrupt(signum: int, frame: object) -> None:
    signal.raise_signal(signal.SIGINT)


def _dispatch(args: argparse.Namespace) -> int:
    try:
        code: int = args.func(args)
        return code
    except DuplexsimError as exc:
        # it may quote a server, a manifest or a run folder: shown, never acted on
        print(terminal_lines(f"duplexsim: error: {exc}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("duplexsim: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # a full or read-only disk, a missing folder: the path and the cause
        where = f"{exc.filename}: " if exc.filename else ""
        print(for_terminal(f"duplexsim: error: {where}{exc.strerror or exc}"), file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: say so in one line unless asked for the traceback
        if args.debug:
            raise
        print(
            for_terminal(
                f"duplexsim: internal error: {type(exc).__name__}: {exc} (rerun with --debug)"
            ),
            file=sys.stderr,
        )
        return 1
