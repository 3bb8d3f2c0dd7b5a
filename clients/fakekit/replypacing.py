"""How the EVI and Nova Sonic fakes pace a reply's audio, as both services do: ``BURST_S`` of it
the moment the reply starts, the rest generated ``SPEEDUP`` times faster than real time, in
chunks of ``CHUNK_S``. Pure arithmetic on media time (input samples), shared so that the two
fakes cannot drift apart.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.audio import float_to_pcm16

__all__ = ["BURST_S", "CHUNK_S", "SPEEDUP", "chunk_reply", "chunks_due", "next_chunk_at"]

CHUNK_S = 0.1  # audio per output message
BURST_S = 1.0  # reply audio sent the moment a reply starts ...
SPEEDUP = 4.0  # ... then generated this many times faster than real time


def chunk_reply(
    audio: NDArray[np.float32], at: int, c0: int, rate: int, out_rate: int
) -> list[bytes]:
    """A reply due at input sample ``at`` as PCM16 chunks at ``out_rate``, sent when the input
    chunk starting at ``c0`` arrived: led by at - c0 of silence, so its first sample lands at
    exactly ``at`` on the client's timeline."""
    lead = bytes(2 * round(max(at - c0, 0) * out_rate / rate))
    pcm = lead + float_to_pcm16(audio)
    step = 2 * round(CHUNK_S * out_rate)
    return [pcm[i : i + step] for i in range(0, len(pcm), step)]


def chunks_due(start: int, position: int, rate: int, total: int) -> int:
    """How many of a reply's ``total`` chunks are out once input reaches ``position``."""
    elapsed_s = max(0, position - start) / rate
    return min(total, math.ceil((BURST_S + SPEEDUP * elapsed_s) / CHUNK_S))


def next_chunk_at(start: int, sent: int, rate: int) -> int:
    """The input sample at which chunk ``sent`` (counted from 0) falls due."""
    step_s = max(0.0, CHUNK_S * (sent + 1) - BURST_S) / SPEEDUP
    return start + math.ceil(step_s * rate)
