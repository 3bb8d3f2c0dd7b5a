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
from functools import partial
from pathlib import Path
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.audio import read_audio, resample
from duplexsim.core.bundle import MAX_SESSION_S, META, OUTPUT
from duplexsim.core.errors import ConfigError, InputError, RunFolderError
from duplexsim.core.partnermetrics import PartnerRecord
from duplexsim.core.provenance import ScorerIdentity
from duplexsim.core.runbench import RunBenchmark
from duplexsim.core.runfolder import RunFolder
from duplexsim.run.store import ResultRow, load_results, session_key
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
    path: Path | None = None  # the file it was cut from

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
    """The reply from its onset to the end of its sound, at 16 kHz, at most 30 s."""
    lo = round(onset_s * rate)
    hi = sound_end(output, rate, lo, lo + round(min(duration_s, MAX_CLIP_S) * rate))
    return resample(output[lo:hi], rate, SAMPLE_RATE)[: int(MAX_CLIP_S * SAMPLE_RATE)]


# the end of a reply's sound: its last sample at the edge level before this much below it.
# The VAD's last voiced frame moves with the reply's phase on its grid by up to ~115 ms on the
# demo's replies (a short burst after a pause is in or out): the search bridges such pauses.
SOUND_GAP_S = 0.1
SOUND_EDGE_DBFS = -40.0  # VadConfig's edge_dbfs
SOUND_FLOOR_S = 0.5  # the noise floor is the loudest sample this long before the onset
SOUND_REACH_S = 0.3  # how far past the measured offset the sound may go on


def sound_end(output: NDArray[np.float32], rate: int, lo: int, hi: int) -> int:
    """One past the reply's last sample at the edge level, searched on from a frame before its
    measured end ``hi`` up to the first 100 ms below that level: a rule on samples, so a reply
    placed a few samples later on the timeline (arrival jitter against the VAD's 10 ms grid,
    which decides the measured end) is cut to the same clip. Never before ``hi``."""
    before = output[max(0, lo - round(SOUND_FLOOR_S * rate)) : lo]
    floor = float(np.abs(before).max()) if before.size else 0.0
    edge = max(10.0 ** (SOUND_EDGE_DBFS / 20.0), floor)
    start = max(lo, hi - round(0.02 * rate))
    stop = min(output.size, hi + round(SOUND_REACH_S * rate))
    loud = np.flatnonzero(np.abs(output[start:stop]) >= edge) + start
    if loud.size == 0:
        return hi
    gaps = np.flatnonzero(np.diff(loud) > round(SOUND_GAP_S * rate))
    last = int(loud[gaps[0]] if gaps.size else loud[-1])
    return max(hi, last + 1)


def _reply_job(run: RunFolder, row: ResultRow) -> ClipJob | None:
    if row.status != "ok" or row.onset_s is None or row.reply_duration_s is None:
        return None
    folder = run.bundle(row.bundle, f"results: session {row.sample_id}")
    path = None if folder is None else run.file(folder, OUTPUT)
    if path is None:
        raise ConfigError(f"{run}: session {row.sample_id} has no recorded {OUTPUT}")
    audio = read_audio(path, max_duration_s=MAX_SESSION_S)
    clip = cut_reply(audio.samples, audio.sample_rate, row.onset_s, row.reply_duration_s)
    return ClipJob(f"reply/{row.sample_id}", clip, path)


def _reference_job(run: RunFolder, row: ResultRow, bench: RunBenchmark) -> ClipJob | None:
    folder = run.bundle(row.bundle, f"results: session {row.sample_id}")
    if folder is None:
        raise ConfigError(f"{run}: session {row.sample_id} has no recording bundle")
    sample = run.meta(folder).sample
    if sample.kind == "live":
        return None  # a person's turn (``talk``): nothing to mirror, only its reply is scored
    path = bench.audio(sample.reference, f"{folder}/meta.json: field 'sample.reference'")
    if path is None:
        return None  # a timing-only sample: nothing to mirror
    audio = read_audio(path, sample_rate=SAMPLE_RATE)
    clip = audio.samples[: int(MAX_CLIP_S * SAMPLE_RATE)]
    return ClipJob(f"reference/{row.sample}", clip, path)


def _timing_only(run: RunFolder, row: ResultRow) -> bool:
    """A benchmark sample without emotion and reference: timed, with nothing emotional to score."""
    try:
        folder = run.bundle(row.bundle, f"results: session {row.sample_id}")
        sample = None if folder is None else run.meta(folder).sample
    except InputError:
        return False  # the reference job reports the problem
    return sample is not None and sample.kind == "benchmark" and sample.reference is None


