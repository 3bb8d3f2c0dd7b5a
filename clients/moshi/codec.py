"""Ogg/Opus streaming for moshi with sphn, the codec library the Moshi server itself uses.

Each direction is one continuous Ogg stream: the first audio message carries the ``OpusHead`` and
``OpusTags`` pages, later ones whole audio pages. ``OggOpusEncoder`` takes PCM in any chunk size
and encodes it in 80 ms frames (1920 samples at 24 kHz, Mimi's frame); ``OggOpusDecoder`` takes
the stream's bytes in any split and returns the PCM decoded so far.

Delay: the Opus encoder's lookahead delays the decoded audio by ``OPUS_DELAY_SAMPLES`` (156
samples, 6.5 ms at 24 kHz) on every encode/decode pass. sphn writes a pre-skip of 3840 (80 ms at
48 kHz) into ``OpusHead`` but its reader never applies a pre-skip, and neither does the Moshi
server or its clients, so this delay is real: a round trip through a Moshi server adds 2 x 6.5 ms.
We do not trim it either, to hear what a Moshi client hears.

Cost (measured on the development box): about 1 ms to encode and 0.15 ms to decode one 80 ms
frame. sphn holds the GIL while it works, so threads would not take this off the event loop.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.errors import ConfigError, ProtocolError
from duplexsim.core.extras import require

sphn = require("sphn", "the moshi protocol")
if hasattr(sphn.OpusStreamWriter, "read_bytes"):  # pragma: no cover - sphn 0.1's two-call API
    raise ConfigError("the moshi protocol needs sphn 0.2 (0.1 is installed)")

__all__ = [
    "FRAME",
    "OPUS_DELAY_SAMPLES",
    "RATE",
    "FrameBuffer",
    "OggOpusDecoder",
    "OggOpusEncoder",
    "split_pages",
]

RATE = 24000  # Mimi's sample rate; the only rate on the wire
FRAME = 1920  # samples in one Mimi frame, 80 ms (12.5 Hz)
OPUS_DELAY_SAMPLES = 156  # encoder lookahead, 6.5 ms at 24 kHz, per encode/decode pass

FloatArray = NDArray[np.float32]
_EMPTY: FloatArray = np.zeros(0, dtype=np.float32)


class FrameBuffer:
    """Cuts a stream of float32 chunks into whole frames, keeping the remainder for later."""

    def __init__(self, size: int = FRAME) -> None:
        self.size = size
        self._rest = _EMPTY

    @property
    def pending(self) -> int:
        return int(self._rest.size)

    def push(self, samples: NDArray[Any]) -> list[FloatArray]:
        x = np.asarray(samples, dtype=np.float32).reshape(-1)
        if not self._rest.size and x.size == self.size:
            return [x]  # the usual case: the session sends whole frames
        data = np.concatenate((self._rest, x)) if self._rest.size else x
        whole = data.size - data.size % self.size
        self._rest = data[whole:].copy()
        return [data[i : i + self.size] for i in range(0, whole, self.size)]


class OggOpusEncoder:
    """PCM in any chunk size -> the bytes of one continuous Ogg/Opus stream (maybe none yet)."""

    def __init__(self, rate: int = RATE, frame: int = FRAME) -> None:
        self._writer = sphn.OpusStreamWriter(rate)
        self._frames = FrameBuffer(frame)

    @property
    def pending(self) -> int:
        """Samples waiting for a whole frame."""
        return self._frames.pending

    def encode(self, samples: NDArray[Any]) -> bytes:
        parts = [self.encode_frame(f) for f in self._frames.push(samples)]
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def encode_frame(self, frame: FloatArray) -> bytes:
        """Exactly one frame (960 or 1920 samples) -> its pages, headers first on the first call."""
        pcm = np.ascontiguousarray(frame, dtype=np.float32)
        return bytes(self._writer.append_pcm(pcm))


class OggOpusDecoder:
    """Bytes of one Ogg/Opus stream, in any split -> float32 PCM; bad bytes are a ProtocolError."""

    def __init__(self, rate: int = RATE) -> None:
        self._reader = sphn.OpusStreamReader(rate)
        self._broken: str | None = None

    def decode(self, data: bytes) -> FloatArray:
        if self._broken is not None:
            raise ProtocolError(f"Ogg/Opus stream already broken: {self._broken}")
        if not data:
            return _EMPTY
        try:
            pcm = self._reader.append_bytes(data)
        except (ValueError, RuntimeError, TypeError) as exc:
            self._broken = str(exc) or type(exc).__name__
            raise ProtocolError(f"undecodable Ogg/Opus audio: {self._broken}") from None
        return np.asarray(pcm, dtype=np.float32).reshape(-1)


_PAGE_HEADER = struct.Struct("<4sBBqIIIB")  # capture, version, type, granule, serial, seq, crc, n


def split_pages(data: bytes) -> list[bytes]:
    """Whole Ogg pages -> one bytes object per page (to send them as separate messages)."""
    pages: list[bytes] = []
    at = 0
    while at < len(data):
        if len(data) - at < _PAGE_HEADER.size or data[at : at + 4] != b"OggS":
            raise ValueError(f"no Ogg page at byte {at}")
        n_segments = data[at + _PAGE_HEADER.size - 1]
        body_at = at + _PAGE_HEADER.size + n_segments
        end = body_at + sum(data[at + _PAGE_HEADER.size : body_at])
        if end > len(data):
            raise ValueError(f"Ogg page at byte {at} is truncated")
        pages.append(data[at:end])
        at = end
    return pages
