"""The minimum detectable difference (scoring/power.py): the formula's algebra, the intra-cluster
correlation and design effect on simulated data, and simulated pairs of models whose true
difference is the predicted minimum: detected about 80 % of the time."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from duplexsim.scoring.paired import NO_REPLY, compare_match, top_shares
from duplexsim.scoring.power import (
    adjusted_alpha,
    design_effect,
    detectable,
    icc_anova,
    minimum_detectable_difference,
    power_paired,
)
from duplexsim.scoring.resample import Clusters, Resampling, rngs, sign_flip_test

Z = NormalDist().inv_cdf


def connor_n(delta: float, psi: float, alpha: float, power: float) -> float:
    """Connor (1987), eq. 3: pairs needed for McNemar's test."""
    z_a, z_b = Z(1 - alpha / 2), Z(power)
    return (z_a * math.sqrt(psi) + z_b * math.sqrt(psi - delta**2)) ** 2 / delta**2


@pytest.mark.parametrize(("n", "psi"), [(1005, 0.3), (200, 0.1), (5000, 0.45), (60, 0.5)])
def test_mdd_inverts_connors_sample_size(n: int, psi: float) -> None:
    delta = minimum_detectable_difference(n, psi, 0.05, 0.8)
    assert power_paired(delta, psi, n, 0.05) == pytest.approx(0.8, abs=1e-9)
    assert connor_n(delta, psi, 0.05, 0.8) == pytest.approx(n, rel=1e-6)


def test_mdd_edges() -> None:
    assert math.isnan(minimum_detectable_difference(2, 0.3))  # N far too small
    assert math.isnan(minimum_detectable_difference(100, 0.0))  # two identical models
    assert power_paired(0.0, 0.3, 1000, 0.05) < 0.05
    assert adjusted_alpha(0.05, 2) == 0.05 and adjusted_alpha(0.05, 10) == pytest.approx(0.05 / 45)
    with pytest.raises(ValueError):
        adjusted_alpha(0.05, 1)


def test_icc_anova_equal_sizes_textbook() -> None:
    # three clusters of two: means 1.5, 3.5, 5.5; MSB = 2 * (4 + 0 + 4) / 2 = 8, MSW = 1.5 / 3
    # = 0.5; ICC = (8 - 0.5) / (8 + 0.5) = 15 / 17
    y = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert icc_anova(y, Clusters.of(["a", "a", "b", "b", "c", "c"], 6)) == pytest.approx(15 / 17)
    assert icc_anova(y, Clusters.of(None, 6)) == 0.0
    assert math.isnan(icc_anova(y, Clusters.of(["a"] * 6, 6)))


def test_icc_and_design_effect_on_simulated_clusters() -> None:
    """Random-intercept data with ICC 0.3 and clusters of 1 to 5: the estimator recovers the ICC,
    and the variance of the mean over many benchmarks is the design effect times sigma^2 / N."""
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 6, 400)
    codes = np.repeat(np.arange(sizes.size), sizes)
    clusters = Clusters.of([str(c) for c in codes], codes.size)
    rho = 0.3
    means, estimates = [], []
    for _ in range(400):
        y = rng.normal(0, math.sqrt(rho), sizes.size)[codes] + rng.normal(
            0, math.sqrt(1 - rho), codes.size
        )
        means.append(y.mean())
        estimates.append(icc_anova(y, clusters))
    assert np.mean(estimates) == pytest.approx(rho, abs=0.02)
    ratio = np.var(means) / (1.0 / codes.size)
    assert ratio == pytest.approx(design_effect(sizes, rho), rel=0.15)


def test_detectable_moves_the_right_way() -> None:
    ones = np.ones(1005, dtype=int)
    base = detectable(ones, 0.3, 0.0)
    assert base.design_effect == 1.0 and base.n_effective == 1005 and base.clusters == 1005
    assert 5.0 < base.delta_pp < 7.0  # 2.8 * sqrt(0.42 / 1005) = 5.7 pp
    calls = np.array([2] * 438 + [1] * 129)  # 1,005 samples from 567 calls, as MIRRORING's
    clustered = detectable(calls, 0.3, 0.2)
    assert clustered.design_effect == pytest.approx(1 + (np.sum(calls**2) / 1005 - 1) * 0.2)
    assert clustered.delta_pp > base.delta_pp
    assert detectable(ones, 0.3, 0.0, models=10).delta_pp > base.delta_pp
    assert detectable(np.ones(4000, dtype=int), 0.3, 0.0).delta_pp < base.delta_pp
    assert math.isnan(detectable(np.ones(3, dtype=int), 0.3, 0.0).delta_pp)
    assert "5.7 pp" in base.describe() or f"{base.delta_pp:.1f} pp" in base.describe()
    assert base.to_dict()["n"] == 1005


