"""A scoring worker: a DEALER on the broker's backend, one scoring thread, dynamic batching.

The I/O thread (``run``) owns the sockets: it registers (READY: scorers, capacity, heartbeat
interval), heartbeats, decodes WORK into the ``Batcher`` and hands due batches to the scoring
thread, which calls ``run_batch`` and sends the replies back over an inproc pipe. Scoring off the
I/O thread keeps heartbeats flowing during a long GPU batch, so a busy worker is never mistaken
for a dead one. A malformed request or a scorer exception becomes an error reply; the worker
stays up. ``stop()`` drains: DRAIN (no new work), finish what is held, BYE, exit. If the broker
goes silent for ``liveness`` heartbeats the worker reconnects with a fresh socket and READY.
"""

from __future__ import annotations

import itertools
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import zmq

from duplexsim.scoring.models.base import EmotionModel
from duplexsim.scoring.service import control, wire
from duplexsim.scoring.service.batch import Batch, Batcher, run_batch
from duplexsim.scoring.service.errors import BAD_REQUEST, UNKNOWN_SCORER, WireError
from duplexsim.scoring.service.security import KeyInput, load_public_key, secure_client

__all__ = ["ScoringWorker"]

logger = logging.getLogger("duplexsim.scoring.service")

WorkItem = tuple[bytes, wire.Request]  # (broker token, decoded request)
_ids = itertools.count()
_POLL_MAX_S = 0.1


