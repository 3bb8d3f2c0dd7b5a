"""Assemble what a report shows: per run, the MIRRORING metrics from cached scores and the timing
summary from the run's results."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from duplexsim.core.errors import ConfigError
from duplexsim.core.partnermetrics import PartnerRecord, PartnerSummary, StepResult, summarise_steps
from duplexsim.core.provenance import BenchmarkId, ScorerIdentity, model_label
from duplexsim.core.runfolder import RunFolder
from duplexsim.core.takeover import TaskTiming, TimedSample, task_timings
from duplexsim.report.items import Sources, benchmark_sources, run_agreement, run_items
from duplexsim.run.costs import run_price
from duplexsim.run.store import ResultRow, load_results, session_key
from duplexsim.run.summary import RunSummary, summarise_rows
from duplexsim.runscores.cache import ScoreCache, cache_path
from duplexsim.scoring.compare import RunItems
from duplexsim.scoring.metrics import MirroringMetrics, SampleScores, compute_metrics
from duplexsim.scoring.models.base import MIN_CLIP_S
from duplexsim.scoring.trials import TrialAgreement

__all__ = ["NO_SCORER", "RunReport", "available_scorers", "build_report", "sample_scores"]

COMPARABLE_SCORERS = ("empathic-insight-voice-small",)  # the scorer MIRRORING itself used
NO_SCORER = "none"  # a timing-only run's report


@dataclass(frozen=True)
class RunReport:
    run_id: str
    run_dir: Path
    model: str  # as every output shows it: flagged when a fake or a --url override answered
    scorer: str
    comparable: bool  # numbers can be set beside MIRRORING's published ones
    metrics: MirroringMetrics
    timing: RunSummary
    unscored: dict[str, str]  # clip key -> why it has no score
    identity: ScorerIdentity  # of the scores (unknown parts: a cache from before they were kept)
    benchmark: BenchmarkId
    provenance: dict[str, Any]  # the run's identity as recorded (model, settings, packages ...)
    tasks: tuple[TaskTiming, ...] = ()  # Full-Duplex-Bench's take-over rate and latency by task
    partner: tuple[PartnerSummary, ...] = ()  # what the model did at a partner's steps, by task
    items: RunItems | None = None  # per-sample figures for paired comparisons (None: none in N)
    agreement: TrialAgreement | None = None  # test-retest figures of a run with trials
    clusters_note: str | None = None  # why samples are not clustered by source_id (None: they are)
    # values of the run's files that could not be used, by sample id ("": the run's metadata)
    problems: dict[str, list[str]] = field(default_factory=dict)

    @property
    def group(self) -> tuple[str, ScorerIdentity]:
        """Runs are ranked together only within one (benchmark, scorer identity)."""
        bench = self.benchmark.digest or f"path:{self.benchmark.path}"
        return bench, self.identity

    def to_dict(self) -> dict[str, Any]:
        t = self.timing
        return {
            "run_id": self.run_id,
            "run_dir": str(self.run_dir),
            "model": self.model,
            "scorer": self.scorer,
            "scorer_identity": self.identity.to_dict(),
            "benchmark": self.benchmark.to_dict(),
            "comparable_with_mirroring": self.comparable,
            "metrics": self.metrics.to_dict(),
            "timing": {
                "samples": t.samples,
                "replied": t.replied,
                "no_reply": t.no_reply,
                "failed": t.failed,
                "input_faithful": t.faithful,  # every metric comes from these sessions only
                "precise": t.precise,  # latency comes from these sessions only
                "retried": t.retried,
                "latency_n": t.latency_n,
                "truncated": t.truncated,
                "latency_p50_ms": t.latency_p50_ms,
                "latency_p90_ms": t.latency_p90_ms,
                "reply_median_s": t.reply_median_s,
                "overlapped": t.overlapped,
                "send_p99_ms": t.send_p99_ms,
                "send_max_ms": t.send_max_ms,
                "failures": t.failures,
                "provider_wait_s": t.provider_wait_s,
                "rate_limited": t.rate_limited,
            },
            "cost": None if t.cost is None else t.cost.to_dict(),
            "timing_by_task": [t.to_dict() for t in self.tasks],
            "partner_by_task": [p.to_dict() for p in self.partner],
            "trials": None if self.agreement is None else self.agreement.to_dict(),
            "clusters": self.clusters_note or "by source_id",
            "unscored": self.unscored,
            "problems": self.problems,
            "provenance": self.provenance,
        }


def available_scorers(run: RunFolder | Path) -> list[str]:
    return RunFolder.of(run).scorers()


def _vector(cache: ScoreCache, key: str) -> np.ndarray | None:
    return cache.emotions(key)


INPUT_UNFAITHFUL = "input fidelity lost"
TIMING_INVALID = "timing invalid"  # a row recorded before fidelity was told apart from precision


def out_of_n_reason(row: ResultRow) -> str | None:
    """Why a completed sample is out of N before its scores are looked at: the model did not
    hear Speaker A's audio as a person's client sends it (input fidelity lost; a row recorded
    before the split: its timing was invalid), or its reply is shorter than a scorer takes. A
    session that kept fidelity but not precision is in N: only its latency is left out."""
    if row.status == "failed":
        return None  # counted as failed
    if not row.faithful:
        return INPUT_UNFAITHFUL if row.input_faithful is False else TIMING_INVALID
    if row.status == "ok" and (row.reply_duration_s or 0.0) < MIN_CLIP_S:
        return "reply too short to score"
    return None


def sample_scores(
    rows: list[ResultRow], cache: ScoreCache
) -> tuple[list[SampleScores], dict[str, str]]:
    """One SampleScores per result row; a reply or reference without a score is reported.

    A run's replies are one speaker's clips and the references another's: a scorer that judges a
    voice against its own register (``speaker_normalise``) sees each group whole."""
    from duplexsim.scoring.models import speaker_normaliser

    normalise = speaker_normaliser(cache.scorer)
    # no reference (a ``talk`` session): timing only; a partner's next turns that name an
    # emotion are samples of their own
    scored = [r for r in rows if r.emotion] + turn_rows(rows)
    replies = cache.speaker_emotions(
        [f"reply/{r.sample_id}" for r in scored if r.status == "ok"], normalise
    )
    references = cache.speaker_emotions(  # one per sample: its trials share it
        sorted({f"reference/{r.sample}" for r in scored if r.status != "failed"}), normalise
    )
    samples: list[SampleScores] = []
    unscored: dict[str, str] = {}
    for row in scored:
        failed = row.status == "failed"
        reference = None if failed else references.get(f"reference/{row.sample}")
        reply = replies.get(f"reply/{row.sample_id}") if row.status == "ok" else None
        out = out_of_n_reason(row)
        if not failed and out is None and reference is None:
            unscored[f"reference/{row.sample}"] = "no cached score"
        if row.status == "ok" and out is None and reply is None:
            # a reply that exists but has no score is not silence: leave the sample out
            unscored[f"reply/{row.sample_id}"] = "no cached score"
            reference = None
        for key in (f"reply/{row.sample_id}", f"reference/{row.sample_id}"):
            if key in cache.problems and key in unscored:  # said better than "no score"
                unscored[key] = f"unusable cached score ({cache.problems[key]})"
        samples.append(
            SampleScores(
                sample_id=row.sample_id,
                emotion=row.emotion,
                language=row.language,
                reference=reference,
                reply=reply,
                failed=failed,
                out_reason=out,
                item=None if row.sample == row.sample_id else row.sample,
                trial=row.trial or 1,
            )
        )
    return samples, unscored


def turn_rows(rows: list[ResultRow]) -> list[ResultRow]:
    """A partner's next turns that name an emotion, each as the row of a sample of its own
    (``<sample id>.turn<k>``: its reply's timing, the session's timing validity)."""
    out = []
    for row in rows:
        if row.partner is None or row.status == "failed":
            continue
        for t in PartnerRecord.from_json(row.partner).turns:
            if t.emotion:
                out.append(
                    replace(
                        row,
                        sample_id=session_key(t.key(row.sample), row.trial or 1),
                        emotion=t.emotion,
                        status="ok" if t.onset_s is not None else "no-reply",
                        onset_s=t.onset_s,
                        reply_duration_s=t.duration_s,
                        partner=None,
                    )
                )
    return out


def partner_by_task(rows: list[ResultRow]) -> list[PartnerSummary]:
    """Each task's partner steps; latencies only from sessions whose timing was valid."""
    steps: dict[str, list[StepResult]] = {}
    skipped: dict[str, dict[str, int]] = {}
    for row in rows:
        if row.partner is None or row.status == "failed":
            continue
        record = PartnerRecord.from_json(row.partner)
        task = row.task or "all"
        valid = row.timing_valid is not False
        steps.setdefault(task, []).extend(r if valid else _no_latency(r) for r in record.steps)
        counts = skipped.setdefault(task, {})
        for kind, n in record.skipped.items():
            counts[kind] = counts.get(kind, 0) + n
    return summarise_steps(steps, skipped)


