"""The sounddevice (PortAudio) backend. sounddevice is imported only here, only when a stream is
opened, and every way it can be missing becomes a one-line ``AudioUnavailable``."""

from __future__ import annotations

import threading
from collections import deque
from types import ModuleType
from typing import Any, Literal

import numpy as np

from duplexsim.live.audio_io.base import AudioInput, AudioOutput, AudioUnavailable, FloatArray

__all__ = ["DeviceInput", "DeviceOutput", "import_sounddevice", "resolve_device"]

Kind = Literal["input", "output"]
FIFO_S = 2  # seconds of audio buffered between our thread and the device's
READ_WAIT_S = 5.0


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def import_sounddevice() -> ModuleType:
    try:
        import sounddevice as sd
    except OSError:  # the Python package is there, the PortAudio library is not
        raise AudioUnavailable(
            "audio unavailable: PortAudio library not found (install libportaudio2)"
        ) from None
    except ImportError:
        raise AudioUnavailable(
            "audio unavailable: the sounddevice package is not installed "
            "(pip install 'duplexsim[audio-device]')"
        ) from None
    module: ModuleType = sd
    return module


def resolve_device(sd: Any, device: str | None, kind: Kind) -> int | str:
    """The device to open: ``device`` (an index or a name) or the default one, checked to exist."""
    try:
        devices = sd.query_devices()
    except sd.PortAudioError as exc:
        raise AudioUnavailable(f"audio {kind} unavailable: {_one_line(exc)}") from None
    channels = f"max_{kind}_channels"
    usable = [d["name"] for d in devices if d[channels] > 0]
    if not usable:
        raise AudioUnavailable(f"no audio {kind} device (sounddevice lists none)")
    if device is None:
        index = sd.default.device[0 if kind == "input" else 1]
        if index is None or int(index) < 0:
            raise AudioUnavailable(
                f"no default audio {kind} device; choose one with --audio-device "
                f"(sounddevice lists: {', '.join(usable[:5])})"
            )
        return int(index)
    spec: int | str = int(device) if device.isdigit() else device
    try:
        sd.query_devices(spec, kind)
    except (ValueError, sd.PortAudioError) as exc:
        raise AudioUnavailable(f"audio {kind} device {device!r}: {_one_line(exc)}") from None
    return spec


class _Fifo:
    """Samples between a stream callback (PortAudio's thread) and our reader or writer thread."""

    def __init__(self, max_samples: int) -> None:
        self.max_samples = max_samples
        self.chunks: deque[FloatArray] = deque()
        self.size = 0
        self.dropped = 0  # samples lost to a full FIFO (input) or missing (output underflow)
        self.closed = False
        self.cond = threading.Condition()

    def put(self, x: FloatArray, *, wait: bool) -> None:
        with self.cond:
            while wait and self.size + x.size > self.max_samples and not self.closed:
                self.cond.wait(0.1)
            self.chunks.append(x)
            self.size += x.size
            while self.size > self.max_samples:  # only without waiting: drop the oldest
                self.size -= self.chunks[0].size
                self.dropped += self.chunks.popleft().size
            self.cond.notify_all()

    def take(self, out: FloatArray, *, wait_s: float = 0.0) -> int:
        """Fill ``out`` from the front; returns how many samples were there (the rest is 0)."""
        n = out.size
        with self.cond:
            if wait_s > 0:
                self.cond.wait_for(lambda: self.size >= n or self.closed, wait_s)
            got = 0
            while got < n and self.chunks:
                head = self.chunks[0]
                k = min(n - got, head.size)
                out[got : got + k] = head[:k]
                got += k
                if k == head.size:
                    self.chunks.popleft()
                else:
                    self.chunks[0] = head[k:]
            self.size -= got
            out[got:] = 0.0
            self.cond.notify_all()
            return got

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


def _open(kind: Kind, rate: int, block: int, device: str | None, callback: Any) -> Any:
    """A callback stream (PortAudio's blocking I/O is unreliable on some host APIs, JACK's
    among them)."""
    sd = import_sounddevice()
    spec = resolve_device(sd, device, kind)
    cls = sd.InputStream if kind == "input" else sd.OutputStream
    try:
        stream = cls(
            samplerate=rate,
            blocksize=block,
            channels=1,
            dtype="float32",
            device=spec,
            callback=callback,
        )
        stream.start()
    except (sd.PortAudioError, ValueError) as exc:
        raise AudioUnavailable(f"cannot open audio {kind} at {rate} Hz: {_one_line(exc)}") from None
    return stream


class DeviceOutput(AudioOutput):
    def __init__(self, rate: int, block: int, device: str | None = None) -> None:
        super().__init__(rate, block)
        self._fifo = _Fifo(rate * FIFO_S)
        self._stream = _open("output", rate, block, device, self._callback)

    @property
    def underflows(self) -> int:
        return self._fifo.dropped

    def _callback(self, outdata: Any, frames: int, time: Any, status: Any) -> None:
        out = outdata[:, 0]
        got = self._fifo.take(out)
        if got and got < frames:
            self._fifo.dropped += frames - got

    def write(self, samples: FloatArray) -> None:
        self._fifo.put(np.array(samples, dtype=np.float32), wait=True)

    def close(self) -> None:
        self._fifo.close()
        try:
            self._stream.stop()
        finally:
            self._stream.close()


class DeviceInput(AudioInput):
    def __init__(self, rate: int, block: int, device: str | None = None) -> None:
        super().__init__(rate, block)
        self._fifo = _Fifo(rate * FIFO_S)
        self._stream = _open("input", rate, block, device, self._callback)

    @property
    def overflows(self) -> int:
        return self._fifo.dropped

    def _callback(self, indata: Any, frames: int, time: Any, status: Any) -> None:
        self._fifo.put(np.array(indata[:, 0], dtype=np.float32), wait=False)

    def read(self) -> FloatArray | None:
        out = np.zeros(self.block, dtype=np.float32)
        got = self._fifo.take(out, wait_s=READ_WAIT_S)
        if self._fifo.closed:
            return None
        if got < self.block:
            raise AudioUnavailable(f"the microphone delivered nothing for {READ_WAIT_S:g} s")
        return out

    def close(self) -> None:
        self._fifo.close()
        try:
            self._stream.stop()
        finally:
            self._stream.close()
