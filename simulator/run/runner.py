"""Runs: many concurrent sessions over a benchmark, with retries, resume and sharding.

The runner owns concurrency, time and retries; sessions own the streaming; the store owns
durability. A sample's row is committed only after its bundle is in place, so a run killed at any
moment resumes with every sample exactly once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import gc
import hashlib
import multiprocessing
import os
import random
import sqlite3
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim import __version__
from duplexsim.clients.base import DuplexClient
from duplexsim.clients.registry import client_class
from duplexsim.core.audio import read_audio
from duplexsim.core.benchmark import Benchmark, Sample
from duplexsim.core.bundle import BundleMeta, SampleRef
from duplexsim.core.errors import ConfigError, StorageError
from duplexsim.core.names import check_name
from duplexsim.core.provenance import BenchmarkId, benchmark_id
from duplexsim.core.retry import RetryPolicy
from duplexsim.core.stalls import StallLog
from duplexsim.core.timing import speech_end
from duplexsim.core.usage import Usage
from duplexsim.core.vad import VadConfig
from duplexsim.profiles.profile import ModelProfile, client_config
from duplexsim.run.admission import Headroom, Slot
from duplexsim.run.budget import Budget
from duplexsim.run.costs import PRICE_KEY, row_cost, row_usage
from duplexsim.run.estimate import earlier_rows, estimate_run, learn
from duplexsim.run.fakes import FakeModelProcess
from duplexsim.run.lifeline import watch_owner
from duplexsim.run.partnerrun import PartnerOptions, check_partner, partner_client
from duplexsim.run.progress import Progress
from duplexsim.run.providergate import ProviderGate
from duplexsim.run.recording import package_versions, record_session, remove_unfinished
from duplexsim.run.rows import outcome_row
from duplexsim.run.runlock import run_lock
from duplexsim.run.store import ResultRow, RunStore, session_key, store_filename
from duplexsim.session.engine import (
    CONTEXT_RATE,
    SessionOutcome,
    SessionSettings,
    SessionTap,
    run_session,
)
from duplexsim.session.modelpartner import ModelPartner
from duplexsim.session.partneraudio import PartnerAudio, PartnerClips, read_partner_clips
from duplexsim.session.useraudio import UserAudio

__all__ = ["RunOptions", "execute_run", "in_shard", "outcome_row", "parse_shard"]

DONE_STATUSES = ("ok", "no-reply")
RAMP_STEP_S = 0.01
# Helper threads (the pool's feeder pickling recordings, to_thread work) hand the GIL back to
# the pacing loop within 0.1 ms: the loop drops the GIL in every send, and at the default 5 ms
# (or 0.5 ms) each send made while a helper ran Python waited that long to get it back.
SWITCH_INTERVAL_S = 0.0001


@dataclass(frozen=True)
class RunOptions:
    run_id: str
    runs_dir: Path
    concurrency: int = 8
    shard: tuple[int, int] | None = None
    settings: SessionSettings = field(default_factory=SessionSettings)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sample_ids: tuple[str, ...] = ()
    quiet: bool = False
    admission: bool = True  # False: start up to ``concurrency`` sessions whatever the headroom
    # run a session again when it kept input fidelity but not measurement precision (only its
    # latency is lost; against a hosted model each attempt is a paid session)
    retry_imprecise: bool = False
    # ``run --monitor``: asked before each attempt for a tap on the session's audio (None: not
    # this one); the player hands it to one session at a time
    monitor: Callable[[], SessionTap | None] | None = None
    trials: int = 1  # ``run --trials K``: each sample run K times, each trial its own session
    # ``run --max-cost``: no sample starts once the run's spend, its sessions in flight and the
    # sample's own expected cost would pass this (the price table's currency)
    max_cost: float | None = None
    partner: PartnerOptions | None = None  # another model as the user (``run --partner``)

    def __post_init__(self) -> None:
        check_name(self.run_id, "run id")  # it names the run's folder under runs_dir
        if isinstance(self.trials, bool) or not isinstance(self.trials, int) or self.trials < 1:
            raise ConfigError(f"--trials must be an integer >= 1, got {self.trials!r}")

    @property
    def run_dir(self) -> Path:
        return self.runs_dir / self.run_id


def parse_shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ConfigError(f"--shard {text!r}: expected i/n, for example 0/4") from None
    if n < 1 or not 0 <= i < n:
        raise ConfigError(f"--shard {text!r}: need 0 <= i < n")
    return i, n


def in_shard(sample_id: str, shard: tuple[int, int] | None) -> bool:
    """Stable by id, so adding samples never moves the others between shards."""
    if shard is None:
        return True
    digest = hashlib.sha256(sample_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shard[1] == shard[0]


class _Writer:
    """Bundles are written by the worker pool and rows committed from a thread, so neither disk
    waits nor encoding ever delay a send."""

    def __init__(self, store: RunStore, pool: concurrent.futures.Executor) -> None:
        self.store = store
        self.pool = pool
        self.lock = threading.Lock()

    async def save(
        self, folder: Path, outcome: SessionOutcome, meta: BundleMeta, row: ResultRow
    ) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.pool, record_session, folder, outcome, meta)
        await asyncio.to_thread(self._put, row)

    def set_meta(self, values: dict[str, Any]) -> None:
        with self.lock:
            try:
                self.store.set_meta(values)
            except (sqlite3.Error, OSError) as exc:
                raise StorageError(self.store.path, exc) from None

    def _put(self, row: ResultRow) -> None:
        with self.lock:
            try:
                self.store.put(row)
            except (sqlite3.Error, OSError) as exc:
                raise StorageError(self.store.path, exc) from None


def _prepare_context(path: Path, vad: VadConfig) -> tuple[NDArray[np.float32], float | None]:
    """Decode a context at 16 kHz and find the end of Speaker A's speech (runs in the pool)."""
    samples = read_audio(path, sample_rate=CONTEXT_RATE).samples
    return samples, speech_end(samples, CONTEXT_RATE, vad)


