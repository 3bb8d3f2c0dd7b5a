"""The mirroring validation: do adjacent turns share their dominant emotion more often than chance?

Over all adjacent turn pairs of the calls (consecutive turns of the two speakers, overlaps
included; ``max_gap_s`` optionally keeps only replies that start 0 to max_gap_s after the
turn), each turn is scored and its dominant emotion taken. The observed share is the share of
pairs whose two turns share it. The permutation baseline re-pairs the second turns' emotions with
the first turns' at random (K seeded shuffles over all pairs of all calls) and takes the mean
share; the p-value is (1 + #{shuffles with a share >= the observed}) / (1 + K). The exact
expectation of the baseline, sum_e n_first(e) n_second(e) / N^2, is reported beside it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from duplexsim.core.emotions import EMOTION_NAMES, emotion_index
from duplexsim.core.vad import VadConfig
from duplexsim.corpus.calls import load_call, read_listings
from duplexsim.corpus.clips import analyse, turn_clip
from duplexsim.corpus.turn_scores import score_clips
from duplexsim.corpus.turns import Pair, TurnConfig, adjacent_pairs
from duplexsim.scoring.metrics import expected_match_rate, shuffled_match_counts
from duplexsim.scoring.service.api import Scoring

__all__ = ["Mirroring", "ValidateOptions", "mirroring_statistics", "validate_calls"]

_BLOCK_CELLS = 1 << 22  # permutations are drawn in blocks of about this many cells


@dataclass(frozen=True)
class ValidateOptions:
    turns: TurnConfig = field(default_factory=TurnConfig)
    vad: VadConfig = field(default_factory=VadConfig)
    max_gap_s: float | None = None  # None: every adjacent pair, overlaps included
    permutations: int = 1000
    seed: int = 0
    length_tolerance_s: float = 0.05

    def __post_init__(self) -> None:
        if self.permutations < 1:
            raise ValueError(f"permutations must be >= 1, got {self.permutations}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if self.max_gap_s is not None and self.max_gap_s < 0:
            raise ValueError(f"max_gap_s must be >= 0, got {self.max_gap_s}")


@dataclass(frozen=True)
class Mirroring:
    n: int  # pairs with both turns scored
    same: int  # of those, pairs sharing the dominant emotion
    observed: float  # same / n
    baseline: float  # mean share over the permutations
    expected: float  # the baseline's exact expectation
    p_value: float  # (1 + #{perm >= observed}) / (1 + K)
    permutations: int
    seed: int
    per_language: dict[str, dict[str, float | int]]  # n, same, observed, expected
    calls: int = 0
    pairs: int = 0  # adjacent pairs considered (before scoring)
    excluded: int = 0  # pairs left out because a turn could not be scored

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "pairs": self.pairs,
            "excluded_unscored": self.excluded,
            "n": self.n,
            "same": self.same,
            "observed": _num(self.observed),
            "baseline": _num(self.baseline),
            "expected": _num(self.expected),
            "lift_pp": _num(100.0 * (self.observed - self.baseline)),
            "p_value": _num(self.p_value),
            "permutations": self.permutations,
            "seed": self.seed,
            "per_language": self.per_language,
        }


def _num(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def mirroring_statistics(
    first: Sequence[str],
    second: Sequence[str],
    languages: Sequence[str],
    *,
    permutations: int = 1000,
    seed: int = 0,
) -> Mirroring:
    """The statistics of pairs given each turn's dominant emotion (canonical names). Pure."""
    if not len(first) == len(second) == len(languages):
        raise ValueError("first, second and languages must have one entry per pair")
    n = len(first)
    a = np.array([emotion_index(e) for e in first], dtype=np.intp)
    b = np.array([emotion_index(e) for e in second], dtype=np.intp)
    same = int(np.count_nonzero(a == b))
    if n == 0:
        nan = math.nan
        return Mirroring(0, 0, nan, nan, nan, nan, permutations, seed, {})
    rng = np.random.default_rng(seed)
    block = max(1, min(permutations, _BLOCK_CELLS // n))
    counts = np.concatenate(
        [
            shuffled_match_counts(b, a, min(block, permutations - done), rng)
            for done in range(0, permutations, block)
        ]
    )
    per_language: dict[str, dict[str, float | int]] = {}
    langs = np.asarray(languages)
    for lang in sorted(set(languages)):
        mask = langs == lang
        k = int(np.count_nonzero(mask))
        hits = int(np.count_nonzero(a[mask] == b[mask]))
        per_language[lang] = {
            "n": k,
            "same": hits,
            "observed": hits / k,
            "expected": _expected(a[mask], b[mask]),
        }
    return Mirroring(
        n=n,
        same=same,
        observed=same / n,
        baseline=float(counts.mean()) / n,
        expected=_expected(a, b),
        p_value=(1 + int(np.count_nonzero(counts >= same))) / (1 + permutations),
        permutations=permutations,
        seed=seed,
        per_language=per_language,
    )


def _expected(a: np.ndarray, b: np.ndarray) -> float:
    size = len(EMOTION_NAMES)
    na = np.bincount(a, minlength=size).astype(np.float64)
    nb = np.bincount(b, minlength=size).astype(np.float64)
    return float(expected_match_rate(na, nb, len(a)))


async def validate_calls(
    listings: Sequence[str | Path],
    scoring: Scoring,
    scorer: str,
    options: ValidateOptions | None = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> Mirroring:
    """Score every turn of every adjacent pair of the calls and compute ``Mirroring``."""
    opts = options or ValidateOptions()
    say = progress or (lambda _: None)
    calls = read_listings(listings, length_tolerance_s=opts.length_tolerance_s)
    first: list[str] = []
    second: list[str] = []
    languages: list[str] = []
    considered = excluded = 0
    for k, call in enumerate(calls):
        say(f"[{k + 1}/{len(calls)}] {call.id}")
        channels = load_call(call)
        conv = analyse(channels, opts.turns, opts.vad)
        pairs = [p for p in adjacent_pairs(conv.turns) if _within(p, opts.max_gap_s)]
        need = sorted({t.index for p in pairs for t in (p.a, p.b)})
        clips = [turn_clip(channels, conv.turns[i], opts.turns.max_reference_s) for i in need]
        del channels
        scores = dict(zip(need, await score_clips(scoring, scorer, clips), strict=True))
        considered += len(pairs)
        for p in pairs:
            ea, eb = scores[p.a.index].emotion, scores[p.b.index].emotion
            if ea is None or eb is None:
                excluded += 1
                continue
            first.append(ea)
            second.append(eb)
            languages.append(call.language)
    stats = mirroring_statistics(
        first, second, languages, permutations=opts.permutations, seed=opts.seed
    )
    return dataclasses.replace(stats, calls=len(calls), pairs=considered, excluded=excluded)


def _within(pair: Pair, max_gap_s: float | None) -> bool:
    if max_gap_s is None:
        return True
    return -1e-9 <= pair.gap_s <= max_gap_s + 1e-9
