"""Scoring a run: cut each reply and reference to what MIRRORING scores, send them to a scorer,
and cache the scores in the run directory so a second call is instant.

What is scored: the model's reply from its first to its last voiced frame, 16 kHz mono, at most
30 s; and Speaker B's reference reply, 16 kHz mono, at most 30 s.

Scores are kept per scorer identity (name, weights digest, precision, code version;
``duplexsim.core.provenance``): a probe clip scored first says which identity answers, and a cache
made by another one is scored anew. References are scored once per benchmark and identity: from
the manifest's ``reference_scores`` when they carry this identity, else from the benchmark's
reference cache (``duplexsim.runscores.cache``), which the first run on a benchmark fills.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.audio import read_audio, resample
from duplexsim.core.bundle import OUTPUT, read_meta
from duplexsim.core.errors import ConfigError, InputError
from duplexsim.core.partnermetrics import PartnerRecord
from duplexsim.core.provenance import ScorerIdentity
from duplexsim.run.store import ResultRow, read_results, session_key
from duplexsim.runscores.cache import ScoreCache, cache_path
from duplexsim.runscores.references import References
from duplexsim.scoring.models.base import MAX_CLIP_S, SAMPLE_RATE

__all__ = ["ClipJob", "ScoreOutcome", "collect_clips", "identify", "probe_clip", "score_run"]

BATCH = 16


class ScoreLike(Protocol):
    dimensions: Sequence[str]
    values: NDArray[np.float32] | None
    error: str | None
    precision: str | None  # and, where the scorer reports them, ``weights`` and ``version``


Scorer = Callable[[list[NDArray[np.float32]]], Awaitable[Sequence[ScoreLike]]]


@dataclass(frozen=True)
class ClipJob:
    key: str  # "reply/<session key>" or "reference/<sample-id>" (one for all its trials)
    samples: NDArray[np.float32]

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.samples.tobytes()).hexdigest()[:24]


@dataclass(frozen=True)
class ScoreOutcome:
    scored: int  # newly scored
    cached: int  # taken from the run's cache
    errors: dict[str, str]  # key -> why it could not be scored
    identity: ScorerIdentity
    shared: int = 0  # references taken from the benchmark's (manifest or reference cache)
    references_scored: int = 0  # of ``scored``

    @property
    def precision(self) -> str | None:
        return self.identity.precision


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
    clip = audio.samples[: int(MAX_CLIP_S * SAMPLE_RATE)]
    return ClipJob(f"reference/{row.sample}", clip)


def _timing_only(run_dir: Path, row: ResultRow) -> bool:
    """A benchmark sample without emotion and reference: timed, with nothing emotional to score."""
    if not row.bundle:
        return False
    try:
        sample = read_meta(run_dir / row.bundle).sample
    except InputError:
        return False  # the reference job reports the problem
    return sample.kind == "benchmark" and sample.reference is None


def _turn_jobs(run_dir: Path, row: ResultRow, references: set[str]) -> list[ClipJob]:
    """A partner's next turns that name an emotion: each reply, and the reference its step
    names (``<sample id>.turn<k>``: scored like a sample of its own; a trial's turn replies are
    ``<sample id>.turn<k>.trial<t>``, and its trials share the turn's reference)."""
    if row.partner is None or row.status == "failed" or not row.bundle:
        return []
    turns = [t for t in PartnerRecord.from_json(row.partner).turns if t.emotion]
    if not turns:
        return []
    script = read_meta(run_dir / row.bundle).extra.get("partner") or []
    audio = read_audio(run_dir / row.bundle / OUTPUT, max_duration_s=3600)
    jobs = []
    for t in turns:
        key = t.key(row.sample)
        if t.onset_s is not None and t.duration_s is not None:
            clip = cut_reply(audio.samples, audio.sample_rate, t.onset_s, t.duration_s)
            jobs.append(ClipJob(f"reply/{session_key(key, row.trial or 1)}", clip))
        if key in references:
            continue
        references.add(key)
        reference = script[t.step].get("reference") if t.step < len(script) else None
        if reference is None:
            raise ConfigError(f"{run_dir / row.bundle}: turn {t.turn} names no reference")
        ref = read_audio(reference, sample_rate=SAMPLE_RATE).samples
        jobs.append(ClipJob(f"reference/{key}", ref[: int(MAX_CLIP_S * SAMPLE_RATE)]))
    return jobs


def collect_clips(run_dir: Path) -> tuple[list[ClipJob], dict[str, str]]:
    """Every reply and reference of a run (a partner's next turns too), and the problems of
    those that cannot be cut."""
    _, rows = read_results(run_dir)
    jobs: list[ClipJob] = []
    problems: dict[str, str] = {}
    references: set[str] = set()  # a sample's trials share its reference: cut it once
    for row in rows:
        try:
            jobs += _turn_jobs(run_dir, row, references)
        except InputError as exc:
            problems[f"turns/{row.sample_id}"] = str(exc)
        if row.status == "failed" or (not row.emotion and _timing_only(run_dir, row)):
            continue
        for kind, make in (("reply", _reply_job), ("reference", _reference_job)):
            if kind == "reference" and row.sample in references:
                continue
            try:
                job = make(run_dir, row)
            except InputError as exc:
                problems[f"{kind}/{row.sample_id if kind == 'reply' else row.sample}"] = str(exc)
                continue
            if kind == "reference":
                references.add(row.sample)
            if job is not None:
                jobs.append(job)
    return jobs, problems


PROBE_S = 1.0


def probe_clip() -> NDArray[np.float32]:
    """One second of a voiced, gliding harmonic sound: any scorer can score it, the same always."""
    t = np.arange(int(PROBE_S * SAMPLE_RATE)) / SAMPLE_RATE
    phase = 2 * np.pi * (140.0 * t + 15.0 * t**2)
    wave = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = np.minimum(1.0, np.minimum(t, PROBE_S - t) / 0.05)
    return (0.2 * envelope * wave).astype(np.float32)


async def identify(scorer: str, score: Scorer) -> ScorerIdentity:
    """The identity of whatever answers for ``scorer`` now (its weights, precision, version)."""
    (result,) = await score([probe_clip()])
    if result.error is not None or result.values is None:
        raise ConfigError(f"scorer '{scorer}' cannot score a probe clip: {result.error}")
    return _identity(scorer, result)


def _identity(scorer: str, result: ScoreLike) -> ScorerIdentity:
    return ScorerIdentity(
        scorer,
        getattr(result, "weights", None),
        result.precision,
        getattr(result, "version", None),
    )


async def score_run(
    run_dir: Path,
    scorer: str,
    score: Scorer,
    *,
    rescore: bool = False,
    batch: int = BATCH,
    samples: Collection[str] | None = None,
) -> ScoreOutcome:
    """Score every clip of a run that the caches lack; the run's cache is saved after every batch.

    ``rescore``: score every clip anew, references included. Fresh scores from another identity
    than the probe's (workers set up differently) are a ConfigError: never mixed in a cache.
    ``samples`` (None: all) are the sample ids to score.
    """
    jobs, errors = collect_clips(run_dir)
    if samples is not None:  # keys are "reply/<id>" and "reference/<id>"
        jobs = [j for j in jobs if j.key.partition("/")[2] in samples]
        errors = {k: e for k, e in errors.items() if k.partition("/")[2] in samples}
    identity = await identify(scorer, score)
    cache = ScoreCache(cache_path(run_dir, scorer), identity, fresh=rescore)
    cached = sum(1 for job in jobs if cache.get(job.key, job.digest) is not None)
    refs = References.for_run(run_dir, identity, fresh=rescore)
    shared = refs.fill(cache, [j for j in jobs if cache.get(j.key, j.digest) is None])
    todo = [job for job in jobs if cache.get(job.key, job.digest) is None]
    done = 0
    while done < len(todo):
        chunk = todo[done : done + batch]
        done += len(chunk)
        results = await score([job.samples for job in chunk])
        for job, result in zip(chunk, results, strict=True):
            if result.error is not None or result.values is None:
                errors[job.key] = result.error or "no scores"
                continue
            _check_identity(identity, _identity(scorer, result), run_dir)
            cache.put(job.key, job.digest, result.dimensions, result.values.tolist())
            refs.put(job, result.dimensions, result.values.tolist())
        cache.save()
    if not todo:
        cache.save()  # the identity and shared references are recorded even with nothing new
    refs.save()
    return ScoreOutcome(
        scored=len(todo) - sum(1 for j in todo if j.key in errors),
        cached=cached,
        errors=errors,
        identity=identity,
        shared=shared,
        references_scored=sum(
            1 for j in todo if j.key.startswith("reference/") and j.key not in errors
        ),
    )


def _check_identity(probed: ScorerIdentity, fresh: ScorerIdentity, run_dir: Path) -> None:
    if fresh != probed:
        raise ConfigError(
            f"{run_dir}: {probed.name} scores came back from {probed.label()} and from "
            f"{fresh.label()}: the scoring workers differ (weights, precision or version); "
            "start them alike"
        )
