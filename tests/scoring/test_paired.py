"""Paired comparisons (scoring/paired.py, scoring/resample.py) against textbook values, scipy and
brute-force enumerations, and the cluster bootstrap's coverage on simulated clustered data."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from duplexsim.core.emotions import EMOTION_NAMES
from duplexsim.scoring.metrics import SampleScores, compute_metrics
from duplexsim.scoring.paired import (
    MISSING,
    NO_REPLY,
    compare_match,
    compare_means,
    compare_medians,
    mcnemar_exact,
    top_shares,
)
from duplexsim.scoring.resample import Clusters, Resampling, cluster_robust_se, rngs, sign_flip_test


def brute_sign_flip(d: list[float]) -> float:
    """Every one of the 2^n sign vectors, zeros included: share with |sum| >= |observed|."""
    observed = abs(sum(d))
    hits = sum(
        abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= observed - 1e-9
        for signs in itertools.product((1, -1), repeat=len(d))
    )
    return hits / 2 ** len(d)


def brute_mcnemar(b: int, c: int) -> float:
    """Two-sided exact test as the sum of the probabilities of every split of the b + c
    discordant pairs at most as likely as the observed one (the binomial is symmetric)."""
    n = b + c
    probs = [math.comb(n, k) / 2**n for k in range(n + 1)]
    return min(1.0, sum(p for p in probs if p <= probs[b] * (1 + 1e-12)))


# ---------------------------------------------------------------- McNemar


def test_mcnemar_by_hand() -> None:
    # b = 2, c = 8: 2 * (C(10,0) + C(10,1) + C(10,2)) / 2^10 = 2 * 56 / 1024
    assert mcnemar_exact(2, 8) == pytest.approx(112 / 1024)
    assert mcnemar_exact(8, 2) == mcnemar_exact(2, 8)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 5) == 1.0  # the tail doubled passes 1: clipped
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)


@pytest.mark.parametrize(("b", "c"), [(b, c) for b in range(13) for c in range(13)])
def test_mcnemar_small_tables(b: int, c: int) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(brute_mcnemar(b, c), rel=1e-12)


def test_mcnemar_against_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for b, c in [(3, 11), (40, 62), (150, 190), (0, 25), (500, 430)]:
        expected = stats.binomtest(min(b, c), b + c, 0.5).pvalue
        assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9)


def test_mcnemar_rejects_negative() -> None:
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)


# ---------------------------------------------------------------- sign-flip permutation


@pytest.mark.parametrize(
    "d",
    [
        [1.0, 2.0, -0.5, 3.0],
        [0.3, 0.3, 0.3, -0.3, 0.0, 1.1],
        [2.0, -1.0, -1.0, 0.5, 0.25, 4.0, -3.0, 0.0, 1.5, -0.75],
        [0.0, 0.0],
        [-1.0],
    ],
)
def test_sign_flip_exact_matches_enumeration(d: list[float]) -> None:
    flip = sign_flip_test(np.array(d), rngs(0)[1])
    assert flip.exact
    assert flip.p_value == pytest.approx(brute_sign_flip(d), abs=1e-12)


def test_sign_flip_on_binary_differences_is_mcnemar() -> None:
    for b, c in [(3, 9), (7, 7), (1, 12), (0, 5)]:
        d = np.array([1.0] * b + [-1.0] * c + [0.0] * 20)
        flip = sign_flip_test(d, rngs(0)[1])
        assert flip.p_value == pytest.approx(mcnemar_exact(b, c), rel=1e-12)


def test_sign_flip_monte_carlo_near_exact_and_seeded() -> None:
    d = np.random.default_rng(5).normal(0.3, 1.0, 18)
    exact = sign_flip_test(d, rngs(0)[1], Resampling(exact_limit=20))
    assert exact.exact and exact.arrangements == 2**18
    options = Resampling(permutations=20_000)
    mc = sign_flip_test(d, rngs(0)[1], options)
    assert not mc.exact and mc.arrangements == 20_000
    se = math.sqrt(exact.p_value * (1 - exact.p_value) / 20_000)
    assert abs(mc.p_value - exact.p_value) < 4 * se + 1e-4
    assert sign_flip_test(d, rngs(0)[1], options) == mc  # same seed, same draws
    assert mc.p_value > 0


def test_paired_permutation_against_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.5, 0.2, 9), rng.normal(0.45, 0.2, 9)
    unclustered = Clusters.of(None, 9)
    ours = compare_means("cosine", a, b, unclustered)
    theirs = stats.permutation_test(
        (a, b),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        vectorized=True,
        alternative="two-sided",
    )
    assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9)
    assert ours.test == "exact sign-flip (512 arrangements)"


def test_cluster_sign_flip_flips_whole_clusters() -> None:
    a = np.array([0.9, 0.8, 0.7, 0.2, 0.6, 0.5])
    b = np.array([0.5, 0.6, 0.6, 0.4, 0.1, 0.5])
    clusters = Clusters.of(["x", "x", "y", "y", "z", None], 6)
    out = compare_means("target", a, b, clusters)
    # cluster totals: x 0.6, y -0.1, z 0.5 (the lone item: 0, left out)
    assert out.p_value == pytest.approx(brute_sign_flip([0.6, -0.1, 0.5]))
    assert out.test.startswith("cluster exact sign-flip")


# ---------------------------------------------------------------- estimates and intervals


def test_unclustered_se_is_millers_paired_formula() -> None:
    rng = np.random.default_rng(8)
    a = rng.random(200)
    b = 0.6 * a + 0.4 * rng.random(200)
    n = a.size
    cov = np.cov(a, b, ddof=1)[0, 1]
    miller = math.sqrt(a.var(ddof=1) / n + b.var(ddof=1) / n - 2 * cov / n)
    assert cluster_robust_se(a - b, Clusters.of(None, n)) == pytest.approx(miller)


def test_median_difference_and_sign_test() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(2)
    a = rng.normal(0.6, 0.1, 60)
    b = a - rng.normal(0.02, 0.05, 60)
    a[[3, 10]] = np.nan  # no precise latency in A for two sessions
    b[20] = np.nan
    out = compare_medians("latency_ms", a, b, Clusters.of(None, 60))
    d = (a - b)[np.isfinite(a - b)]
    assert out.n == 57
    assert out.estimate == pytest.approx(float(np.median(d)))
    expected = stats.binomtest(int((d > 0).sum()), int((d != 0).sum()), 0.5).pvalue
    assert out.p_value == pytest.approx(expected, rel=1e-9)
    assert out.low <= out.estimate <= out.high


def test_weighted_bootstrap_median_is_the_resampled_median() -> None:
    from duplexsim.scoring.paired import _weighted_medians

    rng = np.random.default_rng(4)
    d = rng.normal(0, 1, 9)
    for _ in range(50):
        w = rng.integers(0, 4, (1, 9))
        if w.sum() == 0:
            continue
        assert _weighted_medians(d, w)[0] == pytest.approx(float(np.median(np.repeat(d, w[0]))))


def synthetic_run(n: int, strength: float, seed: int) -> list[SampleScores]:
    rng = np.random.default_rng(seed)
    refs = rng.integers(0, 12, n)
    eye = np.eye(12)
    replies = rng.random((n, 12)) * rng.dirichlet(np.ones(12)) + strength * eye[refs]
    return [
        SampleScores(
            f"s{i:03d}",
            EMOTION_NAMES[refs[i]],
            "en",
            eye[refs[i]],
            None if i % 9 == 0 else replies[i],
        )
        for i in range(n)
    ]


def tops_of(samples: list[SampleScores]) -> np.ndarray:
    return np.array([NO_REPLY if s.reply is None else int(np.argmax(s.reply)) for s in samples])


def test_match_comparison_agrees_with_the_metrics() -> None:
    """Rates and lifts are the report's own (lift over the exact shuffled expectation)."""
    run_a, run_b = synthetic_run(150, 0.15, 1), synthetic_run(150, 0.05, 1)
    refs = np.array([EMOTION_NAMES.index(s.emotion) for s in run_a])
    out = compare_match(
        refs,
        top_shares(tops_of(run_a)),
        top_shares(tops_of(run_b)),
        Clusters.of(None, 150),
        Resampling(bootstrap=300),
    )
    ma, mb = compute_metrics(run_a), compute_metrics(run_b)
    assert out.rate_a == pytest.approx(ma.match_rate) and out.rate_b == pytest.approx(mb.match_rate)
    assert out.lift_a == pytest.approx(100 * (ma.match_rate - ma.shuffled_expected))
    assert out.lift_b == pytest.approx(100 * (mb.match_rate - mb.shuffled_expected))
    assert out.difference.estimate == pytest.approx(100 * (ma.match_rate - mb.match_rate))
    assert out.b is not None and out.c is not None
    assert out.difference.estimate == pytest.approx(100 * (out.b - out.c) / 150)
    assert out.difference.p_value == mcnemar_exact(out.b, out.c)
    assert out.difference.test == "McNemar exact"
    assert out.difference.low < out.difference.estimate < out.difference.high
    assert out.lift.low < out.lift.estimate < out.lift.high