def worker_pool() -> concurrent.futures.ProcessPoolExecutor:
    """CPU work of a run (decoding, VAD over whole clips, recording) goes to other processes, so
    the process that paces sessions only moves bytes."""
    workers = max(1, (os.cpu_count() or 2) - 1)
    context = multiprocessing.get_context("forkserver")
    return concurrent.futures.ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=_start_pool_worker,
        initargs=(os.getpid(),),
    )


def _start_pool_worker(owner_pid: int) -> None:
    watch_owner(owner_pid)  # a worker outlives a killed run otherwise (and keeps the forkserver)
    yield_to_pacing()


def yield_to_pacing() -> None:
    """Run this process only on CPU time nothing else wants: a pacing process (or a local model)
    that wakes for its next frame takes the core at once instead of waiting out this one's
    slice. Bundles and decoding can wait; frames cannot."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux
        with contextlib.suppress(OSError):
            os.nice(19)


@contextmanager
def realtime_tuning() -> Iterator[None]:
    """Process settings for pacing many sessions from one loop: worker threads give the GIL back
    within 0.1 ms, and everything alive before the run (imported modules, settings) is moved out
    of the garbage collector's reach, so a full collection stays short. Runs on one loop (the
    demo's) share them: only the first to start sets them (a full collection then stalls no
    session) and only the last to end undoes them (the others still pace)."""
    _tuned[0] += 1
    if _tuned[0] == 1:
        _tuned[1] = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        gc.collect()
        gc.freeze()
    try:
        yield
    finally:
        _tuned[0] -= 1
        if _tuned[0] == 0:
            gc.unfreeze()
            sys.setswitchinterval(_tuned[1])


_tuned: list[Any] = [0, 0.0]  # (holders of realtime_tuning, the switch interval before them)


def _check_writable(run_dir: Path) -> None:
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write-probe"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"{run_dir}: run directory is not writable ({exc.strerror})") from None


def run_identity(opts: RunOptions, profile: ModelProfile, bench: Benchmark) -> dict[str, Any]:
    """What the run measured with, written once when it starts: the benchmark (a digest of its
    manifest and audio), the model and where it really was, every setting, package versions."""
    audio = [p for s in bench for p in s.audio]
    return {
        "run_id": opts.run_id,
        "model": profile.describe(),
        "benchmark": benchmark_id(bench.manifest, audio, len(bench)).to_dict(),
        "settings": opts.settings.describe(),
        **({"partner": opts.partner.describe()} if opts.partner else {}),
        "run": {
            "concurrency": opts.concurrency,
            "max_attempts": opts.retry.max_attempts,
            "retry_imprecise": opts.retry_imprecise,
            "shard": list(opts.shard) if opts.shard else None,
            "trials": opts.trials,
        },
        "duplexsim": __version__,
        "packages": package_versions(),
    }


def _open_store(opts: RunOptions, profile: ModelProfile, bench: Benchmark) -> RunStore:
    _check_writable(opts.run_dir)
    store = RunStore(opts.run_dir / store_filename(opts.shard))
    existing = store.meta()
    identity = run_identity(opts, profile, bench)
    problem = _resume_problem(existing, identity)
    if problem:
        store.close()
        raise ConfigError(f"run '{opts.run_id}' {problem}; choose another --run-id")
    if not existing.get("created"):  # written once: a resumed run keeps what it started with
        store.set_meta({**identity, "created": datetime.now(UTC).isoformat()})
    # the prices its costs are computed at: the latest (a corrected table re-prices the run)
    store.set_meta({PRICE_KEY: None if profile.price is None else profile.price.describe()})
    return store


def _resume_problem(existing: dict[str, Any], identity: dict[str, Any]) -> str | None:
    """Why a run's results cannot take this run's samples (another model, benchmark, place)."""
    if not existing:
        return None
    old, new = existing.get("model", {}), identity["model"]
    if old.get("name") != new["name"]:
        return f"already holds results of model '{old.get('name')}'"
    if old.get("endpoint", new["endpoint"]) != new["endpoint"]:
        return f"was run against a {old.get('endpoint')} endpoint, this one is {new['endpoint']}"
    old_partner, new_partner = existing.get("partner", {}), identity.get("partner", {})
    if old_partner.get("model", {}).get("name") != new_partner.get("model", {}).get("name"):
        who = old_partner.get("model", {}).get("name")
        return f"was run with {f'partner {who!r}' if who else 'no partner'}"
    was = BenchmarkId.from_meta(existing.get("benchmark"))
    if was.digest is not None and was.digest != identity["benchmark"]["digest"]:
        return f"was run on benchmark {was.label}, not this one"
    return None


@dataclass(frozen=True)
class Job:
    """One session to run: a sample's trial (1 without ``--trials``)."""

    sample: Sample
    trial: int

    @property
    def key(self) -> str:
        """Its row's key and its bundle's folder name."""
        return session_key(self.sample.id, self.trial)


