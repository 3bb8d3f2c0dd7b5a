"""The audio device interface: blocking writes and reads of float32 mono blocks.

Callers run these from their own threads (never from the event loop): a write or read may wait
for the device. Backends: ``sounddevice`` (PortAudio, imported only when a stream is opened) and
``fake`` (in memory, for tests and dry runs).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.errors import ConfigError

__all__ = ["AudioInput", "AudioOptions", "AudioOutput", "AudioUnavailable", "FloatArray"]

FloatArray = NDArray[np.float32]


class AudioUnavailable(ConfigError):
    """No usable audio device or library; the message says in one line what is missing."""


@dataclass(frozen=True)
class AudioOptions:
    backend: str = "sounddevice"  # or "fake"
    output_device: str | None = None  # name or index as sounddevice takes it; None: the default
    input_device: str | None = None
    rate: int = 48000  # device sample rate; sessions are resampled to and from it
    latency_ms: int = 150  # playback delay behind the session timeline (jitter buffer)

    def __post_init__(self) -> None:
        if not 8000 <= self.rate <= 192000:
            raise ConfigError(f"--audio-rate {self.rate}: expected 8000..192000 Hz")
        if not 0 <= self.latency_ms <= 5000:
            raise ConfigError(f"--audio-latency-ms {self.latency_ms}: expected 0..5000")


class AudioOutput(ABC):
    """A mono output stream at ``rate`` Hz."""

    def __init__(self, rate: int, block: int) -> None:
        self.rate = rate
        self.block = block

    @abstractmethod
    def write(self, samples: FloatArray) -> None:
        """Queue ``samples`` for playback; may block until the device has room."""

    @abstractmethod
    def close(self) -> None: ...


class AudioInput(ABC):
    """A mono input stream at ``rate`` Hz, read ``block`` samples at a time."""

    def __init__(self, rate: int, block: int) -> None:
        self.rate = rate
        self.block = block

    @abstractmethod
    def read(self) -> FloatArray | None:
        """The next ``block`` samples, waiting until the device has them; None at the end of
        the input (a fake microphone whose clip is over)."""

    @abstractmethod
    def close(self) -> None: ...
