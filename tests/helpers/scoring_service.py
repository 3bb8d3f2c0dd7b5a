"""A real broker and workers in tests: a tiny scorer, clips, raw clients, waits."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import zmq
from numpy.typing import NDArray

from duplexsim.core.emotions import HEAD_NAMES
from duplexsim.core.errors import ConfigError
from duplexsim.scoring.models.base import EmotionModel
from duplexsim.scoring.service import (
    Broker,
    ScoringWorker,
    wire,
)
from tests.helpers.waits import wait_until as wait_until  # re-exported: tests import it here

LOOPBACK = "tcp://127.0.0.1:*"


SR = 16000


class TinyScorer(EmotionModel):
    name = "tiny"

    def __init__(self, delay_s: float = 0.0, started: Path | None = None) -> None:
        self.delay_s = delay_s
        self.started = started  # a file that shows a call is inside score()
        self.calls: list[int] = []

    @property
    def dimensions(self) -> tuple[str, ...]:
        return (*HEAD_NAMES, "batch_size", "pid")

    def score(self, clips: Sequence[NDArray[np.float32]]) -> NDArray[np.float32]:
        self.calls.append(len(clips))
        if self.started is not None:
            self.started.touch()
        time.sleep(self.delay_s)  # a slow model
        rows = [[*expected(clip), len(clips), os.getpid()] for clip in clips]
        return np.asarray(rows, dtype=np.float32)


class BoomScorer(TinyScorer):
    name = "boom"

    def score(self, clips: Sequence[NDArray[np.float32]]) -> NDArray[np.float32]:
        raise RuntimeError("CUDA out of memory (pretend)")


def expected(clip: NDArray[np.floating[Any]]) -> list[float]:
    level = float(np.mean(np.abs(clip)))
    return [level * (k + 1) for k in range(len(HEAD_NAMES))]


def tiny_factory(name: str) -> EmotionModel:
    """Used by worker processes: ``--factory tests.helpers.scoring_service:tiny_factory``."""
    delay = float(os.environ.get("TINY_DELAY_S", "0"))
    started = os.environ.get("TINY_STARTED")
    if name == "tiny":
        return TinyScorer(delay, Path(started) if started else None)
    if name == "boom":
        return BoomScorer()
    raise ConfigError(f"unknown test scorer {name!r}")


def clip(level: float, seconds: float = 0.5) -> NDArray[np.float32]:
    return np.full(round(seconds * SR), level, dtype=np.float32)


@contextlib.contextmanager
def running_broker(**options: Any) -> Iterator[Broker]:
    options.setdefault("frontend", LOOPBACK)
    options.setdefault("backend", LOOPBACK)
    broker = Broker(**options)
    thread = threading.Thread(target=broker.run, daemon=True)
    thread.start()
    try:
        yield broker
    finally:
        broker.stop()
        thread.join(5)
        broker.close()


@contextlib.contextmanager
def running_worker(
    endpoint: str, scorers: dict[str, EmotionModel], **options: Any
) -> Iterator[ScoringWorker]:
    options.setdefault("heartbeat_s", 0.1)
    worker = ScoringWorker(endpoint, scorers, **options)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(5)


def worker_count(broker: Broker) -> int:
    return broker.dispatcher.worker_count


class RawClient:
    """A bare DEALER, to send arbitrary frames and count every answer."""

    def __init__(self, endpoint: str) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)

    def send(self, frames: Sequence[bytes]) -> None:
        self.sock.send_multipart(list(frames))

    def request(self, rid: str, samples: NDArray[np.float32], deadline_s: float = 10.0) -> None:
        self.send(wire.encode_request(rid, "tiny", samples, time.time() + deadline_s))

    def replies(
        self, count: int, timeout_s: float = 10.0, linger_s: float = 0.0
    ) -> list[wire.Reply]:
        """Read until ``count`` replies came (or time ran out), then ``linger_s`` more for extras."""
        got: list[wire.Reply] = []
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if len(got) >= count:
                end = min(end, time.monotonic() + linger_s)
                if linger_s == 0:
                    break
            if self.sock.poll(10):
                got.append(wire.decode_reply(self.sock.recv_multipart()))
        return got

    def close(self) -> None:
        self.sock.close(0)
        self.ctx.term()