def _todo(bench: Benchmark, opts: RunOptions, store: RunStore) -> list[Job]:
    """The sessions still to run, trial by trial: an interrupted run holds whole rounds first."""
    done = {r.sample_id for r in store.rows() if r.status in DONE_STATUSES}
    wanted = set(opts.sample_ids)
    ids = {s.id for s in bench}
    unknown = wanted - ids
    if unknown:
        raise ConfigError(f"unknown sample id(s): {', '.join(sorted(unknown))}")
    chosen = [s for s in bench if in_shard(s.id, opts.shard) and (not wanted or s.id in wanted)]
    jobs = [Job(s, t) for t in range(1, opts.trials + 1) for s in chosen]
    clash = next((j.key for j in jobs if j.trial > 1 and j.key in ids), None)
    if clash is not None:
        raise ConfigError(
            f"trial key '{clash}' is also a sample id of this benchmark: it cannot be run "
            "with --trials"
        )
    return [j for j in jobs if j.key not in done]


@dataclass(frozen=True)
class Endpoint:
    """Where sessions connect: the profile's URL (None), or a fake server started for the run,
    with the stalls it reports (its latency is ours to vouch for: it runs on our cores)."""

    url: str | None = None
    server_stalls: StallLog | None = None
    partner_url: str | None = None  # a partner model's, where the run started one


