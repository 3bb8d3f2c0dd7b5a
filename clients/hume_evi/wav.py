"""The WAV files EVI sends its audio in, one whole file per ``audio_output`` (pure).

Only 16-bit PCM is taken (what EVI sends); a header that says otherwise, or bytes that are not a
RIFF/WAVE file, are a ProtocolError. A ``data`` size of 0 or past the end (a streaming writer's
placeholder) means "to the end of the file".
"""

from __future__ import annotations

import struct

from duplexsim.core.errors import ProtocolError

__all__ = ["encode_wav", "parse_wav"]

_PCM, _EXTENSIBLE = 1, 0xFFFE


def parse_wav(data: bytes) -> tuple[bytes, int, int]:
    """(PCM16 LE bytes, sample rate, channels) of one WAV file."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ProtocolError("audio_output data is not a RIFF/WAVE file")
    pos, fmt = 12, None
    while pos + 8 <= len(data):
        chunk, size = data[pos : pos + 4], int.from_bytes(data[pos + 4 : pos + 8], "little")
        body = pos + 8
        if chunk == b"fmt ":
            if size < 16 or body + 16 > len(data):
                raise ProtocolError("WAV 'fmt ' chunk is too short")
            fmt = struct.unpack_from("<HHIIHH", data, body)
        elif chunk == b"data":
            if fmt is None:
                raise ProtocolError("WAV 'data' chunk before its 'fmt ' chunk")
            end = len(data) if size == 0 or body + size > len(data) else body + size
            return _checked(data[body:end], fmt)
        pos = body + size + (size & 1)
    raise ProtocolError("WAV file without a 'data' chunk")


def _checked(pcm: bytes, fmt: tuple[int, ...]) -> tuple[bytes, int, int]:
    kind, channels, rate, _, _, bits = fmt
    if kind not in (_PCM, _EXTENSIBLE) or bits != 16:
        raise ProtocolError(f"WAV audio is format {kind}, {bits}-bit; expected 16-bit PCM")
    if not 1 <= channels <= 2 or not 8000 <= rate <= 192000:
        raise ProtocolError(f"WAV audio has {channels} channels at {rate} Hz")
    if len(pcm) % (2 * channels):
        raise ProtocolError(f"WAV data of {len(pcm)} bytes is not whole {channels}-channel frames")
    return pcm, rate, channels


def encode_wav(pcm: bytes, rate: int, channels: int = 1) -> bytes:
    """A 44-byte-header WAV file of PCM16 LE ``pcm``."""
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        36 + len(pcm),
        b"WAVE",
        b"fmt ",
        16,
        _PCM,
        channels,
        rate,
        rate * channels * 2,
        channels * 2,
        16,
        b"data",
        len(pcm),
    )
    return header + pcm