def test_top_shares_of_trials() -> None:
    tops = np.array([[1, 1, 2], [NO_REPLY, 3, MISSING], [MISSING, MISSING, MISSING]])
    shares = top_shares(tops)
    assert shares[0, 1] == pytest.approx(2 / 3) and shares[0, 2] == pytest.approx(1 / 3)
    assert shares[1, NO_REPLY] == 0.5 and shares[1, 3] == 0.5
    assert not shares[2].any()
    with pytest.raises(ValueError):
        top_shares(np.array([13]))


def test_trials_give_a_permutation_p_not_mcnemar() -> None:
    refs = np.array([0, 1, 2, 3, 4, 5])
    a = top_shares(np.array([[0, 0], [1, 2], [2, 2], [3, 3], [5, 4], [5, 5]]))
    b = top_shares(np.array([[1, 1], [1, 1], [0, 0], [3, 0], [4, 4], [0, 5]]))
    out = compare_match(refs, a, b, Clusters.of(None, 6), Resampling(bootstrap=50))
    assert out.b is None and out.mcnemar_p is None
    # per-item match means: a 1, .5, 1, 1, .5, 1; b 0, 1, 0, .5, 1, .5
    d = [1.0, -0.5, 1.0, 0.5, -0.5, 0.5]
    assert out.difference.estimate == pytest.approx(100 * sum(d) / 6)
    assert out.difference.p_value == pytest.approx(brute_sign_flip(d))


