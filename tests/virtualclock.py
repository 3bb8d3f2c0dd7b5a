"""An asyncio event loop on virtual time, and a scripted in-process model client for it.

The loop's clock moves only when every task waits on a timer (it jumps to the next one) and no
executor job is running, so a session driven by it is exact to the sample however loaded the
machine is. The scripted client answers each frame with a reference behaviour's output for it,
delivered after a delay the test chooses per chunk (a model that lags, a late chunk).
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

import numpy as np

from clients.base import (
    AudioOut,
    Capabilities,
    ClientConfig,
    ClientEvent,
    DuplexClient,
    EndOfTurn,
)
from clients.behaviours import Behaviour

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
    frame arrives ``delay(k)`` seconds after the send (k: the output chunk's number). ``silence``
    says whether silent output is sent (a continuous stream) or nothing."""

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
    ) -> None:
        super().__init__(ClientConfig(url="scripted://"))
        self.behaviour = behaviour
        self.rate = rate
        self.delay = delay
        self.continuous = continuous
        self.end_of_turn = end_of_turn
        self.transform = transform
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
        )

    async def connect(self) -> None:
        return None

    async def send_audio(self, samples: np.ndarray) -> None:
        now = self.clock()
        self.sent_frames.append(samples)
        step = self.behaviour.push(samples)
        audio = step.audio if self.transform is None else self.transform(step.audio)
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
        return due, False

    async def aclose(self) -> None:
        return None


def voiced_frames(x: np.ndarray, frame: int) -> Sequence[np.ndarray]:
    return [x[i : i + frame] for i in range(0, x.size, frame)]
