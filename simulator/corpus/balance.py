"""Balancing: cap the most over-represented emotions, as MIRRORING did (the top 4 at 150 each).

Pure and seeded. Emotions are ranked by their number of pairs, most first; ties go to the
emotion that comes first in the canonical order (``duplexsim.core.emotions.EMOTIONS``). Each of
the ``top`` first-ranked emotions with more than ``cap`` pairs keeps ``cap`` of them, drawn
without replacement by a generator seeded with ``(seed, emotion index)``: an emotion's draw
depends only on the seed and its own pairs. Kept indices come back in their input order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from duplexsim.core.emotions import EMOTION_NAMES, emotion_index

__all__ = ["Balance", "BalanceConfig", "balance", "rank_emotions"]


@dataclass(frozen=True)
class BalanceConfig:
    top: int = 4  # how many of the most frequent emotions are capped
    cap: int = 150  # at most this many pairs each
    seed: int = 0

    def __post_init__(self) -> None:
        if self.top < 0:
            raise ValueError(f"top must be >= 0, got {self.top}")
        if self.cap < 1:
            raise ValueError(f"cap must be >= 1, got {self.cap}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")


@dataclass(frozen=True)
class Balance:
    kept: tuple[int, ...]  # indices into the input, ascending
    capped: dict[str, tuple[int, int]]  # emotion -> (pairs before, kept), capped ones only

    @property
    def dropped(self) -> int:
        return sum(before - after for before, after in self.capped.values())


def rank_emotions(emotions: Sequence[str]) -> list[tuple[str, int]]:
    """(emotion, count) for the emotions present, most frequent first, ties in canonical order."""
    counts = Counter(emotions)
    unknown = sorted(set(counts) - set(EMOTION_NAMES))
    if unknown:
        raise ValueError(f"not canonical emotion names: {', '.join(map(repr, unknown))}")
    return sorted(counts.items(), key=lambda item: (-item[1], emotion_index(item[0])))


def balance(emotions: Sequence[str], cfg: BalanceConfig) -> Balance:
    """Which pairs (by index, one emotion each) survive capping."""
    ranked = rank_emotions(emotions)
    keep = np.ones(len(emotions), dtype=bool)
    capped: dict[str, tuple[int, int]] = {}
    for emotion, count in ranked[: cfg.top]:
        if count <= cfg.cap:
            continue
        members = np.array([i for i, e in enumerate(emotions) if e == emotion], dtype=np.intp)
        rng = np.random.default_rng([cfg.seed, emotion_index(emotion)])
        chosen = rng.choice(members, size=cfg.cap, replace=False)
        keep[members] = False
        keep[chosen] = True
        capped[emotion] = (count, cfg.cap)
    ordered = {e: capped[e] for e in EMOTION_NAMES if e in capped}
    return Balance(tuple(int(i) for i in np.flatnonzero(keep)), ordered)
