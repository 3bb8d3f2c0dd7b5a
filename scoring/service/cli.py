"""Blocking entry points for the command line: ``duplexsim scoring serve|worker|keys``.

Each function mirrors one subcommand, flag for flag; they stop cleanly on SIGINT / SIGTERM.
"""

from __future__ import annotations

import contextlib
import importlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TextIO

from duplexsim.core.errors import ConfigError
from duplexsim.scoring.models.base import EmotionModel
from duplexsim.scoring.service import wire
from duplexsim.scoring.service.api import registry_factory
from duplexsim.scoring.service.broker import DEFAULT_BACKEND, DEFAULT_FRONTEND, Broker
from duplexsim.scoring.service.security import KeyInput, create_keys
from duplexsim.scoring.service.worker import ScoringWorker

__all__ = ["load_factory", "make_keys", "run_worker", "serve_broker", "worker_endpoint_for"]


def serve_broker(
    bind: str = DEFAULT_FRONTEND,
    *,
    worker_bind: str | None = None,
    curve_secret: KeyInput | None = None,
    allow_insecure: bool = False,
    queue_size: int = 1000,
    max_queued_mb: float = 512.0,
    max_audio_s: float = wire.DEFAULT_MAX_AUDIO_S,
    max_requeues: int = 2,
    liveness: int = 3,
    out: TextIO = sys.stdout,
) -> None:
    """Run the scoring broker until SIGINT / SIGTERM.

    bind:           where clients connect (default tcp://127.0.0.1:5555; port ``*`` picks one).
    worker_bind:    where workers connect (default: ``bind`` with the port + 1).
    curve_secret:   the broker's CURVE secret key, Z85 text or a ``.key_secret`` file from
                    ``make_keys``. Required to bind a non-loopback address unless
                    ``allow_insecure`` (unencrypted, unauthenticated: trusted networks only).
    queue_size:     requests waiting for a worker before new ones get a retryable ``busy``.
    max_queued_mb:  the same bound in megabytes of queued audio (MiB).
    max_audio_s:    longest clip a request may carry (MIRRORING scores 30 s; the slack lets an
                    over-long clip get a per-item error instead of a wire error).
    max_requeues:   how often one request may outlive the worker holding it.
    liveness:       heartbeats a worker may miss before it is dropped and its work re-queued.

    Prints ``scoring broker: clients on <endpoint>`` and ``... workers on <endpoint>`` once bound.
    """
    backend = worker_bind or worker_endpoint_for(bind)
    with Broker(
        bind,
        backend,
        curve_secret_key=curve_secret,
        allow_insecure=allow_insecure,
        queue_size=queue_size,
        max_queued_bytes=int(max_queued_mb * 2**20),
        max_message_bytes=wire.max_message_bytes_for(max_audio_s),
        max_requeues=max_requeues,
        liveness=liveness,
    ) as broker:
        print(f"scoring broker: clients on {broker.frontend}", file=out, flush=True)
        print(f"scoring broker: workers on {broker.backend}", file=out, flush=True)
        with _stop_on_signals(broker.stop):
            broker.run()


def run_worker(
    connect: str = DEFAULT_BACKEND,
    *,
    scorer_names: Sequence[str],
    device: str = "cpu",
    model_path: Path | None = None,
    precision: str | None = None,
    max_batch: int = 16,
    max_wait_ms: float = 5.0,
    capacity: int | None = None,
    heartbeat_s: float = 1.0,
    server_public_key: KeyInput | None = None,
    factory: Callable[[str], EmotionModel] | None = None,
    out: TextIO = sys.stdout,
) -> None:
    """Load the scorers, then serve them to the broker's worker endpoint until SIGINT / SIGTERM.

    connect:            the broker's worker endpoint (default tcp://127.0.0.1:5556).
    scorer_names:       scorers to serve, e.g. ["empathic-insight-voice-large"].
    device, model_path: passed to ``load_scorer`` (``cuda``, ``cuda:1``, ``cpu``; local weights).
    precision:          passed to ``load_scorer`` too: ``fp32``, ``bf16`` or ``fp16``; None for
                        each scorer's default. A scorer without one refuses an explicit value.
    max_batch:          most clips scored in one ``score()`` call.
    max_wait_ms:        longest a request waits for its batch to fill.
    capacity:           requests the broker may hand this worker at once (default 2 x max_batch).
    heartbeat_s:        heartbeat interval both ways; the broker drops the worker after 3 missed.
    server_public_key:  the broker's CURVE public key (Z85 or ``.key`` file) if it uses CURVE.
    factory:            builds a scorer from its name instead of ``load_scorer`` (tests, plugins).

    On SIGTERM the worker stops taking work, answers what it holds, and leaves.
    """
    if not scorer_names:
        raise ConfigError("a worker needs at least one scorer name")
    if factory is not None and precision is not None:
        raise ConfigError("a precision applies to the registry's scorers, not to a factory")
    build = factory or registry_factory(device, model_path, precision)
    worker = ScoringWorker.from_factory(
        connect,
        list(scorer_names),
        build,
        max_batch=max_batch,
        max_wait_ms=max_wait_ms,
        capacity=capacity,
        heartbeat_s=heartbeat_s,
        server_public_key=server_public_key,
    )
    names = ", ".join(
        f"{name} ({model.precision})" if model.precision else name
        for name, model in worker.models.items()
    )
    print(
        f"scoring worker: serving {names} (batch <= {max_batch}, wait <= {max_wait_ms:g} ms) via {connect}",
        file=out,
        flush=True,
    )
    with _stop_on_signals(worker.stop):
        worker.run()


def make_keys(
    directory: str | Path, name: str = "broker", *, out: TextIO = sys.stdout
) -> tuple[Path, Path]:
    """Write the broker's CURVE key pair: give ``NAME.key_secret`` to the broker only and
    ``NAME.key`` (public) to clients and workers."""
    public, secret = create_keys(directory, name)
    print(f"public key (clients, workers): {public}", file=out)
    print(f"secret key (broker only):      {secret}", file=out)
    return public, secret


def worker_endpoint_for(bind: str) -> str:
    """The default worker endpoint beside a client endpoint: the next tcp port, or ``*``."""
    scheme, _, rest = bind.partition("://")
    if scheme == "ipc":
        return f"{bind}.workers"
    host, sep, port = rest.rpartition(":")
    if scheme == "tcp" and sep and port == "*":
        return bind
    if scheme == "tcp" and sep and port.isdigit():
        return f"tcp://{host}:{int(port) + 1}"
    raise ConfigError(f"cannot derive a worker endpoint from {bind!r}; give worker_bind")


def load_factory(spec: str) -> Callable[[str], EmotionModel]:
    """``module:callable`` -> the callable (a scorer factory taking the scorer's name)."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ConfigError(f"scorer factory must be 'module:callable', got {spec!r}")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"cannot load scorer factory {spec!r}: {e}") from None
    if not callable(found):
        raise ConfigError(f"scorer factory {spec!r} is not callable")
    factory: Callable[[str], EmotionModel] = found
    return factory


@contextlib.contextmanager
def _stop_on_signals(stop: Callable[[], None]) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda *_: stop())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
