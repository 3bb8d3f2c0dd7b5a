"""``duplexsim scoring serve|worker|keys``: the scoring service (one broker, workers anywhere)."""

from __future__ import annotations

import argparse
from argparse import SUPPRESS
from pathlib import Path

from duplexsim.cli.options import deprecated_alias
from duplexsim.scoring.models.precision import PRECISIONS

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("scoring", help="run the scoring service: a broker and its workers")
    actions = p.add_subparsers(dest="scoring_command", metavar="ACTION", required=True)

    serve = actions.add_parser(
        "serve", aliases=["broker"], help="run the broker (clients and workers connect to it)"
    )
    serve.add_argument(
        "--bind",
        default="tcp://127.0.0.1:5555",
        help="where clients connect (default tcp://127.0.0.1:5555)",
    )
    serve.add_argument("--worker-bind", help="where workers connect (default: --bind port + 1)")
    serve.add_argument(
        "--curve-secret",
        type=Path,
        help="the broker's CURVE secret key file (from `scoring keys`); required "
        "for a non-loopback bind",
    )
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="allow a non-loopback bind without CURVE (trusted networks only)",
    )
    serve.add_argument(
        "--queue-size",
        type=int,
        default=1000,
        help="requests waiting before new ones get a retryable busy",
    )
    serve.add_argument("--max-queued-mb", type=float, default=512.0)
    serve.add_argument(
        "--max-audio-s",
        type=float,
        default=40.0,
        help="longest clip a request may carry (30 s are scored; the slack lets an "
        "over-long clip get its own error)",
    )
    serve.set_defaults(func=_serve)

    worker = actions.add_parser("worker", help="serve scorers to a broker")
    worker.add_argument(
        "--connect",
        default="tcp://127.0.0.1:5556",
        help="the broker's worker endpoint (default tcp://127.0.0.1:5556)",
    )
    worker.add_argument(
        "--scorer",
        action="append",
        default=[],
        help="scorer to serve (repeatable; default prosody)",
    )
    worker.add_argument("--torch-device", default="cpu", help="cpu, cuda or cuda:N")
    worker.add_argument(
        "--device", dest="torch_device", action=deprecated_alias("--torch-device"), help=SUPPRESS
    )
    worker.add_argument("--model-path", type=Path, help="local folder with the scorer's weights")
    worker.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="Empathic-Insight-Voice precision (default: bf16 on CUDA and on CPUs with "
        "AMX-BF16 or AVX512-BF16, else fp32; see docs/scorers.md); prosody has none",
    )
    worker.add_argument("--max-batch", type=int, default=16)
    worker.add_argument("--max-wait-ms", type=float, default=5.0)
    worker.add_argument(
        "--capacity",
        type=int,
        help="requests the broker may hand this worker at once (default 2 x batch)",
    )
    worker.add_argument("--heartbeat-s", type=float, default=1.0)
    worker.add_argument("--server-key", type=Path, help="the broker's CURVE public key file")
    worker.add_argument(
        "--factory",
        metavar="MODULE:CALLABLE",
        help="build scorers with this instead of the registry (plugins, tests)",
    )
    worker.set_defaults(func=_worker)

    keys = actions.add_parser("keys", help="write a CURVE key pair for the broker")
    keys.add_argument("directory", type=Path)
    keys.add_argument("--name", default="broker")
    keys.set_defaults(func=_keys)


def _serve(args: argparse.Namespace) -> int:
    from duplexsim.scoring.service.cli import serve_broker

    serve_broker(
        args.bind,
        worker_bind=args.worker_bind,
        curve_secret=str(args.curve_secret) if args.curve_secret else None,
        allow_insecure=args.insecure,
        queue_size=args.queue_size,
        max_queued_mb=args.max_queued_mb,
        max_audio_s=args.max_audio_s,
    )
    return 0


def _worker(args: argparse.Namespace) -> int:
    from duplexsim.scoring.service.cli import load_factory, run_worker

    run_worker(
        args.connect,
        scorer_names=args.scorer or ["prosody"],
        device=args.torch_device,
        model_path=args.model_path,
        precision=args.precision,
        max_batch=args.max_batch,
        max_wait_ms=args.max_wait_ms,
        capacity=args.capacity,
        heartbeat_s=args.heartbeat_s,
        server_public_key=str(args.server_key) if args.server_key else None,
        factory=load_factory(args.factory) if args.factory else None,
    )
    return 0


def _keys(args: argparse.Namespace) -> int:
    from duplexsim.scoring.service.cli import make_keys

    make_keys(args.directory, args.name)
    return 0