def _turn_jobs(
    run: RunFolder, row: ResultRow, bench: RunBenchmark, references: set[str]
) -> list[ClipJob]:
    """A partner's next turns that name an emotion: each reply, and the reference its step
    names (``<sample id>.turn<k>``: scored like a sample of its own; a trial's turn replies are
    ``<sample id>.turn<k>.trial<t>``, and its trials share the turn's reference, a file of the
    run's benchmark)."""
    if row.partner is None or row.status == "failed":
        return []
    turns = [t for t in PartnerRecord.from_json(row.partner).turns if t.emotion]
    folder = run.bundle(row.bundle, f"results: session {row.sample_id}")
    if not turns or folder is None:
        return []
    where = f"{folder / META}: field 'partner'"
    script = run.meta(folder).extra.get("partner") or []
    if not isinstance(script, list):
        raise RunFolderError(f"{where}: not a list of steps")
    path = run.file(folder, OUTPUT)
    if path is None:
        raise RunFolderError(f"{folder / OUTPUT}: not recorded")
    audio = read_audio(path, max_duration_s=MAX_SESSION_S)
    jobs = []
    for t in turns:
        key = t.key(row.sample)
        if t.onset_s is not None and t.duration_s is not None:
            clip = cut_reply(audio.samples, audio.sample_rate, t.onset_s, t.duration_s)
            jobs.append(ClipJob(f"reply/{session_key(key, row.trial or 1)}", clip, path))
        if key in references:
            continue
        references.add(key)
        step = script[t.step] if 0 <= t.step < len(script) else None
        reference = step.get("reference") if isinstance(step, dict) else None
        if not isinstance(reference, str):
            raise RunFolderError(f"{where}: turn {t.turn} names no reference")
        ref_path = bench.audio(reference, f"{where}[{t.step}].reference'")
        assert ref_path is not None
        ref = read_audio(ref_path, sample_rate=SAMPLE_RATE).samples
        jobs.append(ClipJob(f"reference/{key}", ref[: int(MAX_CLIP_S * SAMPLE_RATE)], ref_path))
    return jobs


def collect_clips(run: RunFolder | Path) -> tuple[list[ClipJob], dict[str, str]]:
    """Every reply and reference of a run (a partner's next turns too), and the problems of
    those that cannot be cut."""
    jobs, problems, _ = _collect(RunFolder.of(run))
    return jobs, problems


def _collect(run: RunFolder) -> tuple[list[ClipJob], dict[str, str], RunBenchmark]:
    results = load_results(run)
    bench = RunBenchmark(run, results.meta)
    jobs: list[ClipJob] = []
    problems: dict[str, str] = {}
    references: set[str] = set()  # a sample's trials share its reference: cut it once
    for row in results.rows:
        try:
            jobs += _turn_jobs(run, row, bench, references)
        except InputError as exc:
            problems[f"turns/{row.sample_id}"] = str(exc)
        if row.status == "failed" or (not row.emotion and _timing_only(run, row)):
            continue
        unusable = results.problems.get(row.sample_id)
        if unusable:  # the value its reply is cut by may be the one left out
            problems[f"reply/{row.sample_id}"] = "; ".join(unusable)
        else:
            _add(jobs, problems, f"reply/{row.sample_id}", partial(_reply_job, run, row))
        if row.sample not in references:
            references.add(row.sample)
            make = partial(_reference_job, run, row, bench)
            _add(jobs, problems, f"reference/{row.sample}", make)
    return jobs, problems, bench


def _add(
    jobs: list[ClipJob],
    problems: dict[str, str],
    key: str,
    make: Callable[[], ClipJob | None],
) -> None:
    try:
        job = make()
    except InputError as exc:
        problems[key] = str(exc)
        return
    if job is not None:
        jobs.append(job)


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
    run_dir: RunFolder | Path,
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
    run = RunFolder.of(run_dir)
    jobs, errors, bench = _collect(run)
    if samples is not None:  # keys are "reply/<id>" and "reference/<id>"
        jobs = [j for j in jobs if j.key.partition("/")[2] in samples]
        errors = {k: e for k, e in errors.items() if k.partition("/")[2] in samples}
    identity = await identify(scorer, score)
    cache = ScoreCache(cache_path(run, scorer), identity, fresh=rescore)
    cached = sum(1 for job in jobs if cache.get(job.key, job.digest) is not None)
    refs = References.for_run(bench, identity, fresh=rescore)
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


def _check_identity(
    probed: ScorerIdentity, fresh: ScorerIdentity, run_dir: RunFolder | Path
) -> None:
    if fresh != probed:
        raise ConfigError(
            f"{run_dir}: {probed.name} scores came back from {probed.label()} and from "
            f"{fresh.label()}: the scoring workers differ (weights, precision or version); "
            "start them alike"
        )