@asynccontextmanager
async def _endpoint(
    profile: ModelProfile | None, given: Endpoint | None = None
) -> AsyncIterator[Endpoint]:
    """The caller's endpoint, the profile's, or a local fake server started for the run."""
    if given is not None:
        yield given
        return
    if profile is None or profile.fake_behaviour is None or profile.url is not None:
        yield Endpoint()
        return
    async with FakeModelProcess(profile.protocol, profile.fake_behaviour) as fake:
        yield Endpoint(fake.url, fake.stalls)


async def execute_run(
    bench: Benchmark,
    profile: ModelProfile,
    opts: RunOptions,
    progress: Progress | None = None,
    *,
    endpoint: Endpoint | None = None,
    pool: concurrent.futures.Executor | None = None,
) -> list[ResultRow]:
    """Run every missing sample of ``bench`` against ``profile``; returns all rows of this store.

    A ``progress`` shared by several concurrent runs shows them as one line; the caller closes it.
    ``endpoint`` is a server the caller started for the run (a fake whose stalls it reads),
    instead of the profile's; ``pool`` a worker pool it shares between runs (``started_pool``).
    """
    if opts.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    client_class(profile.protocol)  # unknown protocol fails before anything starts
    if profile.fake_behaviour is None or profile.url is not None:
        client_config(profile)  # missing key or endpoint fails before anything starts
    if opts.partner is not None:
        note = check_partner(opts.partner, bench)
        if note is not None and not opts.quiet:
            print(note, file=sys.stderr)
    _check_writable(opts.run_dir)
    with run_lock(opts.run_dir, opts.run_id, opts.shard):
        return await _execute_locked(bench, profile, opts, progress, endpoint, pool)


async def _execute_locked(
    bench: Benchmark,
    profile: ModelProfile,
    opts: RunOptions,
    progress: Progress | None,
    given: Endpoint | None,
    pool: concurrent.futures.Executor | None,
) -> list[ResultRow]:
    # a run's own start and end (its store, the benchmark's digest, package versions, the pool)
    # happen in threads: another run on this loop (the demo's) may be pacing sessions meanwhile
    store = await asyncio.to_thread(_open_store, opts, profile, bench)
    try:
        todo = await asyncio.to_thread(_todo, bench, opts, store)
        await asyncio.to_thread(remove_unfinished, opts.run_dir / "sessions", [j.key for j in todo])
        spend = _Spend.of([j.sample for j in todo], profile, opts, store.rows())
        own_progress = progress is None
        if progress is None:
            progress = Progress(opts.run_id, 0, quiet=opts.quiet)
        progress.total += len(todo)
        if todo:
            partner = None if opts.partner is None else opts.partner.profile
            async with (
                _pool(pool) as workers,
                _endpoint(profile, given) as endpoint,
                _endpoint(partner) as other,
            ):
                endpoint = replace(endpoint, partner_url=other.url)
                writer = _Writer(store, workers)
                await _run_all(todo, profile, endpoint, opts, writer, progress, spend)
        if own_progress:
            progress.close()
        if spend.budget is not None and spend.budget.not_started:
            raise spend.budget.reached()
        return await asyncio.to_thread(store.rows)
    finally:
        await asyncio.to_thread(store.close)


@asynccontextmanager
async def _pool(
    given: concurrent.futures.Executor | None,
) -> AsyncIterator[concurrent.futures.Executor]:
    """The caller's pool, or one of the run's own, started before the first session and shut
    down after the last off the loop (a worker's start and a shutdown's join block for tens of
    milliseconds)."""
    if given is not None:
        yield given
        return
    pool = await started_pool()
    try:
        yield pool
    finally:
        await asyncio.to_thread(pool.shutdown)