def scored_run(n: int, rate: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A run's references and top emotions: the top is the reference with probability ``rate``,
    otherwise another emotion or no reply."""
    rng = np.random.default_rng(seed)
    refs = rng.integers(0, 12, n)
    other = (refs + rng.integers(1, 13, n)) % 13  # anything but the reference, 12 = no reply
    return refs, np.where(rng.random(n) < rate, refs, other)


def flipped_copy(
    refs: np.ndarray, tops: np.ndarray, q: float, r: float, rng: np.random.Generator
) -> np.ndarray:
    """B: A's tops with each match turned into a miss with probability q and each miss into a
    match with probability r."""
    match = tops == refs
    u = rng.random(tops.size)
    miss = (refs + 1) % 12
    return np.where(match & (u < q), miss, np.where(~match & (u < r), refs, tops))


def test_power_simulated_pair_unclustered(record_property: pytest.RecordProperty) -> None:
    """A scored run and copies with a known share of matches flipped, the true difference set to
    the predicted minimum detectable one: McNemar finds it at about the predicted 80 %."""
    n, psi, alpha = 1005, 0.25, 0.05
    refs, tops = scored_run(n, 0.35, seed=3)
    rate = float(np.mean(tops == refs))
    delta = minimum_detectable_difference(n, psi, alpha, 0.8)
    q, r = (psi + delta) / 2 / rate, (psi - delta) / 2 / (1 - rate)
    rng = np.random.default_rng(17)
    options = Resampling(bootstrap=1)
    sims, found = 2000, 0
    for _ in range(sims):
        items = rng.integers(0, n, n)  # a new benchmark drawn from the run's items
        copy = flipped_copy(refs[items], tops[items], q, r, rng)
        out = compare_match(
            refs[items], top_shares(tops[items]), top_shares(copy), Clusters.of(None, n), options
        )
        found += out.difference.p_value <= alpha
    rate_found = found / sims
    record_property("power_unclustered_detection", rate_found)
    print(f"true difference {100 * delta:.2f} pp (predicted power 0.80): detected {rate_found:.3f}")
    assert 0.75 <= rate_found <= 0.85


def test_power_simulated_pair_clustered(record_property: pytest.RecordProperty) -> None:
    """Clusters of 1 to 4 samples whose recordings favour one model or the other: at the minimum
    detectable difference with the design effect, the cluster sign-flip test finds the
    difference about 80 % of the time."""
    g, psi, spread, alpha = 300, 0.3, 0.2, 0.05
    mean_size = (1 + 4 + 9 + 16) / (1 + 2 + 3 + 4)  # E[m^2] / E[m] for sizes uniform on 1..4
    n = 2.5 * g
    delta = 0.05
    for _ in range(30):  # the ICC depends on delta: iterate to the fixed point
        icc = spread**2 / (psi - delta**2)
        delta = minimum_detectable_difference(n / (1 + (mean_size - 1) * icc), psi, alpha, 0.8)
    rng = np.random.default_rng(5)
    perm = rngs(0)[1]
    options = Resampling(permutations=999)
    sims, found = 1000, 0
    for _ in range(sims):
        sizes = rng.integers(1, 5, g)
        codes = np.repeat(np.arange(g), sizes)
        shift = delta + spread * rng.choice((-1.0, 1.0), g)
        p10, p01 = (psi + shift) / 2, (psi - shift) / 2
        u = rng.random(codes.size)
        d = (u < p10[codes]).astype(float) - ((u >= p10[codes]) & (u < (p10 + p01)[codes]))
        found += sign_flip_test(np.bincount(codes, weights=d), perm, options).p_value <= alpha
    rate_found = found / sims
    record_property("power_clustered_detection", rate_found)
    print(
        f"clustered: true difference {100 * delta:.2f} pp, ICC {icc:.3f}: detected {rate_found:.3f}"
    )
    assert 0.74 <= rate_found <= 0.86


def test_flipped_copy_has_the_known_difference() -> None:
    refs, tops = scored_run(20_000, 0.35, seed=1)
    copy = flipped_copy(refs, tops, 0.2, 0.05, np.random.default_rng(0))
    a, b = tops == refs, copy == refs
    assert np.mean(a & ~b) == pytest.approx(0.35 * 0.2, abs=0.01)
    assert np.mean(~a & b) == pytest.approx(0.65 * 0.05, abs=0.01)
    assert NO_REPLY in tops  # non-replies are misses like any other


def test_independent_models_at_the_detectable_difference(
    record_property: pytest.RecordProperty,
) -> None:
    """What ``detectable`` promises from assumed rates: a second model matching delta more often
    than the rate, its errors independent of the first's, is found about 80 % of the time."""
    from duplexsim.scoring.paired import mcnemar_exact
    from duplexsim.scoring.power import independent_discordance

    n, rate = 1005, 0.3
    found = detectable(np.ones(n, dtype=int), rate, 0.0)
    delta = found.delta_pp / 100
    assert found.discordance == pytest.approx(independent_discordance(rate)(delta))
    rng = np.random.default_rng(23)
    sims = 2000
    better = rng.random((sims, n)) < rate + delta
    base = rng.random((sims, n)) < rate
    b = np.count_nonzero(better & ~base, axis=1)
    c = np.count_nonzero(~better & base, axis=1)
    rate_found = np.mean([mcnemar_exact(int(x), int(y)) <= 0.05 for x, y in zip(b, c, strict=True)])
    record_property("power_independent_detection", rate_found)
    print(f"independent errors: {found.delta_pp:.2f} pp over {rate:.0%}: detected {rate_found:.3f}")
    assert 0.75 <= rate_found <= 0.85
