"""Each validity gates only what it can spoil: a run whose timing is perturbed (sessions that
lost measurement precision, as a busy machine leaves them) gives exactly the same emotion
metrics; only a session whose model did not hear the stream as sent leaves N."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from duplexsim.report.data import build_report
from duplexsim.run.store import RunStore, read_results
from duplexsim.session import eventloop
from tests.helpers.runs import short_benchmark
from tests.helpers.views import record_run, write_scores

# the replies' tops: two match their reference (s0 Anger, s3 Anger), the others do not
TOPS = {"s0": "Anger", "s1": "Pride", "s2": "Sadness", "s3": "Anger", "s4": "Elation"}


@pytest.fixture(scope="module")
def scored_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("validity")
    run = eventloop.run(record_run(root / "runs" / "v", short_benchmark(root / "b", 5)))
    _, rows = read_results(run)
    assert [r.status for r in rows] == ["ok"] * 5
    write_scores(run, TOPS)
    return run


def perturbed(run: Path, to: Path, **changes: dict[str, object]) -> Path:
    """A copy of ``run`` whose rows say what ``changes`` say (sample id -> fields)."""
    shutil.copytree(run, to)
    store = RunStore(to / "results.sqlite")
    try:
        for row in store.rows():
            if row.sample_id in changes:
                store.put(dataclasses.replace(row, **changes[row.sample_id]))
    finally:
        store.close()
    return to


IMPRECISE = {"timing_valid": False, "input_faithful": True, "fidelity_lost": None}


def test_sessions_that_lost_precision_leave_every_emotion_metric_exactly_as_it_was(
    scored_run: Path, tmp_path: Path
) -> None:
    base = build_report(scored_run, "prosody")
    _, rows = read_results(scored_run)
    for k, ids in enumerate((["s1"], ["s0", "s2"], ["s0", "s1", "s2", "s3", "s4"])):
        noisy = perturbed(
            scored_run,
            tmp_path / f"noisy{k}",
            **{i: {**IMPRECISE, "timing_invalid": f"send p99 5.{k} ms > 5 ms"} for i in ids},
        )
        report = build_report(noisy, "prosody")
        # every emotion metric (match, cosine, target, per emotion and language, intervals,
        # baseline), exactly
        assert report.metrics.to_dict() == base.metrics.to_dict()
        assert report.metrics.n == 5 and report.metrics.match_rate == pytest.approx(0.4)
        # only the latency figures and the counts tell the runs apart
        assert report.timing.faithful == 5
        kept = sum(r.precise for r in rows if r.sample_id not in ids)
        assert report.timing.precise == report.timing.latency_n == kept


def test_a_session_that_lost_input_fidelity_leaves_n_and_only_itself(
    scored_run: Path, tmp_path: Path
) -> None:
    lost = {"timing_valid": False, "input_faithful": False, "fidelity_lost": "a frame 80 ms late"}
    run = perturbed(scored_run, tmp_path / "lost", s3=lost)
    m = build_report(run, "prosody").metrics
    assert m.n == 4 and m.out_of_n == {"input fidelity lost": ("s3",)}
    assert (m.per_emotion["Anger"].n, m.per_emotion["Anger"].matches) == (1, 1)  # s0 only
    base = build_report(scored_run, "prosody").metrics
    # the others keep their scores: the model's register is judged over all its replies
    alone = _cosine_of(scored_run, "s3", tmp_path / "alone")
    assert m.cosine == pytest.approx((base.cosine * 5 - alone) / 4)


def test_a_run_recorded_before_the_split_reads_as_it_did(scored_run: Path, tmp_path: Path) -> None:
    old = {"timing_valid": False, "input_faithful": None, "timing_invalid": "send p99 6 ms > 5 ms"}
    run = perturbed(scored_run, tmp_path / "old", s1=old)
    m = build_report(run, "prosody").metrics
    assert m.n == 4 and m.out_of_n == {"timing invalid": ("s1",)}


def _cosine_of(run: Path, sample_id: str, to: Path) -> float:
    """One sample's cosine, as the metrics see it (the run with only that sample in N)."""
    others = {i: {"timing_valid": False, "input_faithful": False} for i in TOPS if i != sample_id}
    alone = perturbed(run, to, **others)
    return build_report(alone, "prosody").metrics.cosine
