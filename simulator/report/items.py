"""A run's per-sample figures for comparisons: the samples in N (the metrics' own table), their
trials, their latency where it is precise, and the recording each was cut from (``source_id``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.errors import InputError
from duplexsim.core.provenance import BenchmarkId, digest_files
from duplexsim.run.store import ResultRow
from duplexsim.scoring.compare import RunItems
from duplexsim.scoring.items import SampleScores, tabulate
from duplexsim.scoring.trials import TrialAgreement, trial_agreement

__all__ = ["Sources", "benchmark_sources", "run_agreement", "run_items"]


@dataclass(frozen=True)
class Sources:
    """The manifest's ``source_id`` of each sample, or why there is none to cluster by."""

    by_sample: dict[str, str | None]
    note: str | None = None  # None: read from the manifest the run was made on

    def of(self, sample_id: str) -> str | None:
        return self.by_sample.get(sample_id)


def benchmark_sources(benchmark: BenchmarkId) -> Sources:
    """Source ids from the run's manifest, if it is still the one the run was made on (its
    recorded digest): a changed or moved manifest could cluster the wrong samples."""
    path = Path(benchmark.path)
    try:
        if benchmark.manifest is None or digest_files([("manifest", path)]) != benchmark.manifest:
            return Sources({}, f"manifest {path} changed or unrecorded since the run")
        bench = load_benchmark(path, audio_check="none", allow_outside=True)
    except (OSError, InputError):
        return Sources({}, f"manifest {path} not found")
    found = {s.id: s.source_id for s in bench}
    if not any(found.values()):
        return Sources(found, "the manifest gives no source_id")
    return Sources(found)


def _precise_latency(row: ResultRow) -> float:
    """The row's latency in seconds where its session kept its timing and replied, else NaN."""
    if row.status != "ok" or row.timing_valid is False or row.latency_s is None:
        return math.nan
    return float(row.latency_s)


def run_items(
    name: str, samples: Sequence[SampleScores], rows: Sequence[ResultRow], sources: Sources
) -> RunItems | None:
    """The run's samples in N as ``RunItems`` (None: none in N)."""
    table = tabulate(samples)
    if not table.ids:
        return None
    latency = {row.sample_id: _precise_latency(row) for row in rows}
    per_trial = [
        [math.nan if s is None else latency.get(s, math.nan) for s in sessions]
        for sessions in table.sessions
    ]
    return RunItems(
        name=name,
        ids=table.ids,
        refs=table.refs,
        tops=table.tops(),
        cosine=table.cosine(),
        target=table.target(),
        latency=np.array(per_trial, dtype=np.float64),
        sources=tuple(sources.of(sid) for sid in table.ids),
    )


def run_agreement(items: RunItems | None) -> TrialAgreement | None:
    """Test-retest figures where the run has two or more trials of some sample."""
    if items is None or items.trials < 2:
        return None
    return trial_agreement(items.refs, items.tops, {"cosine": items.cosine, "target": items.target})