async def started_pool() -> concurrent.futures.ProcessPoolExecutor:
    """A ``worker_pool`` whose workers are running: the first job starts them, in a thread (a
    worker's start waits on the fork server)."""
    pool = worker_pool()
    first = await asyncio.to_thread(pool.submit, os.getpid)
    await asyncio.wrap_future(first)
    return pool


@dataclass
class _Spend:
    """A run's money and its provider's limits: the gate its starts wait on, the usage of
    samples that failed before (billed too: a rerun adds to it), and, with ``--max-cost``, the
    budget and each sample's expected cost."""

    gate: ProviderGate
    prior: dict[str, Usage]
    budget: Budget | None = None
    expected: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(
        cls, todo: list[Sample], profile: ModelProfile, opts: RunOptions, rows: list[ResultRow]
    ) -> _Spend:
        prior = {r.sample_id: u for r in rows if r.status == "failed" and (u := row_usage(r))}
        metering = client_class(profile.protocol).metering
        earlier = (
            []
            if opts.max_cost is None
            else earlier_rows(opts.runs_dir, profile.name, profile.protocol)
        )
        estimate = estimate_run(todo, learn(earlier, metering), profile.price)
        spend = cls(ProviderGate(opts.retry, estimate.tokens_per_session), prior)
        if opts.max_cost is None:
            return spend
        price = profile.price
        unknown = sorted({u for c in estimate.per_sample.values() for u in c.unknown})
        if price is None or unknown:
            why = "the profile has no price table" if price is None else ", ".join(unknown[:3])
            raise ConfigError(f"--max-cost needs a known cost per session; {why}")
        spent = sum(row_cost(r, price).known for r in rows)
        spend.budget = Budget(opts.max_cost, spent, price.currency)
        spend.expected = {k: c.amount or 0.0 for k, c in estimate.per_sample.items()}
        return spend


async def _run_all(
    todo: list[Job],
    profile: ModelProfile,
    endpoint: Endpoint,
    opts: RunOptions,
    writer: _Writer,
    progress: Progress,
    spend: _Spend,
) -> None:
    gate = asyncio.Semaphore(opts.concurrency)
    # --concurrency is a ceiling: a session starts only while the sessions already running (of
    # every run on this loop) keep pace (``Headroom``), and starts are spaced so handshakes do
    # not pile up
    headroom = Headroom.for_loop()
    headroom.start()

    async def one(job: Job) -> None:
        async with gate:
            budget = spend.budget
            expected = spend.expected.get(job.sample.id, 0.0)
            if budget is not None and not await budget.admit(job.key, expected):
                return  # past --max-cost: left for a resumed run
            async with headroom.slot(check=opts.admission) as slot:
                progress.in_flight += 1
                try:
                    await _run_sample(job, profile, endpoint, opts, writer, progress, slot, spend)
                finally:
                    progress.in_flight -= 1
                    progress.update()

    ticker = asyncio.create_task(_tick(progress, headroom))
    with realtime_tuning():
        try:
            await asyncio.gather(*(one(j) for j in todo))
            # how this run's sessions were paced, beside its results (what the window learnt,
            # sessions at once): the figures that make a run's wall time repeatable
            await asyncio.to_thread(writer.set_meta, {"pace": headroom.describe()})
        finally:
            ticker.cancel()
            await headroom.stop()


async def _tick(progress: Progress, headroom: Headroom) -> None:
    while True:
        progress.window = headroom.window.sessions
        progress.update()
        await asyncio.sleep(0.5)


async def _run_sample(
    job: Job,
    profile: ModelProfile,
    endpoint: Endpoint,
    opts: RunOptions,
    writer: _Writer,
    progress: Progress,
    slot: Slot,
    spend: _Spend,
) -> None:
    """One sample: its inputs decoded off the loop, its attempts, its recording and row."""
    inputs = await _Inputs.read(job.sample, opts, writer.pool)
    tried = await _attempts(job, inputs, _Place(profile, endpoint, opts, writer.pool), progress,
                            slot, spend)  # fmt: skip
    row = await _record(job, inputs, tried, profile, opts, writer)
    if spend.budget is not None:
        await spend.budget.settle(job.key, row_cost(row, profile.price).known)
    if tried.outcome.status == "failed":
        progress.failed += 1
    else:
        progress.done += 1


