"""How big a difference in match rate a benchmark can see: the minimum detectable difference.

Before paying for runs a user wants to know whether N is enough. Two models' match rates on the
same items differ by delta = p10 - p01 (p10: A matches and B does not; p01: the reverse), and the
paired test sees only the discordant items, psi = p10 + p01 of them. Connor (1987) gives the power
of McNemar's test at N pairs; samples cut from one recording inflate the variance by the design
effect 1 + (m - 1) rho (Kish 1965), so the benchmark has N / deff independent pairs' worth of
information. The minimum detectable difference is the delta at which that power reaches 80 %.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.scoring.resample import Clusters

__all__ = [
    "Detectable",
    "adjusted_alpha",
    "design_effect",
    "detectable",
    "icc_anova",
    "independent_discordance",
    "minimum_detectable_difference",
    "power_paired",
]

FloatArray = NDArray[np.float64]
_NORMAL = NormalDist()


def adjusted_alpha(alpha: float, models: int) -> float:
    """The level the strictest of the m = models (models - 1) / 2 pairwise tests must clear:
    Holm's first step, alpha / m (one pair: alpha)."""
    if not 0.0 < alpha < 1.0 or models < 2:
        raise ValueError(f"alpha must be in (0, 1) and models >= 2, got {alpha}, {models}")
    return alpha / (models * (models - 1) // 2)


def power_paired(delta: float, discordance: float, n: float, alpha: float) -> float:
    """Power of the two-sided paired test of two match rates at level alpha over n independent
    pairs (Connor 1987): Phi((sqrt(n) |delta| - z_{1-alpha/2} sqrt(psi)) / sqrt(psi - delta^2)),
    psi the discordant share. 0 where nothing is discordant."""
    if discordance <= 0.0 or n <= 0:
        return 0.0
    spread = discordance - delta * delta
    z = _NORMAL.inv_cdf(1.0 - alpha / 2.0)
    shift = math.sqrt(n) * abs(delta) - z * math.sqrt(discordance)
    if spread <= 0.0:
        return 1.0 if shift > 0 else 0.0
    return _NORMAL.cdf(shift / math.sqrt(spread))


def minimum_detectable_difference(
    n: float,
    discordance: float | Callable[[float], float],
    alpha: float = 0.05,
    power: float = 0.8,
    *,
    upper: float | None = None,
) -> float:
    """The smallest |delta| (a share, not pp) that ``power_paired`` detects with ``power`` at
    ``alpha``, searched over 0 < delta <= ``upper``; NaN where even the largest is not detected
    (N too small). ``discordance`` is psi, fixed, or psi as a function of delta (two models whose
    rates differ by delta); a fixed psi bounds delta by psi itself (|p10 - p01| <= p10 + p01).
    Solved by bisection: the power rises with delta."""
    psi = discordance if callable(discordance) else (lambda _delta: float(discordance))
    high = upper if upper is not None else (None if callable(discordance) else discordance)
    if high is None or not 0.0 < high <= 1.0 or n <= 0:
        return math.nan
    if power_paired(high, psi(high), n, alpha) < power:
        return math.nan
    low = 0.0
    for _ in range(60):  # 2^-60: far below any rate's meaning
        mid = (low + high) / 2.0
        if power_paired(mid, psi(mid), n, alpha) >= power:
            high = mid
        else:
            low = mid
    return high


def independent_discordance(rate: float) -> Callable[[float], float]:
    """psi(delta) of a model at ``rate`` and one at ``rate + delta`` whose errors are independent
    of each other: p10 + p01 = rate (1 - rate - delta) + (rate + delta) (1 - rate)."""
    return lambda delta: rate * (1.0 - rate - delta) + (rate + delta) * (1.0 - rate)


def icc_anova(values: FloatArray, clusters: Clusters) -> float:
    """Intra-cluster correlation by the one-way ANOVA estimator for unequal cluster sizes:
    (MSB - MSW) / (MSB + (m0 - 1) MSW), m0 = (N - sum m_c^2 / N) / (G - 1) (Donner 1986; Snedecor
    & Cochran 1989). Clipped at 0 (negative estimates mean no clustering); 0 where every
    cluster holds one item; NaN with fewer than two clusters."""
    y = np.asarray(values, dtype=np.float64)
    n, g = y.size, clusters.count
    if g < 2:
        return math.nan
    if g == n:
        return 0.0
    sizes = clusters.sizes().astype(np.float64)
    means = clusters.totals(y) / sizes
    grand = float(y.mean())
    msb = float(np.sum(sizes * (means - grand) ** 2)) / (g - 1)
    msw = float(np.sum((y - means[clusters.codes]) ** 2)) / (n - g)
    m0 = (n - float(np.sum(sizes**2)) / n) / (g - 1)
    denominator = msb + (m0 - 1.0) * msw
    if denominator <= 0.0:
        return 0.0
    return float(min(1.0, max(0.0, (msb - msw) / denominator)))


def design_effect(sizes: NDArray[np.integer[Any]], icc: float) -> float:
    """1 + (m - 1) rho with m = sum m_c^2 / N, the size-weighted mean cluster size, which makes
    it exact for the variance of a mean over clusters of unequal sizes (Kish 1965; Eldridge,
    Ashby & Kerry 2006 write it 1 + ((cv^2 + 1) mean - 1) rho)."""
    m = np.asarray(sizes, dtype=np.float64)
    return 1.0 + (float(np.sum(m * m) / np.sum(m)) - 1.0) * icc


@dataclass(frozen=True)
class Detectable:
    """The minimum detectable difference of one benchmark, and what it was computed from."""

    delta_pp: float  # NaN: not detectable at this N
    n: int
    clusters: int  # = n when unclustered
    icc: float
    design_effect: float
    n_effective: float  # n / design effect
    rate: float  # the match rate assumed or observed
    discordance: float  # psi of the pair at the minimum detectable difference
    alpha: float  # the adjusted level
    models: int
    power: float
    source: str  # "observed" or "assumed"

    def to_dict(self) -> dict[str, Any]:
        return {
            k: (None if isinstance(v, float) and math.isnan(v) else v)
            for k, v in self.__dict__.items()
        }

    def describe(self) -> str:
        pairs = self.models * (self.models - 1) // 2
        head = (
            "not detectable at this N" if math.isnan(self.delta_pp) else f"{self.delta_pp:.1f} pp"
        )
        return (
            f"minimum detectable difference in match rate: {head} at {100 * self.power:.0f}% "
            f"power, alpha {self.alpha:.3g} ({self.models} models, {pairs} "
            f"{'pair' if pairs == 1 else 'pairs'}, Holm), N = {self.n} in {self.clusters} "
            f"clusters (ICC {self.icc:.3f}, design effect {self.design_effect:.2f}, "
            f"effective N {self.n_effective:.0f}), {self.source} rate {100 * self.rate:.1f}%"
        )


def detectable(
    sizes: NDArray[np.integer[Any]],
    rate: float,
    icc: float,
    *,
    discordance: float | None = None,
    models: int = 2,
    alpha: float = 0.05,
    power: float = 0.8,
    source: str = "assumed",
) -> Detectable:
    """The minimum detectable difference for a benchmark whose clusters have ``sizes`` (all ones:
    unclustered) and intra-cluster correlation ``icc``: how much better than ``rate`` a second
    model must match to be found. Without a ``discordance``, the two models' errors are taken as
    independent (``independent_discordance``); models that agree more (psi lower) are told apart
    at smaller differences, so this is the conservative assumption."""
    if not 0.0 <= rate <= 1.0 or not 0.0 <= icc <= 1.0:
        raise ValueError(f"rate and icc must be between 0 and 1, got {rate}, {icc}")
    sizes = np.asarray(sizes)
    n = int(sizes.sum())
    deff = design_effect(sizes, icc)
    level = adjusted_alpha(alpha, models)
    if discordance is None:
        psi_of = independent_discordance(rate)
        delta = minimum_detectable_difference(n / deff, psi_of, level, power, upper=1.0 - rate)
        psi = psi_of(0.0 if math.isnan(delta) else delta)
    else:
        psi = discordance
        delta = minimum_detectable_difference(n / deff, psi, level, power)
    return Detectable(
        delta_pp=100.0 * delta,
        n=n,
        clusters=int(sizes.size),
        icc=icc,
        design_effect=deff,
        n_effective=n / deff,
        rate=rate,
        discordance=psi,
        alpha=level,
        models=models,
        power=power,
        source=source,
    )