def _no_latency(r: StepResult) -> StepResult:
    return replace(r, stop_latency_s=None, response_latency_s=None, latency_s=None)


def build_report(run_dir: RunFolder | Path, scorer: str | None, *, seed: int = 0) -> RunReport:
    run = RunFolder.of(run_dir)
    run_dir = run.path
    results = load_results(run)
    meta, rows = results.meta, results.rows
    scorers = available_scorers(run)
    if scorer is None and not any(r.emotion for r in [*rows, *turn_rows(rows)]):
        scorer = NO_SCORER  # timing only: nothing emotional to score or report
    elif scorer is None:
        if not scorers:
            raise ConfigError(f"{run_dir}: not scored yet (run `duplexsim score {run_dir}`)")
        scorer = next((s for s in COMPARABLE_SCORERS if s in scorers), scorers[0])
    elif scorer not in scorers:
        raise ConfigError(
            f"{run_dir}: no scores from '{scorer}' "
            f"(run `duplexsim score {run_dir} --scorer {scorer}`)"
        )
    cache = ScoreCache(cache_path(run, scorer), scorer)
    samples, unscored = sample_scores(rows, cache)
    metrics = compute_metrics(samples, seed=seed)
    sources = (
        Sources({}, "not scored")
        if scorer == NO_SCORER
        else benchmark_sources(BenchmarkId.from_meta(meta.get("benchmark")))
    )
    run_id = str(meta.get("run_id", run_dir.name))
    items = run_items(run_id, samples, rows, sources)
    raw_model = meta.get("model")
    model_info: dict[str, Any] = raw_model if isinstance(raw_model, dict) else {}
    model = model_label(model_info) if model_info.get("name") else str(meta.get("run_id", ""))
    return RunReport(
        run_id=run_id,
        run_dir=run_dir,
        model=model,
        scorer=scorer,
        comparable=scorer in COMPARABLE_SCORERS,
        metrics=metrics,
        timing=summarise_rows(run_dir.name, rows, run_price(meta)),
        unscored=unscored,
        identity=cache.identity,
        benchmark=BenchmarkId.from_meta(meta.get("benchmark")),
        provenance={k: v for k, v in meta.items() if k != "run_id"},
        tasks=tuple(task_timings(_timed(r) for r in rows)),
        partner=tuple(partner_by_task(rows)),
        items=items,
        agreement=run_agreement(items),
        clusters_note=sources.note,
        problems=results.problems,
    )


def _timed(row: ResultRow) -> TimedSample:
    return TimedSample(row.task, row.status, row.reply_duration_s, row.latency_s, row.precise)