@dataclass(frozen=True)
class _Inputs:
    """What every attempt of a sample streams: the context, where its speech ends, a partner
    script's clips."""

    context: NDArray[np.float32]
    speech_end_s: float | None
    clips: PartnerClips | None

    @classmethod
    async def read(
        cls, sample: Sample, opts: RunOptions, pool: concurrent.futures.Executor
    ) -> _Inputs:
        loop = asyncio.get_running_loop()
        vad = opts.settings.vad
        context, end_s = await loop.run_in_executor(pool, _prepare_context, sample.context, vad)
        clips = None
        if sample.partner:
            clips = await loop.run_in_executor(pool, read_partner_clips, sample.partner, vad)
        return cls(context, end_s, clips)


@dataclass(frozen=True)
class _Place:
    """Where and how a run's sessions are run: the model, its endpoint, the options, the pool."""

    profile: ModelProfile
    endpoint: Endpoint
    opts: RunOptions
    pool: concurrent.futures.Executor


@dataclass(frozen=True)
class _Tried:
    """A sample's last attempt and what all its attempts cost."""

    outcome: SessionOutcome
    client: DuplexClient
    partner: dict[str, Any] | None  # the partner model's record (None: none played the user)
    attempts: int
    refused: int  # refusals by the provider's rate limits (not attempts)
    usage: Usage  # every attempt is billed
    waited_s: float  # held back by the provider's limits


async def _attempts(
    job: Job, inputs: _Inputs, at: _Place, progress: Progress, slot: Slot, spend: _Spend
) -> _Tried:
    """Sessions of one sample until one is kept: a failure is retried as the policy says, a
    session that lost input fidelity always (up to ``--retries``), an imprecise one only when
    asked; a refusal by the provider's limits waits its turn and is not an attempt."""
    sample, opts, provider = job.sample, at.opts, spend.gate
    loop = asyncio.get_running_loop()
    waited = await provider.turn()
    provider.started()
    usage = spend.prior.get(job.key, Usage())
    attempt = refused = 0
    while True:
        attempt += 1
        client = client_class(at.profile.protocol)(client_config(at.profile, url=at.endpoint.url))
        started = loop.time()
        user, partner = _user_side(sample, inputs.context, inputs.clips, opts, at.endpoint)
        outcome = await run_session(
            client,
            user,
            opts.settings,
            window_start_s=sample.context_turn_start_s or 0.0,
            speech_end_s=inputs.speech_end_s,
            executor=at.pool,
            tap=None if opts.monitor is None else opts.monitor(),
            server_stalls=at.endpoint.server_stalls,
            on_rate_limits=provider.said,
        )
        usage = usage + outcome.usage  # every attempt is billed
        provider.ended(outcome.rate_limited, outcome.retry_after_s)
        if outcome.status != "failed":  # how sessions end teaches admission what fits
            check = outcome.check
            slot.headroom.ended(started, precise=check.valid, faithful=check.faithful)
        if outcome.rate_limited and refused < opts.retry.max_rate_limited:
            # not an attempt: the whole run slows down, and this one waits its turn
            refused += 1
            attempt -= 1
            progress.retries += 1
            held = loop.time()  # the whole hold, its room given back and taken again included
            slot.give_back()
            await slot.take()
            await provider.turn()
            waited += loop.time() - held
            provider.started()
            continue
        wait = _retry_wait(outcome, attempt, opts)
        if wait is None:
            return _Tried(outcome, client, partner, attempt, refused, usage, waited)
        progress.retries += 1
        await slot.retake(wait)
        waited += await provider.turn()
        provider.started()


def _retry_wait(outcome: SessionOutcome, attempt: int, opts: RunOptions) -> float | None:
    """How long before the next attempt (None: this one is kept)."""
    if outcome.status == "failed":
        return opts.retry.delay(
            attempt,
            retryable=outcome.retryable,
            retry_after_s=outcome.retry_after_s,
            rng=random.Random(),
        )
    if _worth_retrying(outcome, opts.retry_imprecise):
        return opts.retry.delay(attempt, retryable=True, rng=random.Random())
    return None


