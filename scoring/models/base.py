"""The emotion-model interface: a batch of 16 kHz mono float32 clips in, named dimensions out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.emotions import EMOTIONS

__all__ = ["MAX_CLIP_S", "SAMPLE_RATE", "EmotionModel", "clip_problem", "emotion_matrix"]

SAMPLE_RATE = 16000
MAX_CLIP_S = 30.0  # what MIRRORING scores: at most 30 s of the reply
MIN_CLIP_S = 0.05


class EmotionModel(ABC):
    """Scores clips on named dimensions; the 12 MIRRORING emotions must be among them, under
    their Empathic-Insight-Voice head names (``duplexsim.core.emotions.HEAD_NAMES``)."""

    name: ClassVar[str]
    comparable_with_mirroring: ClassVar[bool] = False  # True only for the benchmark's own scorer
    # The precisions it can run at (``load_scorer(precision=)``); empty: it has no such option.
    precisions: ClassVar[tuple[str, ...]] = ()
    # The precision its scores are computed at, reported with every score; None: it has none.
    precision: str | None = None
    # The version of the scoring code: bump it whenever the same audio and weights would score
    # differently. None: not declared (its scores then never match a cache).
    version: ClassVar[str | None] = None
    # What was loaded: ``sha256:...`` over the weights, ``NO_WEIGHTS`` for a fixed rule; None:
    # unknown (never matches a cache). Reported with every score, with precision and version.
    weights: str | None = None

    @property
    @abstractmethod
    def dimensions(self) -> tuple[str, ...]: ...

    @classmethod
    def speaker_normalise(
        cls, scores: NDArray[np.float32], dimensions: Sequence[str]
    ) -> NDArray[np.float32]:
        """The scores of clips of one speaker (rows), each judged against that speaker's own
        register; the default leaves them as they are. Applied when a run's metrics are
        computed: a run's replies are one speaker (the model), a benchmark's references another.
        Nothing here may use the clips' reference emotions."""
        return scores

    @abstractmethod
    def score(self, clips: Sequence[NDArray[np.float32]]) -> NDArray[np.float32]:
        """(len(clips), len(dimensions)) raw scores. Clips are 16 kHz mono float32, already
        checked with ``clip_problem``; longer than 30 s is cut to 30 s by the caller."""


def clip_problem(clip: NDArray[np.float32], *, max_s: float = MAX_CLIP_S) -> str | None:
    """Why a clip cannot be scored, or None. Per item, so one bad clip never fails a batch."""
    x = np.asarray(clip)
    if x.ndim != 1:
        return f"expected mono 1-D samples, got shape {x.shape}"
    if x.size < MIN_CLIP_S * SAMPLE_RATE:
        return f"clip too short ({x.size} samples; at least {MIN_CLIP_S} s)"
    if x.size > max_s * SAMPLE_RATE:
        return f"clip too long ({x.size / SAMPLE_RATE:.1f} s; at most {max_s:g} s)"
    if not np.all(np.isfinite(x)):
        return "clip contains NaN or infinite samples"
    return None


def emotion_matrix(scores: NDArray[np.float32], dimensions: Sequence[str]) -> NDArray[np.float64]:
    """The 12 MIRRORING emotions' columns, in ``EMOTIONS`` order."""
    index = {name: i for i, name in enumerate(dimensions)}
    missing = [e.head for e in EMOTIONS if e.head not in index]
    if missing:
        raise ValueError(f"scores lack the emotion dimension(s): {', '.join(missing)}")
    cols = [index[e.head] for e in EMOTIONS]
    return np.asarray(scores, dtype=np.float64)[:, cols]
