"""``ScoringClient``: an asyncio DEALER on the broker's frontend, many requests in flight.

Each clip is one request with its own id; one reader task matches replies to waiting futures by
id (answers nobody waits for any more are counted and dropped). A retryable error (``busy``,
``scorer-failed``) is retried with the project's backoff while the deadline allows; no answer by
the deadline (plus a little grace) or ``timeout_s`` gives a ``timeout`` result, the sign of a
broker that is down or a wrong CURVE key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import numpy as np
import zmq
import zmq.asyncio
from numpy.typing import NDArray

from duplexsim.core.retry import RetryPolicy
from duplexsim.scoring.service import wire
from duplexsim.scoring.service.api import ScoreResult
from duplexsim.scoring.service.errors import BAD_REQUEST, DEADLINE, TIMEOUT, ScoringError, WireError
from duplexsim.scoring.service.security import KeyInput, load_public_key, secure_client

__all__ = ["DEFAULT_RETRY", "ScoringClient"]

logger = logging.getLogger("duplexsim.scoring.service")

DEFAULT_RETRY = RetryPolicy(max_attempts=6, base_s=0.05, max_s=2.0)
PROBE_TIMEOUT_S = 5.0  # a broker answers a probe at once; this is for a slow link


class ScoringClient:
    """Client of a scoring broker at ``endpoint`` (its frontend, e.g. ``tcp://host:5555``).

    ``server_public_key``: the broker's CURVE public key (Z85 or key file) when it uses CURVE.
    ``timeout_s``: the longest wait for one answer, even with a later deadline (default: the
    deadline plus ``deadline_grace_s`` bounds every wait, as the broker answers expired requests
    itself). ``retry``: how often and how soon retryable errors are tried again. Use as
    ``async with`` or call ``aclose()``; use one client from one event loop.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        server_public_key: KeyInput | None = None,
        timeout_s: float | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        deadline_grace_s: float = 1.0,
        max_message_bytes: int = wire.DEFAULT_MAX_MESSAGE_BYTES,
        context: zmq.asyncio.Context | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.retry = retry
        self.deadline_grace_s = deadline_grace_s
        self.max_message_bytes = max_message_bytes
        self.unmatched_replies = 0  # answers that arrived after their request gave up
        self._server_key = load_public_key(server_public_key) if server_public_key else None
        self._ctx = context or zmq.asyncio.Context.instance()
        self._sock: zmq.asyncio.Socket | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[str, asyncio.Future[wire.Reply]] = {}

    async def score(
        self, clips: Sequence[NDArray[np.floating[Any]]], scorer: str, deadline_s: float
    ) -> list[ScoreResult]:
        """One result per clip, in order. ``deadline_s``: seconds from now for the whole call."""
        self._open()
        deadline = time.time() + deadline_s
        return list(await asyncio.gather(*(self._score_one(c, scorer, deadline) for c in clips)))

    async def probe(self, timeout_s: float = PROBE_TIMEOUT_S) -> None:
        """ScoringError unless a broker answers at the endpoint within ``timeout_s``. The probe
        is an empty request whose deadline passed long ago: a broker answers it at once, with
        no worker involved."""
        self._open()
        assert self._sock is not None
        rid = f"probe-{uuid.uuid4().hex}"
        frames = wire.encode_request(rid, "probe", np.zeros(0, np.float32), 1.0)
        fut: asyncio.Future[wire.Reply] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            async with asyncio.timeout(timeout_s):
                await self._sock.send_multipart(frames, copy=False)
                await fut
        except TimeoutError:
            raise ScoringError(
                f"no scoring broker answers at {self.endpoint} within {timeout_s:g} s "
                "(is `duplexsim scoring serve` running there, with this CURVE key?)",
                code=TIMEOUT,
                retryable=True,
            ) from None
        finally:
            self._pending.pop(rid, None)

    async def aclose(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        for fut in self._pending.values():
            fut.cancel()
        self._pending.clear()
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None

    async def __aenter__(self) -> ScoringClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ---- internals ------------------------------------------------------------------------

    def _open(self) -> None:
        if self._sock is not None:
            return
        sock = self._ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        if self._server_key is not None:
            secure_client(sock, self._server_key)
        sock.connect(self.endpoint)
        self._sock = sock
        self._reader = asyncio.get_running_loop().create_task(self._read(sock))

    async def _score_one(
        self, clip: NDArray[np.floating[Any]], scorer: str, deadline: float
    ) -> ScoreResult:
        attempt = 1
        while True:
            if time.time() >= deadline:
                return ScoreResult.failure(scorer, DEADLINE, "deadline passed before it was sent")
            rid = uuid.uuid4().hex
            try:
                frames = wire.encode_request(
                    rid, scorer, clip, deadline, max_message_bytes=self.max_message_bytes
                )
            except WireError as e:
                return ScoreResult.failure(scorer, BAD_REQUEST, e.message)
            result = ScoreResult.from_reply(await self._round_trip(rid, scorer, frames, deadline))
            if result.ok or not result.retryable or result.code == TIMEOUT:
                return result
            delay = self.retry.delay(attempt, retryable=True)
            if delay is None or time.time() + delay >= deadline:
                return result
            await asyncio.sleep(delay)
            attempt += 1

    async def _round_trip(
        self, rid: str, scorer: str, frames: list[bytes], deadline: float
    ) -> wire.Reply:
        assert self._sock is not None
        fut: asyncio.Future[wire.Reply] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        wait = deadline - time.time() + self.deadline_grace_s
        if self.timeout_s is not None:
            wait = min(wait, self.timeout_s)
        try:
            async with asyncio.timeout(max(wait, 0.0)):
                await self._sock.send_multipart(frames, copy=False)
                return await fut
        except TimeoutError:
            return wire.error_reply(
                rid, scorer, TIMEOUT, f"no answer from {self.endpoint} within {wait:.1f} s"
            )
        finally:
            self._pending.pop(rid, None)

    async def _read(self, sock: zmq.asyncio.Socket) -> None:
        while True:
            frames = await sock.recv_multipart()
            try:
                reply = wire.decode_reply(frames)
            except WireError as e:
                logger.warning("ignoring a malformed reply from %s: %s", self.endpoint, e.message)
                continue
            fut = self._pending.get(reply.id)
            if fut is None or fut.done():
                self.unmatched_replies += 1
                continue
            fut.set_result(reply)
