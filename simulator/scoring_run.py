"""Scoring a run: cut each reply and reference to what MIRRORING scores, send them to a scorer,
and cache the scores per scorer in the run directory so a second call is instant.

What is scored: the model's reply from its first to its last voiced frame, 16 kHz mono, at most
30 s; and Speaker B's reference reply, 16 kHz mono, at most 30 s.

A cache holds scores of one precision (``fp32``, ``bf16`` ...; null for a scorer without one, and
for caches written before precisions were recorded): asking for another precision rescores the
run, and so does a fresh score that comes back at another precision than the cached ones.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from scoring.models.base import MAX_CLIP_S, SAMPLE_RATE
from simulator.core.audio import read_audio, resample
from simulator.core.bundle import OUTPUT, read_meta
from simulator.core.errors import ConfigError, InputError, StorageError
from simulator.core.files import write_text_atomic
from simulator.store import ResultRow, read_results

__all__ = ["ClipJob", "ScoreCache", "ScoreOutcome", "collect_clips", "score_run"]

CACHE_VERSION = 1
BATCH = 16


class ScoreLike(Protocol):
    dimensions: Sequence[str]
    values: NDArray[np.float32] | None
    error: str | None
    precision: str | None


Scorer = Callable[[list[NDArray[np.float32]]], Awaitable[Sequence[ScoreLike]]]


@dataclass(frozen=True)
class ClipJob:
    key: str  # "reply/<sample-id>" or "reference/<sample-id>"
    samples: NDArray[np.float32]

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.samples.tobytes()).hexdigest()[:24]


@dataclass(frozen=True)
class ScoreOutcome:
    scored: int  # newly scored
    cached: int  # taken from the cache
    errors: dict[str, str]  # key -> why it could not be scored
    precision: str | None = None  # the one precision of the run's cached scores


def cut_reply(
    output: NDArray[np.float32], rate: int, onset_s: float, duration_s: float
) -> NDArray[np.float32]:
    """The reply from its first to its last voiced frame, at 16 kHz, at most 30 s."""
    lo = round(onset_s * rate)
    hi = lo + round(min(duration_s, MAX_CLIP_S) * rate)
    return resample(output[lo:hi], rate, SAMPLE_RATE)[: int(MAX_CLIP_S * SAMPLE_RATE)]


def _reply_job(run_dir: Path, row: ResultRow) -> ClipJob | None:
    if row.status != "ok" or row.onset_s is None or row.reply_duration_s is None or not row.bundle:
        return None
    audio = read_audio(run_dir / row.bundle / OUTPUT, max_duration_s=3600)
    clip = cut_reply(audio.samples, audio.sample_rate, row.onset_s, row.reply_duration_s)
    return ClipJob(f"reply/{row.sample_id}", clip)


def _reference_job(run_dir: Path, row: ResultRow) -> ClipJob | None:
    if not row.bundle:
        raise ConfigError(f"{run_dir}: session {row.sample_id} has no recording bundle")
    sample = read_meta(run_dir / row.bundle).sample
    if sample.kind == "live":
        return None  # a person's turn (``talk``): nothing to mirror, only its reply is scored
    if sample.reference is None:
        return None  # a timing-only sample: nothing to mirror
    audio = read_audio(sample.reference, sample_rate=SAMPLE_RATE)
    return ClipJob(f"reference/{row.sample_id}", audio.samples[: int(MAX_CLIP_S * SAMPLE_RATE)])


def _timing_only(run_dir: Path, row: ResultRow) -> bool:
    """A benchmark sample without emotion and reference: timed, with nothing emotional to score."""
    if not row.bundle:
        return False
    try:
        sample = read_meta(run_dir / row.bundle).sample
    except InputError:
        return False  # the reference job reports the problem
    return sample.kind == "benchmark" and sample.reference is None


def collect_clips(run_dir: Path) -> tuple[list[ClipJob], dict[str, str]]:
    """Every reply and reference of a run, and the problems of those that cannot be cut."""
    _, rows = read_results(run_dir)
    jobs: list[ClipJob] = []
    problems: dict[str, str] = {}
    for row in rows:
        if row.status == "failed" or (not row.emotion and _timing_only(run_dir, row)):
            continue
        for kind, make in (("reply", _reply_job), ("reference", _reference_job)):
            try:
                job = make(run_dir, row)
            except InputError as exc:
                problems[f"{kind}/{row.sample_id}"] = str(exc)
                continue
            if job is not None:
                jobs.append(job)
    return jobs, problems


class ScoreCache:
    """``scores/<scorer>.json`` in a run directory: values per clip key, tied to the clip's digest,
    all computed at one ``precision``. Given a ``precision``, a cache made at another one (or
    recording none) is read as empty; without, the cache is taken at whatever it records."""

    def __init__(self, path: Path, scorer: str, precision: str | None = None) -> None:
        self.path = path
        self.scorer = scorer
        self.precision = precision
        self.dimensions: list[str] = []
        self.items: dict[str, dict[str, Any]] = {}
        if path.exists():
            self._load()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(
                f"{self.path}: unreadable score cache ({exc}); delete it to rescore"
            ) from None
        if data.get("version") != CACHE_VERSION or data.get("scorer") != self.scorer:
            return  # stale format or another scorer: start afresh
        recorded = data.get("precision")  # absent (None) in caches from before it was recorded
        if self.precision is not None and recorded != self.precision:
            return  # made at another precision: start afresh
        self.precision = recorded
        self.dimensions = list(data["dimensions"])
        self.items = dict(data["items"])

    def get(self, job: ClipJob) -> list[float] | None:
        item = self.items.get(job.key)
        if item is None or item.get("digest") != job.digest:
            return None
        values: list[float] = item["values"]
        return values

    def put(
        self,
        job: ClipJob,
        dimensions: Sequence[str],
        values: Sequence[float],
        precision: str | None = None,
    ) -> None:
        if self.dimensions and list(dimensions) != self.dimensions:
            self.items.clear()  # the scorer's dimensions changed: older values do not line up
        if precision != self.precision:
            self.items.clear()  # never mix precisions (score_run rescores what this drops)
        self.precision = precision
        self.dimensions = list(dimensions)
        self.items[job.key] = {"digest": job.digest, "values": [float(v) for v in values]}

    def save(self) -> None:
        """Write the cache; a read-only or full disk is a StorageError naming the file."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(self.path.parent, exc, "create") from None
        data = {
            "version": CACHE_VERSION,
            "scorer": self.scorer,
            "precision": self.precision,
            "dimensions": self.dimensions,
            "items": self.items,
        }
        write_text_atomic(self.path, json.dumps(data))

    def vector(self, key: str) -> list[float] | None:
        item = self.items.get(key)
        return None if item is None else list(item["values"])


