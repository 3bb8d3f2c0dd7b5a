"""Limits an audio file's header must keep before anything is allocated for its samples (pure).

A header is written by whoever made the file: a crafted one can say 1e9 Hz or 1024 channels, and
a reader that trusts it allocates gigabytes for a file of a few bytes on disk (a sparse one). So
the header is checked first, against limits no real recording meets and against the file's real
size: uncompressed samples cannot be more than the bytes that hold them. Decoding then needs at
most the caller's length limit times the rate (one float32 per frame: channels are mixed down
block by block).
"""

from __future__ import annotations

__all__ = ["MAX_CHANNELS", "MAX_RATE", "MIN_RATE", "header_problem"]

# speech corpora use 8-48 kHz; 192 kHz is the most recording hardware offers
MIN_RATE = 1_000
MAX_RATE = 192_000
MAX_CHANNELS = 32  # mono or stereo in every benchmark; surround and arrays stay far below


def header_problem(
    *, rate: int, channels: int, frames: int, sample_bytes: int | None, file_size: int
) -> str | None:
    """What is wrong with a header that says ``rate``, ``channels`` and ``frames`` for a file of
    ``file_size`` bytes (``sample_bytes``: bytes per sample of an uncompressed encoding, None
    for a compressed one); None when nothing is."""
    if not MIN_RATE <= rate <= MAX_RATE:
        return f"sample rate {rate} Hz in header: outside {MIN_RATE}-{MAX_RATE} Hz"
    if not 1 <= channels <= MAX_CHANNELS:
        return f"{channels} channels in header: outside 1-{MAX_CHANNELS}"
    if sample_bytes is not None and frames * channels * sample_bytes > file_size:
        return (
            f"header says {frames} frames of {channels} x {sample_bytes} bytes, "
            f"more than the file's {file_size} bytes"
        )
    return None
