"""``python -m scoring.service broker|worker|keys``: the service without the duplexsim CLI.

Handy for tests, benchmarks and GPU hosts that install only the scoring extra. The flags mirror
``scoring.service.cli``; ``worker --factory module:callable`` serves a custom scorer.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from scoring.service import cli
from scoring.service.broker import DEFAULT_BACKEND, DEFAULT_FRONTEND
from simulator.core.errors import DuplexsimError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m scoring.service")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("broker", help="run the broker")
    b.add_argument("--bind", default=DEFAULT_FRONTEND, help="client endpoint (port * picks one)")
    b.add_argument("--worker-bind", help="worker endpoint (default: client port + 1)")
    b.add_argument("--curve-secret", help="broker CURVE secret key (Z85 or .key_secret file)")
    b.add_argument(
        "--insecure", action="store_true", help="allow a non-loopback bind without CURVE"
    )
    b.add_argument("--queue-size", type=int, default=1000)
    b.add_argument("--max-queued-mb", type=float, default=512.0)
    b.add_argument("--max-audio-s", type=float, default=40.0)
    w = sub.add_parser("worker", help="run a worker")
    w.add_argument("--connect", default=DEFAULT_BACKEND, help="the broker's worker endpoint")
    w.add_argument("--scorer", action="append", required=True, help="scorer name (repeatable)")
    w.add_argument("--device", default="cpu")
    w.add_argument("--model-path", type=Path)
    w.add_argument("--max-batch", type=int, default=16)
    w.add_argument("--max-wait-ms", type=float, default=5.0)
    w.add_argument("--capacity", type=int)
    w.add_argument("--heartbeat-s", type=float, default=1.0)
    w.add_argument("--server-key", help="broker CURVE public key (Z85 or .key file)")
    w.add_argument("--factory", help="module:callable building a scorer from its name")
    k = sub.add_parser("keys", help="write a CURVE key pair for the broker")
    k.add_argument("directory", type=Path)
    k.add_argument("--name", default="broker")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        if args.command == "broker":
            cli.serve_broker(
                args.bind,
                worker_bind=args.worker_bind,
                curve_secret=args.curve_secret,
                allow_insecure=args.insecure,
                queue_size=args.queue_size,
                max_queued_mb=args.max_queued_mb,
                max_audio_s=args.max_audio_s,
            )
        elif args.command == "worker":
            cli.run_worker(
                args.connect,
                scorer_names=args.scorer,
                device=args.device,
                model_path=args.model_path,
                max_batch=args.max_batch,
                max_wait_ms=args.max_wait_ms,
                capacity=args.capacity,
                heartbeat_s=args.heartbeat_s,
                server_public_key=args.server_key,
                factory=cli.load_factory(args.factory) if args.factory else None,
            )
        else:
            cli.make_keys(args.directory, args.name)
    except DuplexsimError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
