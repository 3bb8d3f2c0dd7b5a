"""The broker's I/O shell: two ROUTER sockets around a ``Dispatcher``.

Clients (DEALER) talk to the frontend, workers (DEALER) to the backend. All decisions live in
``dispatch.Dispatcher``; this module only moves frames and reads the clock.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from types import TracebackType

import zmq

from duplexsim.core.errors import ConfigError
from duplexsim.scoring.service import wire
from duplexsim.scoring.service.dispatch import BrokerStats, Dispatcher, Send
from duplexsim.scoring.service.security import KeyInput, check_bind, load_secret_key, secure_server

__all__ = ["DEFAULT_BACKEND", "DEFAULT_FRONTEND", "Broker"]

logger = logging.getLogger("duplexsim.scoring.service")

DEFAULT_FRONTEND = "tcp://127.0.0.1:5555"
DEFAULT_BACKEND = "tcp://127.0.0.1:5556"
_DRAIN_MAX = 256  # messages read from one socket before looking at the other
_POLL_MAX_S = 0.1  # longest poll, so stop() is noticed promptly


class Broker:
    """Binds on construction (``*`` ports resolve into ``frontend`` / ``backend``); ``run`` blocks.

    ``curve_secret_key`` (Z85 text or a key file) encrypts both sockets; then binding a
    non-loopback address is allowed. Without it such a bind raises ``ConfigError`` unless
    ``allow_insecure``. ``queue_size`` and ``max_queued_bytes`` bound requests waiting for a
    worker (more get a retryable ``busy``); ``max_message_bytes`` bounds one request (larger ones get
    ``bad-request``; twice that disconnects the sender); ``liveness`` heartbeats missed drop a
    worker; ``max_requeues`` bounds how often one request may outlive its worker.
    """

    def __init__(
        self,
        frontend: str = DEFAULT_FRONTEND,
        backend: str = DEFAULT_BACKEND,
        *,
        curve_secret_key: KeyInput | None = None,
        allow_insecure: bool = False,
        queue_size: int = 1000,
        max_queued_bytes: int = 512 * 2**20,
        max_message_bytes: int = wire.DEFAULT_MAX_MESSAGE_BYTES,
        max_requeues: int = 2,
        liveness: int = 3,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
    ) -> None:
        secret = load_secret_key(curve_secret_key) if curve_secret_key is not None else None
        for endpoint in (frontend, backend):
            check_bind(endpoint, curve=secret is not None, allow_insecure=allow_insecure)
        self.dispatcher = Dispatcher(
            queue_size=queue_size,
            max_queued_bytes=max_queued_bytes,
            max_message_bytes=max_message_bytes,
            max_requeues=max_requeues,
            liveness=liveness,
        )
        self._own_context = context is None
        self._ctx = context or zmq.Context()
        self._stop = threading.Event()
        self._front = self._bind(frontend, secret, max_message_bytes)
        try:
            self._back = self._bind(backend, secret, max_message_bytes)
        except BaseException:
            self._front.close(linger=0)
            if self._own_context:
                self._ctx.term()
            raise
        self.frontend = self._endpoint(self._front)
        self.backend = self._endpoint(self._back)

    @property
    def stats(self) -> BrokerStats:
        return self.dispatcher.stats

    def run(self) -> None:
        """Serve until ``stop()`` (from any thread)."""
        poller = zmq.Poller()
        poller.register(self._front, zmq.POLLIN)
        poller.register(self._back, zmq.POLLIN)
        logger.info("broker: clients on %s, workers on %s", self.frontend, self.backend)
        while not self._stop.is_set():
            now = time.monotonic()
            wait = min(max(self.dispatcher.next_wakeup(now) - now, 0.0), _POLL_MAX_S)
            ready = dict(poller.poll(math.ceil(wait * 1000)))
            if self._back in ready:
                self._drain(self._back, "worker")
            if self._front in ready:
                self._drain(self._front, "client")
            self._send(self.dispatcher.tick(time.monotonic()))

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._front.close(linger=0)
        self._back.close(linger=0)
        if self._own_context:
            self._ctx.term()

    def __enter__(self) -> Broker:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _drain(self, socket: zmq.Socket[bytes], side: str) -> None:
        for _ in range(_DRAIN_MAX):
            try:
                identity, *frames = socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            now = time.monotonic()
            if side == "worker":
                self._send(self.dispatcher.on_worker(identity, frames, now=now))
            else:
                self._send(self.dispatcher.on_client(identity, frames, now=now, wall=time.time()))

    def _send(self, sends: list[Send]) -> None:
        for s in sends:
            socket = self._back if s.side == "worker" else self._front
            try:
                socket.send_multipart([s.identity, *s.frames], copy=False)
            except zmq.ZMQError as e:  # a peer that vanished; its answer is lost with it
                logger.debug("could not send to %s %s: %s", s.side, s.identity.hex(), e)

    def _bind(self, endpoint: str, secret: bytes | None, max_bytes: int) -> zmq.Socket[bytes]:
        socket: zmq.Socket[bytes] = self._ctx.socket(zmq.ROUTER)
        socket.setsockopt(zmq.LINGER, 0)
        socket.setsockopt(zmq.MAXMSGSIZE, 2 * max_bytes)  # hard stop before memory trouble
        if secret is not None:
            secure_server(socket, secret)
        try:
            socket.bind(endpoint)
        except zmq.ZMQError as e:
            socket.close(linger=0)
            raise ConfigError(f"cannot bind {endpoint}: {e}") from None
        return socket

    @staticmethod
    def _endpoint(socket: zmq.Socket[bytes]) -> str:
        raw = socket.getsockopt(zmq.LAST_ENDPOINT)
        return raw.decode() if isinstance(raw, bytes) else str(raw)
