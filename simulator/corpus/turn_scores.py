"""Scoring turns: clips to any scorer through the scoring API, 12-vectors back, and the dominant
emotion (the arg-max among the 12; ties go to the first in the canonical order)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.audio import float_to_pcm16, pcm16_to_float
from duplexsim.core.emotions import EMOTION_NAMES
from duplexsim.core.errors import ConfigError
from duplexsim.core.provenance import ScorerIdentity
from duplexsim.runscores.score import BATCH
from duplexsim.scoring.models.base import emotion_matrix
from duplexsim.scoring.service.api import Scoring

__all__ = ["DEADLINE_S", "TurnScore", "as_written", "dominant", "score_clips"]

DEADLINE_S = 600.0  # per batch; a CPU scorer may take a while
IN_FLIGHT = 4  # batches sent at once (a service may have several workers)

Vector = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class TurnScore:
    vector: Vector | None  # the 12 emotions in EMOTIONS order; None when unscored
    error: str | None = None
    identity: ScorerIdentity | None = None  # of the scorer that answered (None: unreported)

    @property
    def emotion(self) -> str | None:
        return None if self.vector is None else dominant(self.vector)


def dominant(vector: Vector) -> str:
    """The canonical name of the highest of the 12 scores (ties: the first in EMOTIONS order)."""
    return EMOTION_NAMES[int(np.argmax(vector))]


def as_written(samples: NDArray[np.float32]) -> NDArray[np.float32]:
    """The samples exactly as a 16-bit file holds them, so a cached score is the score of the
    written file."""
    return pcm16_to_float(float_to_pcm16(samples))


async def score_clips(
    scoring: Scoring,
    scorer: str,
    clips: Sequence[NDArray[np.float32]],
    *,
    batch: int = BATCH,
    deadline_s: float = DEADLINE_S,
) -> list[TurnScore]:
    """One ``TurnScore`` per clip (16 kHz mono float32, at most 30 s), in order."""
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(chunk: Sequence[NDArray[np.float32]]) -> list[TurnScore]:
        async with gate:
            results = await scoring.score(list(chunk), scorer, deadline_s)
        out = []
        for result in results:
            if result.error is not None or result.values is None:
                out.append(TurnScore(None, result.error or "no scores"))
                continue
            try:
                row = emotion_matrix(result.values[None, :], result.dimensions)[0]
            except ValueError as exc:
                raise ConfigError(
                    f"scorer '{scorer}' cannot be used to build a benchmark: {exc}"
                ) from None
            if not np.isfinite(row).all():
                out.append(TurnScore(None, "the scorer returned non-finite scores"))
                continue
            who = getattr(result, "identity", None)
            out.append(TurnScore(np.asarray(row, dtype=np.float64), None, who))
        return out

    chunks = [clips[i : i + batch] for i in range(0, len(clips), batch)]
    parts = await asyncio.gather(*(one(c) for c in chunks))
    return [score for part in parts for score in part]