def cache_path(run_dir: Path, scorer: str) -> Path:
    return run_dir / "scores" / f"{scorer}.json"


async def score_run(
    run_dir: Path,
    scorer: str,
    score: Scorer,
    *,
    precision: str | None = None,
    batch: int = BATCH,
    samples: Collection[str] | None = None,
) -> ScoreOutcome:
    """Score every clip of a run that the cache lacks; the cache is saved after every batch.

    ``precision`` is the one asked for (None: the scorer's default); a cache at another one is
    rescored. When the first fresh score comes back at another precision than the cached ones,
    those are rescored too; fresh scores at two precisions (workers set up differently) are a
    ConfigError. ``samples`` (None: all) are the sample ids to score.
    """
    jobs, errors = collect_clips(run_dir)
    if samples is not None:  # keys are "reply/<id>" and "reference/<id>"
        jobs = [j for j in jobs if j.key.partition("/")[2] in samples]
        errors = {k: e for k, e in errors.items() if k.partition("/")[2] in samples}
    cache = ScoreCache(cache_path(run_dir, scorer), scorer, precision)
    todo = [job for job in jobs if cache.get(job) is None]
    fresh: set[str | None] = set()
    done = 0
    while done < len(todo):
        chunk = todo[done : done + batch]
        done += len(chunk)
        results = await score([job.samples for job in chunk])
        for job, result in zip(chunk, results, strict=True):
            if result.error is not None or result.values is None:
                errors[job.key] = result.error or "no scores"
                continue
            if not fresh and result.precision != cache.precision:
                todo += [j for j in jobs if cache.get(j) is not None]  # put() drops them
            _check_one_precision(fresh, result.precision, run_dir, scorer)
            cache.put(job, result.dimensions, result.values.tolist(), result.precision)
        cache.save()
    if not todo and not cache.path.exists():
        cache.save()
    return ScoreOutcome(
        scored=len(todo) - sum(1 for j in todo if j.key in errors),
        cached=len(jobs) - len(todo),
        errors=errors,
        precision=cache.precision,
    )


def _check_one_precision(
    seen: set[str | None], precision: str | None, run_dir: Path, scorer: str
) -> None:
    if seen and precision not in seen:
        both = " and ".join(str(p) for p in sorted(seen | {precision}, key=str))
        raise ConfigError(
            f"{run_dir}: {scorer} scores came back at {both}: the scoring workers run at "
            "different precisions; start them with the same --precision"
        )
    seen.add(precision)
