"""Which samples of a run count, one row per benchmark sample and one column per trial.

The metrics (``duplexsim.scoring.metrics``) and the comparisons (``duplexsim.scoring.compare``)
read a run through this one table, so a sample is in N for both or for neither. A sample run
several times (``run --trials K``) has one ``SampleScores`` per trial: ``item`` names the sample
they are trials of, and each trial is judged on its own; the sample is in N when at least one of
its trials is (docs/metrics.md, "Which samples count" and "Repeated trials").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.emotions import EMOTION_NAMES, suggest_emotion

__all__ = [
    "MISSING",
    "NO_REPLY",
    "ItemTable",
    "SampleScores",
    "cosines",
    "tabulate",
    "top_emotions",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]
BoolArray = NDArray[np.bool_]

N_EMOTIONS = len(EMOTION_NAMES)
NO_REPLY = N_EMOTIONS  # the "top" of a sample whose model never replied: equal to no reference
MISSING = -1  # the "top" of a trial that is not in N (or was never run)
_EMOTION_INDEX = {name: i for i, name in enumerate(EMOTION_NAMES)}


@dataclass(frozen=True, eq=False)  # eq=False: ndarray fields have no boolean equality
class SampleScores:
    """One session of one run (one sample, or one trial of a sample), as the metrics see it."""

    sample_id: str  # the session's id: the manifest id, or a trial's own id
    emotion: str  # reference emotion r_i, canonical name
    language: str
    reference: NDArray[np.floating[Any]] | None  # R_i; None: reference unscored -> excluded
    reply: NDArray[np.floating[Any]] | None  # M_i; None: the model never replied
    failed: bool = False  # infrastructure failure after retries -> excluded from N
    # any other reason the sample is out of N (e.g. "timing invalid", "reply too short to
    # score"): counted under it, never silently dropped
    out_reason: str | None = None
    item: str | None = None  # the benchmark sample this session is a trial of (None: sample_id)
    trial: int = 1  # which trial of it, from 1

    @property
    def item_id(self) -> str:
        return self.item if self.item is not None else self.sample_id


@dataclass(frozen=True, eq=False)
class ItemTable:
    """The samples in N, sorted by id, with their trials as columns (K = 1 without trials)."""

    ids: tuple[str, ...]
    refs: IntArray  # r_i as an index into EMOTIONS
    languages: tuple[str, ...]
    reference: FloatArray  # (N, 12)
    reply: FloatArray  # (N, K, 12); zero where the model never replied or the trial is out
    replied: BoolArray  # (N, K)
    counted: BoolArray  # (N, K): the trial is in N
    sessions: tuple[tuple[str | None, ...], ...]  # each trial's session id (None: not counted)
    failed_ids: tuple[str, ...]  # sessions
    excluded_ids: tuple[str, ...]
    out_of_n: dict[str, tuple[str, ...]]

    @property
    def trials(self) -> int:
        return int(self.counted.shape[1])

    def tops(self) -> IntArray:
        """(N, K) top_i per trial: argmax M_i (ties: the first maximum in EMOTIONS order),
        NO_REPLY where silent, MISSING where the trial is out."""
        tops = top_emotions(self.reply.reshape(-1, N_EMOTIONS), self.replied.ravel())
        out: IntArray = np.where(self.counted, tops.reshape(self.counted.shape), MISSING)
        return out

    def cosine(self) -> FloatArray:
        """(N, K) cos(M_i, R_i) per trial (0 for a non-reply), NaN where the trial is out."""
        flat = cosines(
            self.reply.reshape(-1, N_EMOTIONS), np.repeat(self.reference, self.trials, 0)
        )
        out: FloatArray = np.where(self.counted, flat.reshape(self.counted.shape), np.nan)
        return out

    def target(self) -> FloatArray:
        """(N, K) M_i[r_i] per trial (0 for a non-reply), NaN where the trial is out."""
        values = np.take_along_axis(self.reply, self.refs[:, None, None], axis=2)[:, :, 0]
        out: FloatArray = np.where(self.counted, values, np.nan)
        return out


def top_emotions(reply: FloatArray, replied: BoolArray) -> IntArray:
    """top_i = argmax M_i (ties: the first maximum in EMOTIONS order); NO_REPLY where silent."""
    tops: IntArray = np.where(replied, np.argmax(reply, axis=1), NO_REPLY).astype(np.intp)
    return tops


def cosines(a: FloatArray, b: FloatArray) -> FloatArray:
    """Row-wise cosine similarity; 0 where either row has zero norm (so 0 for a non-reply)."""
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dots = np.einsum("ij,ij->i", a, b)
    safe = np.where(norms > 0, norms, 1.0)
    out: FloatArray = np.clip(np.where(norms > 0, dots / safe, 0.0), -1.0, 1.0)
    return out


# ---------------------------------------------------------------- validation


def _check_sample(s: SampleScores) -> int:
    """Validate the scalar fields and vector shapes of one sample; return r_i's index."""
    if not isinstance(s.sample_id, str) or not s.sample_id:
        raise ValueError(f"sample id must be a non-empty string, got {s.sample_id!r}")
    index = _EMOTION_INDEX.get(s.emotion) if isinstance(s.emotion, str) else None
    if index is None:
        hint = suggest_emotion(s.emotion) if isinstance(s.emotion, str) else None
        did_you_mean = f" (did you mean {hint!r}?)" if hint else ""
        raise ValueError(
            f"sample {s.sample_id!r}: emotion {s.emotion!r} is not one of the 12 canonical "
            f"names{did_you_mean}"
        )
    if not isinstance(s.language, str) or not s.language:
        raise ValueError(f"sample {s.sample_id!r}: language must be a non-empty string")
    if isinstance(s.trial, bool) or not isinstance(s.trial, int) or s.trial < 1:
        raise ValueError(f"sample {s.sample_id!r}: trial must be an integer >= 1, got {s.trial!r}")
    for label, vector in (("reference", s.reference), ("reply", s.reply)):
        if vector is not None and np.shape(vector) != (N_EMOTIONS,):
            raise ValueError(
                f"sample {s.sample_id!r}: {label} vector must have shape ({N_EMOTIONS},), "
                f"got {np.shape(vector)}"
            )
    return index


