"""The broker's logic, sans I/O: frames and timestamps in, frames to send out.

``Dispatcher`` owns the queue, the workers and every accepted request (a *job*, named by a
broker-made token). It never reads a clock: ``now`` is monotonic seconds, passed in by the shell.

- Admission: a malformed request gets a ``bad-request`` reply, an expired one a ``deadline``
  reply, a request arriving to a full queue a retryable ``busy`` reply. A repeat of an id the same
  client already has in flight is ignored (its first answer is still coming). The queue is
  bounded in requests (``queue_size``) and in bytes (``max_queued_bytes``: 1000 30-s clips would
  be 1.9 GB); re-queued jobs are never refused.
- Dispatch: queued jobs go FIFO to the least-loaded live worker that serves their scorer and has
  free capacity (capacity is announced in READY; draining workers get nothing new).
- Liveness: the broker pings each worker every ``heartbeat_s`` (the worker's own interval) and
  drops a worker silent for ``liveness`` intervals; its unanswered jobs go back to the *front* of
  the queue. A job re-queued more than ``max_requeues`` times is answered ``worker-lost``.
- Exactly once: a job is answered once, by whichever answer (worker reply, deadline) comes first;
  it is then forgotten, and any later answer for its token (from a worker declared dead, or the
  second worker after a re-queue) is dropped and counted in ``stats.duplicates``.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from duplexsim.scoring.service import control, wire
from duplexsim.scoring.service.errors import (
    BAD_REQUEST,
    BUSY,
    DEADLINE,
    SCORER_FAILED,
    WORKER_LOST,
    WireError,
)

__all__ = ["BrokerStats", "Dispatcher", "Send"]

logger = logging.getLogger("duplexsim.scoring.service")


@dataclass(frozen=True)
class Send:
    """Frames to send to one peer on the clients' (front) or workers' (back) socket."""

    side: Literal["client", "worker"]
    identity: bytes
    frames: list[bytes]


@dataclass
class BrokerStats:
    received: int = 0  # requests from clients
    rejected: int = 0  # malformed requests answered bad-request
    busy: int = 0  # requests refused because the queue was full
    dispatched: int = 0  # sends of a job to a worker (re-queued jobs count again)
    answered: int = 0  # answers sent to clients, any outcome
    expired: int = 0  # jobs answered with a deadline error by the broker
    requeued: int = 0  # jobs put back in the queue after their worker was lost
    workers_lost: int = 0  # workers dropped for missing heartbeats
    duplicates: int = 0  # worker answers for jobs already answered (dropped)
    repeated_requests: int = 0  # client requests whose id was already in flight (ignored)
    bad_worker_messages: int = 0


@dataclass
class _Job:
    token: bytes
    client: bytes
    request_id: str
    scorer: str
    deadline: float  # monotonic
    frames: list[bytes]
    size: int = 0  # bytes of all frames
    requeues: int = 0
    worker: bytes | None = None  # the worker currently holding it; None while queued


@dataclass
class _Worker:
    identity: bytes
    scorers: frozenset[str]
    capacity: int
    heartbeat_s: float
    expires_at: float
    next_ping: float
    in_flight: dict[bytes, None] = field(default_factory=dict)  # ordered set of tokens
    draining: bool = False

    @property
    def free(self) -> int:
        return 0 if self.draining else self.capacity - len(self.in_flight)


class Dispatcher:
    def __init__(
        self,
        *,
        queue_size: int = 1000,
        max_queued_bytes: int = 512 * 2**20,
        max_message_bytes: int = wire.DEFAULT_MAX_MESSAGE_BYTES,
        max_requeues: int = 2,
        liveness: int = 3,
    ) -> None:
        if queue_size < 1:
            raise ValueError("queue_size must be at least 1")
        self.queue_size = queue_size
        self.max_queued_bytes = max_queued_bytes
        self.max_message_bytes = max_message_bytes
        self.max_requeues = max_requeues
        self.liveness = liveness
        self.stats = BrokerStats()
        self._tokens = (f"{n:x}".encode() for n in itertools.count(1))
        self._jobs: dict[bytes, _Job] = {}  # every accepted, unanswered job
        self._deadlines: list[tuple[float, bytes]] = []  # heap; entries of answered jobs go stale
        self._queue: OrderedDict[bytes, None] = OrderedDict()  # tokens waiting for a worker
        self._queued_bytes = 0
        self._by_request: dict[tuple[bytes, str], bytes] = {}
        self._workers: dict[bytes, _Worker] = {}

    # ---- what the shell and tests may look at ---------------------------------------------

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def pending(self) -> int:
        """Accepted jobs not yet answered (queued or at a worker)."""
        return len(self._jobs)

    @property
    def worker_count(self) -> int:
        """Registered workers (safe to read from another thread)."""
        return len(self._workers)

    def workers(self) -> dict[bytes, int]:
        """Live workers and how many jobs each holds."""
        return {w.identity: len(w.in_flight) for w in self._workers.values()}

    # ---- events ---------------------------------------------------------------------------

    def on_client(
        self, client: bytes, frames: Sequence[bytes], *, now: float, wall: float
    ) -> list[Send]:
        """A request from ``client``; ``wall`` is unix time now, to place its deadline."""
        self.stats.received += 1
        try:
            header = wire.parse_request_header(frames, max_message_bytes=self.max_message_bytes)
        except WireError as e:
            self.stats.rejected += 1
            rid, scorer = wire.request_id_of(frames)
            return [self._reply(client, wire.error_reply(rid, scorer, BAD_REQUEST, e.message))]
        deadline = now + (header.deadline - wall)
        if deadline <= now:
            self.stats.expired += 1
            reply = wire.error_reply(
                header.id, header.scorer, DEADLINE, "deadline passed before the broker received it"
            )
            return [self._reply(client, reply)]
        if (client, header.id) in self._by_request:
            self.stats.repeated_requests += 1
            return []
        size = sum(len(f) for f in frames)
        if len(self._queue) >= self.queue_size or self._queued_bytes + size > self.max_queued_bytes:
            self.stats.busy += 1
            reply = wire.error_reply(
                header.id,
                header.scorer,
                BUSY,
                f"broker queue is full ({len(self._queue)} waiting, {self._queued_bytes} bytes)",
            )
            return [self._reply(client, reply)]
        job = _Job(next(self._tokens), client, header.id, header.scorer, deadline, list(frames))
        job.size = size
        self._jobs[job.token] = job
        heapq.heappush(self._deadlines, (deadline, job.token))
        self._enqueue(job)
        self._by_request[(client, header.id)] = job.token
        return self._dispatch()

    def on_worker(self, identity: bytes, frames: Sequence[bytes], *, now: float) -> list[Send]:
        try:
            msg = control.parse(frames)
        except WireError as e:
            self.stats.bad_worker_messages += 1
            logger.warning("bad message from worker %s: %s", identity.hex(), e.message)
            return []
        worker = self._workers.get(identity)
        if worker is not None:
            worker.expires_at = now + self.liveness * worker.heartbeat_s
        match msg:
            case control.Ready():
                out = self._on_ready(identity, worker, msg, now)
            case control.Heartbeat():
                out = [] if worker else [Send("worker", identity, control.encode(control.Reset()))]
            case control.Done():
                out = self._on_done(identity, worker, msg)
            case control.Drain():
                out = []
                if worker is not None:
                    worker.draining = True
            case control.Bye():
                out = []
                if worker is not None:
                    logger.info("worker %s left", identity.hex())
                    out = self._remove_worker(worker)
            case _:  # WORK / RESET are the broker's own verbs
                self.stats.bad_worker_messages += 1
                out = []
        return out + self._dispatch()

    def tick(self, now: float) -> list[Send]:
        """Drop silent workers, answer expired jobs, ping workers, dispatch."""
        out: list[Send] = []
        for worker in [w for w in self._workers.values() if now >= w.expires_at]:
            logger.warning("worker %s missed its heartbeats; dropping it", worker.identity.hex())
            self.stats.workers_lost += 1
            out += self._remove_worker(worker)
        for job in self._expired(now):
            self.stats.expired += 1
            where = "at a worker" if job.worker is not None else self._waiting_reason(job)
            reply = wire.error_reply(
                job.request_id, job.scorer, DEADLINE, f"deadline passed {where}"
            )
            out.append(self._answer(job, reply))
        for worker in self._workers.values():
            if now >= worker.next_ping:
                worker.next_ping = now + worker.heartbeat_s
                out.append(Send("worker", worker.identity, control.encode(control.Heartbeat())))
        return out + self._dispatch()

    def next_wakeup(self, now: float) -> float:
        """When ``tick`` next has something to do (monotonic seconds)."""
        times = [w.next_ping for w in self._workers.values()]
        times += [w.expires_at for w in self._workers.values()]
        self._drop_stale_deadlines()
        if self._deadlines:
            times.append(self._deadlines[0][0])
        return min(times, default=now + 1.0)

    # ---- worker messages ------------------------------------------------------------------

    def _on_ready(
        self, identity: bytes, worker: _Worker | None, msg: control.Ready, now: float
    ) -> list[Send]:
        if worker is None:
            logger.info(
                "worker %s ready: %s x%d", identity.hex(), ",".join(msg.scorers), msg.capacity
            )
            worker = _Worker(identity, frozenset(), 1, msg.heartbeat_s, 0.0, now + msg.heartbeat_s)
            self._workers[identity] = worker
        worker.scorers, worker.capacity = frozenset(msg.scorers), msg.capacity
        worker.heartbeat_s, worker.draining = msg.heartbeat_s, False
        worker.expires_at = now + self.liveness * msg.heartbeat_s
        return []

    def _on_done(self, identity: bytes, worker: _Worker | None, msg: control.Done) -> list[Send]:
        if worker is not None:
            worker.in_flight.pop(msg.token, None)
        job = self._jobs.get(msg.token)
        if job is None:
            self.stats.duplicates += 1
            return []
        try:
            reply = wire.decode_reply(msg.reply)
            if reply.id != job.request_id:
                raise WireError(f"answered id '{reply.id}' for request '{job.request_id}'")
        except WireError as e:
            logger.warning("worker %s sent a malformed reply: %s", identity.hex(), e.message)
            reply = wire.error_reply(
                job.request_id,
                job.scorer,
                SCORER_FAILED,
                f"malformed reply from worker: {e.message}",
            )
            return [self._answer(job, reply)]
        return [self._answer(job, msg.reply)]

    # ---- internals ------------------------------------------------------------------------

    def _dispatch(self) -> list[Send]:
        out: list[Send] = []
        free = [w for w in self._workers.values() if w.free > 0]
        for token in list(self._queue) if free else ():
            job = self._jobs[token]
            fits = [w for w in free if job.scorer in w.scorers and w.free > 0]
            if not fits:
                continue
            worker = min(fits, key=lambda w: len(w.in_flight) / w.capacity)
            self._unqueue(job)
            job.worker = worker.identity
            worker.in_flight[token] = None
            self.stats.dispatched += 1
            out.append(
                Send("worker", worker.identity, control.encode(control.Work(token, job.frames)))
            )
            if all(w.free <= 0 for w in free):
                break
        return out

    def _remove_worker(self, worker: _Worker) -> list[Send]:
        """Forget a worker; put the jobs it still held back at the front of the queue."""
        del self._workers[worker.identity]
        out: list[Send] = []
        for token in reversed(list(worker.in_flight)):
            job = self._jobs.get(token)
            if job is None or job.worker != worker.identity:
                continue  # already answered, or re-queued and held elsewhere
            job.requeues += 1
            job.worker = None
            if job.requeues > self.max_requeues:
                reply = wire.error_reply(
                    job.request_id,
                    job.scorer,
                    WORKER_LOST,
                    f"{job.requeues} workers were lost while scoring it",
                )
                out.append(self._answer(job, reply))
                continue
            self.stats.requeued += 1
            self._enqueue(job, front=True)
        return out

    def _enqueue(self, job: _Job, *, front: bool = False) -> None:
        self._queue[job.token] = None
        self._queued_bytes += job.size
        if front:
            self._queue.move_to_end(job.token, last=False)

    def _unqueue(self, job: _Job) -> None:
        if job.token in self._queue:
            del self._queue[job.token]
            self._queued_bytes -= job.size

    def _expired(self, now: float) -> list[_Job]:
        expired = []
        while self._deadlines and self._deadlines[0][0] <= now:
            _, token = heapq.heappop(self._deadlines)
            if token in self._jobs:
                expired.append(self._jobs[token])
        return expired

    def _drop_stale_deadlines(self) -> None:
        while self._deadlines and self._deadlines[0][1] not in self._jobs:
            heapq.heappop(self._deadlines)

    def _waiting_reason(self, job: _Job) -> str:
        if any(job.scorer in w.scorers for w in self._workers.values()):
            return "in the broker's queue"
        return f"in the broker's queue (no worker serves scorer '{job.scorer}')"

    def _answer(self, job: _Job, reply: wire.Reply | list[bytes]) -> Send:
        del self._jobs[job.token]
        self._unqueue(job)
        self._by_request.pop((job.client, job.request_id), None)
        self.stats.answered += 1
        frames = wire.encode_reply(reply) if isinstance(reply, wire.Reply) else reply
        return Send("client", job.client, frames)

    def _reply(self, client: bytes, reply: wire.Reply) -> Send:
        self.stats.answered += 1
        return Send("client", client, wire.encode_reply(reply))
