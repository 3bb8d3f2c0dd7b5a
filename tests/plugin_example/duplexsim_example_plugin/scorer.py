"""The ``example-loudness`` scorer: the shape of a scorer, with loudness standing in for a model.

A scorer takes 16 kHz mono float32 clips and returns one row of scores per clip over its
``dimensions``, which must include the 12 MIRRORING emotions under their head names. Here loud
clips lean to the high-arousal emotions and quiet ones to the low-arousal ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.emotions import HEAD_NAMES
from duplexsim.scoring.models.base import EmotionModel

__all__ = ["LoudnessScorer"]

HIGH_AROUSAL = {"Anger", "Elation", "Amusement", "Astonishment_Surprise", "Pride"}


class LoudnessScorer(EmotionModel):
    name: ClassVar[str] = "example-loudness"

    def __init__(self, model_path: Path | None = None, device: str = "cpu", **_: Any) -> None:
        self._sign = np.array([1.0 if h in HIGH_AROUSAL else -1.0 for h in HEAD_NAMES])

    @property
    def dimensions(self) -> tuple[str, ...]:
        return HEAD_NAMES

    def score(self, clips: Sequence[NDArray[np.float32]]) -> NDArray[np.float32]:
        rms_db = np.array([10 * np.log10(np.mean(np.square(c)) + 1e-10) for c in clips])
        arousal = (rms_db + 30.0) / 10.0  # about 0 at -30 dBFS
        return (arousal[:, None] * self._sign[None, :]).astype(np.float32)