class ScoringWorker:
    """Serves ``scorers`` (name -> loaded model) to the broker backend at ``connect``.

    ``max_batch`` / ``max_wait_ms``: a batch is scored when that many requests wait or the oldest
    has waited that long. ``capacity``: requests the broker may hand this worker at once (default
    2 x max_batch, so one batch collects while the other scores). ``server_public_key``: the
    broker's CURVE public key (Z85 or key file) when the broker uses CURVE.
    """

    def __init__(
        self,
        connect: str,
        scorers: Mapping[str, EmotionModel],
        *,
        max_batch: int = 16,
        max_wait_ms: float = 5.0,
        capacity: int | None = None,
        heartbeat_s: float = 1.0,
        liveness: int = 3,
        server_public_key: KeyInput | None = None,
        max_message_bytes: int = wire.DEFAULT_MAX_MESSAGE_BYTES,
        drain_timeout_s: float = 30.0,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
    ) -> None:
        if not scorers:
            raise ValueError("a worker needs at least one scorer")
        self.connect = connect
        self.models = dict(scorers)
        self.capacity = capacity or 2 * max_batch
        self.heartbeat_s = heartbeat_s
        self.liveness = liveness
        self.max_message_bytes = max_message_bytes
        self.drain_timeout_s = drain_timeout_s
        self._server_key = load_public_key(server_public_key) if server_public_key else None
        self._batcher: Batcher[WorkItem] = Batcher(
            max_batch=max_batch, max_wait_s=max_wait_ms / 1000
        )
        self._ctx = context or zmq.Context.instance()
        self._stop = threading.Event()
        self._batches: queue.Queue[Batch[WorkItem] | None] = queue.Queue()
        self._pipe = f"inproc://scoring-worker-{next(_ids)}"
        self._sock: zmq.Socket[bytes] | None = None
        self._wake: zmq.Socket[bytes]
        self._poller = zmq.Poller()
        self._broker_expires = 0.0
        self._busy = False
        self.batch_sizes: list[int] = []  # every batch handed to the scorer, for tests and logs

    @classmethod
    def from_factory(
        cls,
        connect: str,
        scorer_names: Sequence[str],
        factory: Callable[[str], EmotionModel],
        **options: Any,
    ) -> ScoringWorker:
        """Load each scorer with ``factory(name)`` (e.g. ``load_scorer``) before registering."""
        return cls(connect, {name: factory(name) for name in scorer_names}, **options)

    def stop(self) -> None:
        """Ask ``run`` to drain and return (safe from other threads and signal handlers)."""
        self._stop.set()

    def run(self) -> None:
        """Serve until ``stop()``; returns after the held work is answered."""
        self._wake = self._ctx.socket(zmq.PAIR)
        self._wake.bind(self._pipe)
        scorer = threading.Thread(target=self._score_loop, name="scoring-worker", daemon=True)
        scorer.start()
        try:
            self._serve()
        finally:
            self._batches.put(None)
            scorer.join(timeout=5.0)
            self._wake.close(linger=0)
            if self._sock is not None:
                self._sock.close(linger=100)
                self._sock = None

    # ---- I/O thread -----------------------------------------------------------------------

    def _serve(self) -> None:
        self._reconnect(time.monotonic())
        next_beat, quiet_since, drain_until = time.monotonic() + self.heartbeat_s, 0.0, 0.0
        while True:
            now = time.monotonic()
            if self._stop.is_set() and not drain_until:
                self._send(control.Drain())
                drain_until, quiet_since = now + self.drain_timeout_s, now
            idle = not self._busy and not len(self._batcher)
            if drain_until and ((idle and now - quiet_since >= 0.2) or now >= drain_until):
                self._send(control.Bye())
                return
            assert self._sock is not None
            ready = dict(self._poller.poll(math.ceil(self._wait(now, next_beat) * 1000)))
            if self._wake in ready:
                self._forward_results()
            if self._sock in ready and self._read_broker():
                quiet_since = time.monotonic()
            now = time.monotonic()
            if not self._busy and (batch := self._batcher.take(now)) is not None:
                self._busy = True
                self.batch_sizes.append(len(batch.items))
                self._batches.put(batch)
            if now >= next_beat:
                self._send(control.Heartbeat())
                next_beat = now + self.heartbeat_s
            if now >= self._broker_expires:
                logger.warning(
                    "broker %s silent for %d heartbeats; reconnecting", self.connect, self.liveness
                )
                self._reconnect(now)

    def _wait(self, now: float, next_beat: float) -> float:
        times = [next_beat, self._broker_expires, now + _POLL_MAX_S]
        due = self._batcher.next_due()
        if due is not None and not self._busy:
            times.append(due)
        return max(0.0, min(times) - now)

    def _reconnect(self, now: float) -> None:
        if self._sock is not None:
            self._sock.close(linger=0)
            dropped = self._batcher.clear()
            if dropped:
                logger.warning(
                    "dropped %d queued requests of the lost broker session", len(dropped)
                )
        sock: zmq.Socket[bytes] = self._ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, 2 * self.max_message_bytes)
        if self._server_key is not None:
            secure_client(sock, self._server_key)
        sock.connect(self.connect)
        self._sock = sock
        self._poller = zmq.Poller()
        self._poller.register(self._wake, zmq.POLLIN)
        self._poller.register(sock, zmq.POLLIN)
        self._broker_expires = now + self.liveness * self.heartbeat_s
        self._send(control.Ready(tuple(self.models), self.capacity, self.heartbeat_s))

    def _read_broker(self) -> bool:
        """Handle every waiting broker message; True when new work arrived."""
        assert self._sock is not None
        got_work = False
        while True:
            try:
                frames = self._sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return got_work
            now = time.monotonic()
            self._broker_expires = now + self.liveness * self.heartbeat_s
            try:
                msg = control.parse(frames)
            except WireError as e:
                logger.warning("ignoring a bad message from the broker: %s", e.message)
                continue
            if isinstance(msg, control.Work):
                got_work = True
                self._accept(msg, now)
            elif isinstance(msg, control.Reset):
                self._send(control.Ready(tuple(self.models), self.capacity, self.heartbeat_s))

    def _accept(self, msg: control.Work, now: float) -> None:
        try:
            request = wire.decode_request(msg.request, max_message_bytes=self.max_message_bytes)
        except WireError as e:
            rid, scorer = wire.request_id_of(msg.request)
            self._reply(msg.token, wire.error_reply(rid, scorer, BAD_REQUEST, e.message))
            return
        scorer = request.header.scorer
        if scorer not in self.models:
            served = ", ".join(self.models)
            reply = wire.error_reply(
                request.header.id, scorer, UNKNOWN_SCORER, f"this worker serves {served}"
            )
            self._reply(msg.token, reply)
            return
        self._batcher.add(scorer, (msg.token, request), now)

    def _forward_results(self) -> None:
        while True:
            try:
                frames = self._wake.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._busy = False  # one message per batch: token + 3 reply frames per item
            for i in range(0, len(frames), 4):
                self._send(control.Done(frames[i], frames[i + 1 : i + 4]))

    def _reply(self, token: bytes, reply: wire.Reply) -> None:
        self._send(control.Done(token, wire.encode_reply(reply)))

    def _send(self, msg: control.ControlMessage) -> None:
        assert self._sock is not None
        try:
            self._sock.send_multipart(control.encode(msg), zmq.NOBLOCK, copy=False)
        except zmq.Again:  # no broker connection yet and the queue is full: heartbeats will retry
            logger.debug("broker not reachable; dropped %s", type(msg).__name__)

    # ---- scoring thread -------------------------------------------------------------------

    def _score_loop(self) -> None:
        out: zmq.Socket[bytes] = self._ctx.socket(zmq.PAIR)
        out.connect(self._pipe)
        try:
            while (batch := self._batches.get()) is not None:
                requests = [request for _, request in batch.items]
                replies = run_batch(
                    self.models[batch.scorer], batch.scorer, requests, wall=time.time()
                )
                frames = []
                for (token, _), reply in zip(batch.items, replies, strict=True):
                    frames += [token, *wire.encode_reply(reply)]
                out.send_multipart(frames, copy=False)
        finally:
            out.close(linger=0)