async def _record(
    job: Job,
    inputs: _Inputs,
    tried: _Tried,
    profile: ModelProfile,
    opts: RunOptions,
    writer: _Writer,
) -> ResultRow:
    """The kept attempt's bundle and results row, written; the row."""
    sample, outcome = job.sample, tried.outcome
    folder = opts.run_dir / "sessions" / job.key
    trial = job.trial if opts.trials > 1 or job.trial > 1 else None
    meta = BundleMeta(
        sample=SampleRef(
            id=sample.id,
            kind="benchmark",
            language=sample.language,
            emotion=sample.emotion,
            context=str(sample.context),
            reference=None if sample.reference is None else str(sample.reference),
            context_turn_start_s=sample.context_turn_start_s,
        ),
        run_id=opts.run_id,
        model=profile.describe(),
        client=tried.client.describe(),
        capabilities=asdict(tried.client.capabilities),
        settings=opts.settings.describe(),
        outcome={},  # filled in by record_session
        attempts=tried.attempts,
        extra=_extra(sample, tried.partner) | ({} if trial is None else {"trial": trial}),
    )
    row = _row(job, outcome, tried.attempts, folder, opts.run_dir, trial, tried.partner is not None)
    row = dataclasses.replace(
        row,
        **dataclasses.asdict(tried.usage),
        rate_limited=tried.refused,
        provider_wait_s=round(tried.waited_s, 3),
        context_s=round(inputs.context.size / CONTEXT_RATE, 3),
    )
    await writer.save(folder, outcome, meta, row)
    return row


def _worth_retrying(outcome: SessionOutcome, imprecise: bool) -> bool:
    """A session the model did not hear as a person's client sends it is worth nothing: run it
    again (it is not the model's fault). One that kept fidelity but not precision lost only its
    latency; it is run again only when asked. Either, if it stays so, is kept and marked."""
    if not outcome.check.faithful:
        return True
    return imprecise and not outcome.check.valid


def _user_side(
    sample: Sample,
    context: NDArray[np.float32],
    clips: PartnerClips | None,
    opts: RunOptions,
    endpoint: Endpoint,
) -> tuple[UserAudio | NDArray[np.float32], dict[str, Any] | None]:
    """Fresh for each attempt: the context, a partner script that reacts to the model, or
    another model as the user (and what the bundle records of it)."""
    if opts.partner is not None:
        client, about = partner_client(opts.partner, sample, endpoint.partner_url)
        user = ModelPartner(context, client, opts.partner.limits, opts.settings)
        return user, about
    if clips is not None:
        return PartnerAudio(context, clips, opts.settings.turns), None
    return context, None


def _extra(sample: Sample, partner: dict[str, Any] | None) -> dict[str, Any]:
    """The bundle's record of who played the user: a partner script, or a partner model."""
    if partner is not None:
        return {"partner_model": partner}
    return {"partner": [e.to_dict() for e in sample.partner]} if sample.partner else {}


def _row(
    job: Job,
    outcome: SessionOutcome,
    attempts: int,
    folder: Path,
    run_dir: Path,
    trial: int | None,
    partner_model: bool = False,
) -> ResultRow:
    sample = job.sample
    # a partner model's turns name no emotion to mirror: each is timed as a next turn
    emotions: Sequence[str | None] | None = () if partner_model else None
    if sample.partner:
        emotions = [e.emotion for e in sample.partner]
    return outcome_row(
        job.key,
        sample.language,
        sample.emotion or "",  # "" for a timing-only sample, as for a talk turn
        outcome,
        attempts,
        folder,
        run_dir,
        task=sample.task,
        emotions=emotions,
        trial=trial,
    )


def default_run_id(profile: ModelProfile) -> str:
    return f"{profile.name}-{time.strftime('%Y%m%d-%H%M%S')}"
