"""Dynamic batching and batch scoring, sans I/O (shared by the zmq worker and ``LocalScoring``).

``Batcher`` holds requests per scorer and hands out a batch when ``max_batch`` are waiting or the
oldest has waited ``max_wait_s``. ``run_batch`` scores one batch: items past their deadline and
clips ``clip_problem`` rejects get their own error reply, the rest go through one ``score()``
call; if the scorer raises, that batch's items fail with ``scorer-failed`` and nothing else does.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from duplexsim.scoring.models.base import EmotionModel, clip_problem
from duplexsim.scoring.service.errors import DEADLINE, INVALID_CLIP, SCORER_FAILED
from duplexsim.scoring.service.wire import Reply, Request, error_reply

__all__ = ["Batch", "Batcher", "run_batch"]

logger = logging.getLogger("duplexsim.scoring.service")

T = TypeVar("T")


@dataclass(frozen=True)
class Batch(Generic[T]):
    scorer: str
    items: list[T]


class Batcher(Generic[T]):
    """Per-scorer FIFO queues of items; ``now`` is monotonic seconds, passed in."""

    def __init__(self, *, max_batch: int, max_wait_s: float) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.max_batch = max_batch
        self.max_wait_s = max(0.0, max_wait_s)
        self._queues: dict[str, deque[tuple[float, T]]] = {}

    def __len__(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def add(self, scorer: str, item: T, now: float) -> None:
        self._queues.setdefault(scorer, deque()).append((now, item))

    def take(self, now: float) -> Batch[T] | None:
        """The next batch due (full, or its oldest item waited long enough), oldest first."""
        due = [
            (q[0][0], scorer)
            for scorer, q in self._queues.items()
            if q and (len(q) >= self.max_batch or now - q[0][0] >= self.max_wait_s)
        ]
        if not due:
            return None
        _, scorer = min(due)
        queue = self._queues[scorer]
        items = [queue.popleft()[1] for _ in range(min(self.max_batch, len(queue)))]
        if not queue:
            del self._queues[scorer]
        return Batch(scorer, items)

    def next_due(self) -> float | None:
        """When the oldest waiting item's wait is over (monotonic), or None when empty."""
        heads = [q[0][0] for q in self._queues.values() if q]
        return min(heads) + self.max_wait_s if heads else None

    def clear(self) -> list[T]:
        items = [item for q in self._queues.values() for _, item in q]
        self._queues.clear()
        return items


def run_batch(
    model: EmotionModel, scorer: str, requests: Sequence[Request], *, wall: float
) -> list[Reply]:
    """One reply per request, in order; ``wall`` is unix time now (deadlines are unix time)."""
    replies: list[Reply | None] = [None] * len(requests)
    valid: list[int] = []
    for i, req in enumerate(requests):
        if req.header.deadline <= wall:
            replies[i] = error_reply(
                req.header.id, scorer, DEADLINE, "deadline passed before scoring"
            )
        elif (problem := clip_problem(req.samples)) is not None:
            replies[i] = error_reply(req.header.id, scorer, INVALID_CLIP, problem)
        else:
            valid.append(i)
    if valid:
        for i, reply in zip(
            valid, _score(model, scorer, [requests[i] for i in valid]), strict=True
        ):
            replies[i] = reply
    return [r for r in replies if r is not None]


def _score(model: EmotionModel, scorer: str, requests: list[Request]) -> list[Reply]:
    dims = tuple(model.dimensions)
    try:
        scores = np.asarray(model.score([r.samples for r in requests]), dtype=np.float32)
        if scores.shape != (len(requests), len(dims)):
            raise ValueError(
                f"score() returned shape {scores.shape}, expected {(len(requests), len(dims))}"
            )
    except Exception as e:  # a scorer failure fails its batch, never the worker
        logger.exception("scorer %s failed on a batch of %d", scorer, len(requests))
        message = f"{type(e).__name__}: {e}"
        return [error_reply(r.header.id, scorer, SCORER_FAILED, message) for r in requests]
    return [
        Reply(
            r.header.id,
            scorer,
            ok=True,
            dimensions=dims,
            values=scores[k].copy(),
            precision=model.precision,
            weights=model.weights,
            version=model.version,
        )
        for k, r in enumerate(requests)
    ]
