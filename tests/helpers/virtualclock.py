"""An asyncio event loop on virtual time, and a scripted in-process model client for it.

The loop's clock moves only when every task waits on a timer (it jumps to the next one) and no
executor job is running, so a session driven by it is exact to the sample however loaded the
machine is. Real loopback sockets work on it too (a fake server and a real client in one loop):
what one side writes is in the other's socket when the write returns, so the clock never jumps
past a message in flight. The scripted client answers each frame with a reference behaviour's
output for it,
delivered after a delay the test chooses per chunk (a model that lags, a late chunk), up to the
moment the test has the server close the connection.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

import numpy as np

from duplexsim.clients.base import (
    AudioOut,
    Capabilities,
    ClientConfig,
    ClientEvent,
    DuplexClient,
    EndOfTurn,
)
from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.core.errors import Disconnected
from duplexsim.core.stalls import StallLog
from duplexsim.session import eventloop

T = TypeVar("T")


class _VirtualSelector(selectors.DefaultSelector):
    def __init__(self) -> None:
        super().__init__()
        self.loop: VirtualLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        loop = self.loop
        if ready or timeout == 0 or loop is None:
            return ready
        if loop.busy or timeout is None:  # a thread is working: wait for it in real time
            return super().select(None if timeout is None else 0.01)
        loop.now += timeout
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        selector = _VirtualSelector()
        super().__init__(selector)
        selector.loop = self
        self.now = 1000.0
        self.busy = 0  # executor jobs running
        # virtual time stands still while callbacks run: this loop never stalls
        eventloop.keep_stall_log(self, StallLog())

    def time(self) -> float:
        return self.now

    def run_in_executor(self, executor: Any, func: Callable[..., T], *args: Any) -> Any:
        self.busy += 1
        future = super().run_in_executor(executor, func, *args)

        def done(_: Future[T] | asyncio.Future[T]) -> None:
            self.busy -= 1

        future.add_done_callback(done)
        return future


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=VirtualLoop) as runner:
        return runner.run(main)


class ScriptedClient(DuplexClient):
    """A model in-process: each frame sent is pushed through ``behaviour``; its output for that
    frame arrives ``delay(k)`` seconds after the send (k: the output chunk's number).
    ``continuous`` says whether silent output is sent (a continuous stream) or nothing.
    ``close_at_s``: the server closes the connection at that time on the session's timeline:
    the audio it made is cut there, a send after it fails as on a closed socket, and a poll
    says the stream has ended."""

    protocol = "scripted"
    pollable = True

    def __init__(
        self,
        behaviour: Behaviour,
        *,
        rate: int = 16000,
        delay: Callable[[int], float] = lambda k: 0.0,
        continuous: bool = True,
        end_of_turn: bool = True,
        transform: Callable[[np.ndarray], np.ndarray] | None = None,
        close_at_s: float | None = None,
        connect_timeout_s: float = 10.0,
        input_jitter_ms: float = Capabilities.input_jitter_ms,
        answers_each_frame: bool = False,
    ) -> None:
        super().__init__(ClientConfig(url="scripted://", connect_timeout_s=connect_timeout_s))
        self.input_jitter_ms = input_jitter_ms
        self.answers_each_frame = answers_each_frame
        self.behaviour = behaviour
        self.rate = rate
        self.delay = delay
        self.continuous = continuous
        self.end_of_turn = end_of_turn
        self.transform = transform
        self.close_at_s = close_at_s
        self.t0: float | None = None
        self.sent_frames: list[np.ndarray] = []
        self._queue: list[ClientEvent] = []
        self._k = 0
        self._last = -1e9  # a stream delivers in order: nothing overtakes a late chunk

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            input_rate=self.rate,
            output_rate=self.rate,
            end_of_turn_signal=self.end_of_turn,
            continuous_output=self.continuous,
            input_jitter_ms=self.input_jitter_ms,
            answers_each_frame=self.answers_each_frame,
        )

    async def connect(self) -> None:
        return None

    def timeline_started(self, t0: float) -> None:
        self.t0 = t0

    def _closed_after(self, now: float) -> int | None:
        """Samples the server still sends from ``now`` before it closes (None: it stays open)."""
        if self.close_at_s is None or self.t0 is None:
            return None
        return max(0, round((self.t0 + self.close_at_s - now) * self.rate))

    async def send_audio(self, samples: np.ndarray) -> None:
        now = self.clock()
        left = self._closed_after(now)
        if left == 0:
            raise Disconnected("server closed the connection (1000)", reason="disconnected")
        self.sent_frames.append(samples)
        step = self.behaviour.push(samples)
        audio = step.audio if self.transform is None else self.transform(step.audio)
        if left is not None:
            audio = audio[:left]  # the model is cut where the server closes
        if self.continuous or not step.silent:
            self._last = max(self._last, now + self.delay(self._k))
            self._queue.append(AudioOut(audio.astype(np.float32), self._last))
            self._k += 1
        if step.reply_done and self.end_of_turn:
            self._queue.append(EndOfTurn(self._last))

    def events(self) -> Any:
        raise NotImplementedError

    def poll_events(self) -> tuple[list[ClientEvent], bool]:
        now = self.clock()
        due = [e for e in self._queue if e.arrival <= now]
        self._queue = [e for e in self._queue if e.arrival > now]
        due.sort(key=lambda e: e.arrival)
        return due, self._closed_after(now) == 0

    async def aclose(self) -> None:
        return None


def voiced_frames(x: np.ndarray, frame: int) -> Sequence[np.ndarray]:
    return [x[i : i + frame] for i in range(0, x.size, frame)]
