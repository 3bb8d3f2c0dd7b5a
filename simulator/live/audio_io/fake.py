"""An in-memory audio backend for tests and dry runs (``--audio-backend fake[:MIC.wav]``).

The output keeps every block written, with the clock time of the write. The input is a
microphone that "speaks" a clip: block k is returned once k + 1 blocks' worth of time has passed
since the first read (its own block clock, like a real device), then ``tail_s`` of silence, then
the end of the input.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from duplexsim.core.audio import read_audio, resample
from duplexsim.live.audio_io.base import AudioInput, AudioOutput, FloatArray

__all__ = [
    "FakeInput",
    "FakeOutput",
    "inputs",
    "open_input",
    "open_output",
    "outputs",
    "reset",
    "set_microphone",
]

DEFAULT_TAIL_S = 1.0  # silence after the clip, so a pause can end the turn

_lock = threading.Lock()
_outputs: list[FakeOutput] = []
_inputs: list[FakeInput] = []
_microphone: tuple[FloatArray, int, float | None] | None = None


class FakeOutput(AudioOutput):
    def __init__(self, rate: int, block: int, clock: Callable[[], float] = time.monotonic):
        super().__init__(rate, block)
        self.clock = clock
        self.writes: list[tuple[float, FloatArray]] = []
        self.closed = False

    def write(self, samples: FloatArray) -> None:
        self.writes.append((self.clock(), np.array(samples, dtype=np.float32)))

    def audio(self) -> FloatArray:
        """Everything written, in order."""
        if not self.writes:
            return np.zeros(0, dtype=np.float32)
        return np.concatenate([block for _, block in self.writes])

    def close(self) -> None:
        self.closed = True


class FakeInput(AudioInput):
    def __init__(
        self,
        rate: int,
        block: int,
        signal: FloatArray,
        *,
        tail_s: float | None = DEFAULT_TAIL_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(rate, block)
        self.signal = np.asarray(signal, dtype=np.float32)
        self.end = None if tail_s is None else self.signal.size + round(tail_s * rate)
        self.clock = clock
        self.sleep = sleep
        self.started: float | None = None
        self.blocks_read = 0
        self.closed = False

    def read(self) -> FloatArray | None:
        if self.closed:
            return None
        if self.started is None:
            self.started = self.clock()
        k = self.blocks_read
        lo = k * self.block
        if self.end is not None and lo >= self.end:
            return None
        delay = self.started + (k + 1) * self.block / self.rate - self.clock()
        if delay > 0:
            self.sleep(delay)
        out = np.zeros(self.block, dtype=np.float32)
        part = self.signal[lo : lo + self.block]
        out[: part.size] = part
        self.blocks_read = k + 1
        return out

    def close(self) -> None:
        self.closed = True


def set_microphone(
    signal: FloatArray | None, rate: int = 16000, *, tail_s: float | None = DEFAULT_TAIL_S
) -> None:
    """What the next fake inputs play (None: silence that never ends)."""
    global _microphone
    with _lock:
        _microphone = None if signal is None else (np.asarray(signal, np.float32), rate, tail_s)


def open_output(rate: int, block: int) -> FakeOutput:
    out = FakeOutput(rate, block)
    with _lock:
        _outputs.append(out)
    return out


def open_input(rate: int, block: int, mic: str = "") -> FakeInput:
    """A fake microphone: ``mic`` is an audio file to speak, else what ``set_microphone`` set."""
    with _lock:
        configured = _microphone
    tail_s: float | None
    if mic:
        signal, tail_s = read_audio(Path(mic), sample_rate=rate).samples, DEFAULT_TAIL_S
    elif configured is not None:
        signal, tail_s = resample(configured[0], configured[1], rate), configured[2]
    else:
        signal, tail_s = np.zeros(0, dtype=np.float32), None
    inp = FakeInput(rate, block, signal, tail_s=tail_s)
    with _lock:
        _inputs.append(inp)
    return inp


def outputs() -> list[FakeOutput]:
    with _lock:
        return list(_outputs)


def inputs() -> list[FakeInput]:
    with _lock:
        return list(_inputs)


def reset() -> None:
    global _microphone
    with _lock:
        _outputs.clear()
        _inputs.clear()
        _microphone = None
