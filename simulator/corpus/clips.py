"""From a call's two channels (16 kHz) to its conversation and the audio a sample is cut into.

- Of two identical segments on the two channels (crosstalk, bleed), the louder channel's is kept
  (``turns.merge_turns``); loudness is the sum of squares over the segment.
- A turn's clip (what is scored, and B's reference) is the turn from its own channel: its first
  ``max_s`` seconds, as a 16-bit file holds them.
- A context is both channels summed, as a listener hears the call, from the context start to the
  end of A's turn; scaled down only where the sum would clip (peak at most 0.99).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.vad import VadConfig, frame_flags
from duplexsim.corpus.turn_scores import as_written
from duplexsim.corpus.turns import Conversation, Turn, TurnConfig, conversation

__all__ = ["PEAK", "RATE", "analyse", "context_mix", "turn_clip"]

RATE = 16000
PEAK = 0.99

FloatArray = NDArray[np.float32]


def analyse(channels: FloatArray, cfg: TurnConfig, vad: VadConfig) -> Conversation:
    """VAD on each channel, then the conversation (``duplexsim.corpus.turns``)."""
    if channels.ndim != 2 or channels.shape[0] != 2:
        raise ValueError(f"expected (2, frames) samples, got {channels.shape}")
    flags = [frame_flags(channels[k], RATE, vad) for k in range(2)]
    return conversation(
        flags, vad.frame_s, cfg, [_frame_energy(channels[k], vad) for k in range(2)]
    )


def _frame_energy(samples: FloatArray, vad: VadConfig) -> NDArray[np.float64]:
    """Sum of squares per VAD frame (from sample 0, a partial last frame dropped)."""
    size = round(vad.frame_s * RATE)
    n = samples.size // size
    frames = samples[: n * size].reshape(n, size)
    return np.asarray(np.sum(np.square(frames, dtype=np.float64), axis=1), dtype=np.float64)


def _index(t: float) -> int:
    return round(t * RATE)


def turn_clip(channels: FloatArray, turn: Turn, max_s: float) -> FloatArray:
    """The turn from its speaker's channel, at most ``max_s`` from its start."""
    end = min(turn.end_s, turn.start_s + max_s)
    return as_written(channels[turn.speaker, _index(turn.start_s) : _index(end)])


def context_mix(channels: FloatArray, start_s: float, end_s: float) -> FloatArray:
    """Both channels summed from ``start_s`` to ``end_s``; scaled to a 0.99 peak if louder."""
    lo, hi = _index(start_s), _index(end_s)
    mixed = channels[0, lo:hi].astype(np.float32) + channels[1, lo:hi]
    peak = float(np.max(np.abs(mixed))) if mixed.size else 0.0
    if peak > PEAK:
        mixed *= np.float32(PEAK / peak)
    return as_written(mixed)
