"""``LocalScoring``: the client-facing API without sockets, scoring in one worker thread.

Used when no scoring endpoint is given: ``run`` and ``score`` start this in-process worker. It
batches across concurrent ``score`` calls exactly like a service worker (same ``Batcher``, same
``run_batch``, so the same per-item errors), loading each scorer on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.errors import ConfigError
from duplexsim.scoring.models.base import EmotionModel
from duplexsim.scoring.service.api import ScoreResult, registry_factory
from duplexsim.scoring.service.batch import Batch, Batcher, run_batch
from duplexsim.scoring.service.errors import BAD_REQUEST, SCORER_FAILED, TIMEOUT, WireError
from duplexsim.scoring.service.wire import Reply, Request, error_reply

__all__ = ["LocalScoring"]

_Item = tuple["asyncio.Future[Reply]", Request]


class LocalScoring:
    """In-process scoring. ``factory(name)`` builds a scorer (default: ``load_scorer`` with
    ``device``, ``model_path`` and ``precision``, None for each scorer's default); ``max_batch``
    / ``max_wait_ms`` as for a service worker."""

    def __init__(
        self,
        factory: Callable[[str], EmotionModel] | None = None,
        *,
        device: str = "cpu",
        model_path: Path | None = None,
        precision: str | None = None,
        max_batch: int = 16,
        max_wait_ms: float = 2.0,
        deadline_grace_s: float = 1.0,
    ) -> None:
        if factory is not None and precision is not None:
            raise ConfigError("a precision applies to the registry's scorers, not to a factory")
        self._factory = factory or registry_factory(device, model_path, precision)
        self.deadline_grace_s = deadline_grace_s
        self._models: dict[str, EmotionModel] = {}
        self._loading: dict[str, asyncio.Future[EmotionModel]] = {}
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-scoring")
        self._batcher: Batcher[_Item] = Batcher(max_batch=max_batch, max_wait_s=max_wait_ms / 1000)
        self._wake = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self.batch_sizes: list[int] = []

    async def score(
        self, clips: Sequence[NDArray[np.floating[Any]]], scorer: str, deadline_s: float
    ) -> list[ScoreResult]:
        """One result per clip, in order. Raises ``ConfigError`` for a scorer that cannot load."""
        await self._model(scorer)
        loop = asyncio.get_running_loop()
        deadline = time.time() + deadline_s
        futures: list[asyncio.Future[Reply]] = []
        for clip in clips:
            fut: asyncio.Future[Reply] = loop.create_future()
            try:
                request = Request.of(uuid.uuid4().hex, scorer, clip, deadline)
            except WireError as e:
                fut.set_result(_error(scorer, BAD_REQUEST, e.message))
            else:
                self._batcher.add(scorer, (fut, request), time.monotonic())
            futures.append(fut)
        self._wake.set()
        if self._runner is None:
            self._runner = loop.create_task(self._run())
        wait = max(deadline - time.time() + self.deadline_grace_s, 0.0)
        await asyncio.wait(futures, timeout=wait)
        return [ScoreResult.from_reply(_outcome(f, scorer, wait)) for f in futures]

    async def aclose(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
        for fut, _ in self._batcher.clear():
            fut.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> LocalScoring:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _model(self, name: str) -> EmotionModel:
        """Load a scorer once, however many calls ask for it at the same time."""
        loading = self._loading.get(name)
        if loading is None:
            loop = asyncio.get_running_loop()
            loading = self._loading[name] = loop.run_in_executor(
                self._executor, self._factory, name
            )
        try:
            model = await asyncio.shield(loading)
        except Exception:
            self._loading.pop(name, None)  # let a later call try again (and fail loudly again)
            raise
        self._models[name] = model
        return model

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._wake.clear()
            batch = self._batcher.take(time.monotonic())
            if batch is None:
                due = self._batcher.next_due()
                timeout = None if due is None else max(due - time.monotonic(), 0.0)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
                continue
            self.batch_sizes.append(len(batch.items))
            await loop.run_in_executor(self._executor, self._score, batch, loop)

    def _score(self, batch: Batch[_Item], loop: asyncio.AbstractEventLoop) -> None:
        """In the scoring thread: score, then hand each reply to its waiting future."""
        live = [(fut, req) for fut, req in batch.items if not fut.done()]
        model = self._models[batch.scorer]
        try:
            replies = run_batch(model, batch.scorer, [req for _, req in live], wall=time.time())
        except Exception as e:  # run_batch already contains scorer errors; this is a bug guard
            replies = [_error(batch.scorer, SCORER_FAILED, str(e)) for _ in live]
        for (fut, _), reply in zip(live, replies, strict=True):
            loop.call_soon_threadsafe(_settle, fut, reply)


def _settle(fut: asyncio.Future[Reply], reply: Reply) -> None:
    if not fut.done():
        fut.set_result(reply)


def _outcome(fut: asyncio.Future[Reply], scorer: str, waited: float) -> Reply:
    if fut.done() and not fut.cancelled():
        return fut.result()
    fut.cancel()
    return _error(scorer, TIMEOUT, f"not scored within {waited:.1f} s")


def _error(scorer: str, code: str, message: str) -> Reply:
    return error_reply("", scorer, code, message)