def _stack(vectors: Sequence[NDArray[np.floating[Any]] | None], n: int) -> FloatArray:
    out = np.zeros((n, N_EMOTIONS), dtype=np.float64)
    for i, v in enumerate(vectors):
        if v is not None:
            out[i] = v
    return out


def _check_finite(ids: Sequence[str], label: str, matrix: FloatArray) -> None:
    bad = np.flatnonzero(~np.isfinite(matrix).all(axis=1))
    if bad.size:
        raise ValueError(f"sample {ids[bad[0]]!r}: {label} vector has NaN or infinite values")


def _check_unique(samples: Sequence[SampleScores]) -> None:
    seen: set[str] = set()
    trials: set[tuple[str, int]] = set()
    for s in samples:
        if s.sample_id in seen:
            raise ValueError(f"sample {s.sample_id!r} appears more than once")
        if (s.item_id, s.trial) in trials:
            raise ValueError(f"sample {s.item_id!r}: trial {s.trial} appears more than once")
        seen.add(s.sample_id)
        trials.add((s.item_id, s.trial))


# ---------------------------------------------------------------- the table


def tabulate(samples: Sequence[SampleScores]) -> ItemTable:
    """The run's samples in N as one table; ValueError, naming the sample, for a non-canonical
    emotion, a vector that is not 12 finite numbers, or a repeated sample id or trial. Every
    session is judged on its own (failure wins, then the caller's reason, then an unscored
    reference); a sample is in N when one of its trials is."""
    _check_unique(samples)
    kept: list[tuple[SampleScores, int]] = []
    out: dict[str, list[str]] = {"failed": [], "unscored": []}
    for s in samples:
        index = _check_sample(s)
        if s.failed:
            out["failed"].append(s.sample_id)
        elif s.out_reason is not None:
            out.setdefault(s.out_reason, []).append(s.sample_id)
        elif s.reference is None:
            out["unscored"].append(s.sample_id)
        else:
            kept.append((s, index))
    # Every sample's vectors are checked, even those that are excluded: a NaN is a bug anywhere.
    all_ids = [s.sample_id for s in samples]
    _check_finite(all_ids, "reference", _stack([s.reference for s in samples], len(samples)))
    _check_finite(all_ids, "reply", _stack([s.reply for s in samples], len(samples)))
    return _table(kept, {reason: tuple(sorted(ids)) for reason, ids in out.items() if ids})


def _table(kept: list[tuple[SampleScores, int]], out_of_n: dict[str, tuple[str, ...]]) -> ItemTable:
    kept.sort(key=lambda pair: (pair[0].item_id, pair[0].trial))  # never the input's order
    ids = sorted({s.item_id for s, _ in kept})
    row = {sid: i for i, sid in enumerate(ids)}
    first: dict[
        str, tuple[SampleScores, int]
    ] = {}  # each sample's first counted trial gives its reference, emotion and language
    for s, index in kept:
        first.setdefault(s.item_id, (s, index))
    n, k = len(ids), max((s.trial for s, _ in kept), default=1)
    reply = np.zeros((n, k, N_EMOTIONS))
    replied = np.zeros((n, k), dtype=np.bool_)
    counted = np.zeros((n, k), dtype=np.bool_)
    sessions: list[list[str | None]] = [[None] * k for _ in range(n)]
    for s, _ in kept:
        i, t = row[s.item_id], s.trial - 1
        counted[i, t] = True
        sessions[i][t] = s.sample_id
        if s.reply is not None:
            reply[i, t], replied[i, t] = s.reply, True
    return ItemTable(
        ids=tuple(ids),
        refs=np.array([first[sid][1] for sid in ids], dtype=np.intp),
        languages=tuple(first[sid][0].language for sid in ids),
        reference=_stack([first[sid][0].reference for sid in ids], n),
        reply=reply,
        replied=replied,
        counted=counted,
        sessions=tuple(tuple(s) for s in sessions),
        failed_ids=out_of_n.get("failed", ()),
        excluded_ids=out_of_n.get("unscored", ()),
        out_of_n=out_of_n,
    )
