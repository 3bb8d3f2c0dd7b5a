"""Every pair of runs (scoring/compare.py): alignment on the items in N for both, Holm over the
pairs, rank bands, clustering by source id and trials."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from duplexsim.scoring.compare import RunItems, compare_pair, compare_runs
from duplexsim.scoring.paired import MISSING, NO_REPLY, mcnemar_exact
from duplexsim.scoring.ranking import holm
from duplexsim.scoring.resample import Resampling

FAST = Resampling(bootstrap=200, permutations=2000)


def run(
    name: str,
    rate: float,
    n: int = 300,
    *,
    seed: int,
    trials: int = 1,
    sources: bool = False,
    drop: int = 0,
) -> RunItems:
    """A run on a benchmark of n items (references fixed by seed 0) whose top matches the
    reference with probability ``rate``; the first ``drop`` items are out of its N."""
    refs = np.random.default_rng(0).integers(0, 12, n)
    rng = np.random.default_rng(seed)
    other = (refs[:, None] + rng.integers(1, 13, (n, trials))) % 13
    tops = np.where(rng.random((n, trials)) < rate, refs[:, None], other)
    keep = slice(drop, n)
    return RunItems(
        name=name,
        ids=tuple(f"s{i:03d}" for i in range(n))[keep],
        refs=refs[keep],
        tops=tops[keep],
        cosine=(0.5 + 0.3 * (tops == refs[:, None]))[keep],
        target=rng.random((n, trials))[keep],
        latency=rng.normal(0.8, 0.1, (n, trials))[keep],
        sources=tuple(f"call{i // 3}" if sources else None for i in range(n))[keep],
    )


def test_pair_on_common_items() -> None:
    a, b = run("a", 0.5, seed=1, drop=10), run("b", 0.3, seed=2)
    out = compare_pair(a, b, FAST)
    assert out.n == 290 and out.clusters == "unclustered (no source_id)"
    match_a = (a.tops[:, 0] == a.refs).astype(float)
    match_b = (b.tops[10:, 0] == b.refs[10:]).astype(float)
    assert out.match.difference.estimate == pytest.approx(100 * np.mean(match_a - match_b))
    assert out.match.b is not None and out.match.c is not None
    assert out.match.difference.p_value == mcnemar_exact(out.match.b, out.match.c)
    assert out.latency.n == 290 and out.trials == (1, 1)
    assert out.cosine.estimate == pytest.approx(0.3 * np.mean(match_a - match_b))


def test_clustered_by_source_id() -> None:
    out = compare_pair(run("a", 0.5, seed=1, sources=True), run("b", 0.3, seed=2), FAST)
    assert out.clusters == "clustered by source_id (100 clusters)"
    assert out.match.difference.test.startswith("cluster Monte Carlo sign-flip")
    assert out.match.mcnemar_p is not None  # still shown, beside the clustered test


def test_runs_of_different_benchmarks_refused() -> None:
    a = run("a", 0.5, seed=1)
    b = RunItems("b", a.ids, (a.refs + 1) % 12, a.tops, a.cosine, a.target, a.latency, a.sources)
    with pytest.raises(ValueError, match="not runs of one benchmark"):
        compare_pair(a, b)
    c = run("c", 0.5, seed=1, drop=300)
    with pytest.raises(ValueError, match="no sample in N in common"):
        compare_pair(a, c)


def test_every_pair_holm_and_bands() -> None:
    runs = [run("weak", 0.1, seed=3), run("strong", 0.6, seed=1), run("strong2", 0.58, seed=2)]
    out = compare_runs(runs, FAST)
    assert [(p.a, p.b) for p in out.pairs] == [
        ("strong", "strong2"),
        ("strong", "weak"),
        ("strong2", "weak"),
    ]
    raw = [p.match.difference.p_value for p in out.pairs]
    assert [p.adjusted["match"] for p in out.pairs] == pytest.approx(holm(raw))
    assert out.bands == {"strong": 1, "strong2": 1, "weak": 2}
    text = json.dumps(out.to_dict(), allow_nan=False)
    assert '"adjustment": "holm"' in text


def test_trials_use_item_means() -> None:
    a = run("a", 0.5, seed=1, trials=3)
    tops = a.tops.copy()
    tops[0, 1] = MISSING
    a = RunItems("a", a.ids, a.refs, tops, a.cosine, a.target, a.latency, a.sources)
    b = run("b", 0.3, seed=2, trials=2)
    out = compare_pair(a, b, FAST)
    assert out.trials == (3, 2)
    assert out.match.b is None and out.match.mcnemar_p is None
    assert "sign-flip" in out.match.difference.test
    counted = tops != MISSING
    per_item = np.sum((tops == a.refs[:, None]) & counted, axis=1) / counted.sum(axis=1)
    expected = per_item.mean() - np.mean(b.tops == b.refs[:, None])
    assert out.match.difference.estimate == pytest.approx(100 * expected)


def test_silent_run_against_itself() -> None:
    silent = run("silent", 0.0, seed=1)
    silent = RunItems(
        "silent",
        silent.ids,
        silent.refs,
        np.full_like(silent.tops, NO_REPLY),
        np.zeros_like(silent.cosine),
        np.zeros_like(silent.target),
        np.full_like(silent.latency, np.nan),
        silent.sources,
    )
    twin = RunItems("twin", *list(silent.__dict__.values())[1:])
    out = compare_pair(silent, twin, FAST)
    assert out.match.difference.estimate == 0 and out.match.difference.p_value == 1.0
    assert out.match.lift.estimate == 0 and out.match.lift_a == 0
    assert out.latency.n == 0 and math.isnan(out.latency.estimate)
    assert out.cosine.p_value == 1.0


def test_duplicate_names_and_ids_refused() -> None:
    a = run("a", 0.5, seed=1)
    with pytest.raises(ValueError):
        compare_runs([a, a])
    with pytest.raises(ValueError):
        RunItems(
            "x",
            ("s1", "s1"),
            a.refs[:2],
            a.tops[:2],
            a.cosine[:2],
            a.target[:2],
            a.latency[:2],
            (None, None),
        )