def test_clusters() -> None:
    c = Clusters.of(["a", None, "a", "b", None], 5)
    assert c.clustered and c.count == 4
    assert list(c.sizes()) == [2, 1, 1, 1]
    assert Clusters.of([None, None], 2).describe() == "unclustered (no source_id)"
    assert c.describe() == "clustered by source_id (4 clusters)"
    lone = Clusters.of(["a", "b", None], 3)  # every source one sample: nothing to cluster
    assert not lone.clustered and lone.describe() == "unclustered (each source_id holds one sample)"
    kept = c.subset(np.array([True, True, False, True, False]))  # a, item 1, b: singletons now
    assert not kept.clustered and kept.count == 3 and kept.singletons
    with pytest.raises(ValueError):
        Clusters.of(["a"], 2)
    with pytest.raises(ValueError):
        Resampling(bootstrap=0)


# ---------------------------------------------------------------- coverage


def simulated_benchmark(rng: np.random.Generator, clusters: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-item match of A and B on one benchmark of ``clusters`` recordings of 1 to 6 samples.
    A recording either favours A (A alone matches with p 0.5, B alone with 0.05) or B (0.05,
    0.35), each with probability 1/2: the true difference is 0.5 * 0.45 - 0.5 * 0.30 = 0.075."""
    sizes = rng.integers(1, 7, clusters)
    favours_a = rng.random(clusters) < 0.5
    p10 = np.where(favours_a, 0.5, 0.05)
    p01 = np.where(favours_a, 0.05, 0.35)
    codes = np.repeat(np.arange(clusters), sizes)
    u = rng.random(codes.size)
    d = (u < p10[codes]).astype(float) - ((u >= p10[codes]) & (u < (p10 + p01)[codes]))
    return d, codes


TRUE_DIFFERENCE = 0.075


def test_cluster_bootstrap_coverage(record_property: pytest.RecordProperty) -> None:
    """About 95 % of cluster-bootstrap intervals contain the true difference; intervals that
    ignore the clusters are too narrow on the same data."""
    rng = np.random.default_rng(2024)
    options = Resampling(bootstrap=1000, permutations=1)
    benchmarks = 2000
    covered = {True: 0, False: 0}
    for _ in range(benchmarks):
        d, codes = simulated_benchmark(rng, clusters=100)
        ids = [str(c) for c in codes]
        for clustered in (True, False):
            grouping = Clusters.of(ids if clustered else None, d.size)
            out = compare_means("match", d, np.zeros_like(d), grouping, options)
            covered[clustered] += out.low <= TRUE_DIFFERENCE <= out.high
    clustered_rate = covered[True] / benchmarks
    naive_rate = covered[False] / benchmarks
    record_property("cluster_bootstrap_coverage", clustered_rate)
    record_property("unclustered_bootstrap_coverage", naive_rate)
    print(
        f"coverage over {benchmarks} simulated benchmarks: cluster bootstrap "
        f"{clustered_rate:.3f}, unclustered {naive_rate:.3f}"
    )
    assert 0.925 <= clustered_rate <= 0.975
    assert naive_rate < clustered_rate - 0.04
