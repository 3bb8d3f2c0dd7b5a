"""The MIRRORING metrics, pure numpy: match rate, shuffled baseline, lift, p-value, cosine, target
and reference scores, per-emotion / per-language breakdowns and bootstrap confidence intervals.

The definitions are pinned in ARCHITECTURE.md ("MIRRORING metrics, pinned"); ``docs/metrics.md``
spells out every formula and convention (non-replies, failures, ties, p-value, bootstrap, seeds).
No I/O and no clock: the same samples and seed always give the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.emotions import EMOTION_NAMES
from duplexsim.scoring.items import (
    NO_REPLY,
    ItemTable,
    SampleScores,
    cosines,
    tabulate,
    top_emotions,
)
from duplexsim.scoring.paired import top_shares
from duplexsim.scoring.trials import item_means

__all__ = [
    "CI_METRICS",
    "NO_REPLY",
    "GroupRate",
    "Interval",
    "MirroringMetrics",
    "SampleScores",
    "compute_many",
    "compute_metrics",
    "cosines",
    "expected_match_rate",
    "shuffled_match_counts",
    "top_emotions",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]
BoolArray = NDArray[np.bool_]

N_EMOTIONS = len(EMOTION_NAMES)
CI_METRICS = ("match_rate", "lift_pp", "cosine", "target_score")
CI_PERCENTILES = (2.5, 97.5)  # 95 % percentile-bootstrap interval
K = TypeVar("K", str, tuple[str, str])  # a breakdown's key: a name, or (emotion, language)


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


@dataclass(frozen=True)
class GroupRate:
    n: int
    matches: float  # an int without trials; with trials, each sample's share of matching trials
    match_rate: float


@dataclass(frozen=True)
class MirroringMetrics:
    n: int  # samples that ran to completion: not failed, reference scored
    n_replied: int
    reply_rate: float
    n_failed: int
    n_excluded: int  # not failed, but the reference could not be scored
    match_rate: float
    shuffled_baseline: float  # mean over the seeded permutations
    shuffled_expected: float  # its exact expectation, sum_e n_top(e) n_ref(e) / N^2
    lift_pp: float  # 100 * (match_rate - shuffled_baseline)
    p_value: float  # share of permutations with match rate >= the observed one
    cosine: float
    target_score: float
    ref_score: float
    per_emotion: dict[str, GroupRate]  # by reference emotion, EMOTIONS order, present only
    per_language: dict[str, GroupRate]  # sorted by language code
    per_emotion_language: dict[tuple[str, str], GroupRate]  # (emotion, language), present only
    predicted_counts: dict[str, float]  # n_top(e) for all 12 emotions; non-replies not counted
    ci: dict[str, Interval]  # keys CI_METRICS
    permutations: int
    bootstrap: int
    seed: int
    failed_ids: tuple[str, ...] = ()
    excluded_ids: tuple[str, ...] = ()
    # every session out of N, by reason ("failed", "unscored" and the callers' own), with its ids
    out_of_n: dict[str, tuple[str, ...]] = field(default_factory=dict)
    trials: int = 1  # the most trials in N of any sample (1: each sample run once)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: plain ints, floats, strings, lists and dicts. NaN (only when N = 0) becomes
        None, so ``json.dumps(..., allow_nan=False)`` always succeeds and writes ``null``."""
        return {
            "n": self.n,
            "n_replied": self.n_replied,
            "reply_rate": _num(self.reply_rate),
            "n_failed": self.n_failed,
            "n_excluded": self.n_excluded,
            "match_rate": _num(self.match_rate),
            "shuffled_baseline": _num(self.shuffled_baseline),
            "shuffled_expected": _num(self.shuffled_expected),
            "lift_pp": _num(self.lift_pp),
            "p_value": _num(self.p_value),
            "cosine": _num(self.cosine),
            "target_score": _num(self.target_score),
            "ref_score": _num(self.ref_score),
            "per_emotion": {k: _group_dict(v) for k, v in self.per_emotion.items()},
            "per_language": {k: _group_dict(v) for k, v in self.per_language.items()},
            "per_emotion_language": _nested(self.per_emotion_language),
            "predicted_counts": dict(self.predicted_counts),
            "ci": {k: {"low": _num(v.low), "high": _num(v.high)} for k, v in self.ci.items()},
            "permutations": self.permutations,
            "bootstrap": self.bootstrap,
            "seed": self.seed,
            "failed_ids": list(self.failed_ids),
            "excluded_ids": list(self.excluded_ids),
            "out_of_n": {k: list(v) for k, v in self.out_of_n.items()},
            "trials": self.trials,
        }


def _num(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def _group_dict(g: GroupRate) -> dict[str, Any]:
    return {"n": g.n, "matches": g.matches, "match_rate": _num(g.match_rate)}


def _nested(cells: Mapping[tuple[str, str], GroupRate]) -> dict[str, dict[str, Any]]:
    """{(emotion, language): g} as {emotion: {language: g}} (JSON keys must be strings)."""
    out: dict[str, dict[str, Any]] = {}
    for (emotion, language), g in cells.items():
        out.setdefault(emotion, {})[language] = _group_dict(g)
    return out


def _check_args(permutations: int, bootstrap: int, seed: int) -> tuple[int, int, int]:
    """The three as plain ints (numpy integers accepted); ValueError for anything else."""
    out: list[int] = []
    checks = (("permutations", permutations, 1), ("bootstrap", bootstrap, 1), ("seed", seed, 0))
    for name, value, least in checks:
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
        out.append(int(value))
    return out[0], out[1], out[2]


# ---------------------------------------------------------------- per-sample quantities


def expected_match_rate(top_counts: FloatArray, ref_counts: FloatArray, n: int) -> FloatArray:
    """Exact expectation of the shuffled match rate, sum_e n_top(e) n_ref(e) / N^2, over the last
    axis (12 emotions); works on one count vector or on one row per bootstrap resample."""
    out: FloatArray = np.sum(top_counts * ref_counts, axis=-1) / float(n * n)
    return out


def _counts(codes: IntArray, size: int) -> IntArray:
    out: IntArray = np.bincount(codes, minlength=size)[:size]
    return out


# ---------------------------------------------------------------- permutations and bootstrap


def shuffled_match_counts(
    tops: IntArray, refs: IntArray, permutations: int, rng: np.random.Generator
) -> IntArray:
    """Matches under each of K random re-pairings of the model's tops with the references; one
    (K, N) array, each row an independent permutation of ``tops``. A NO_REPLY top never matches."""
    shuffled = rng.permuted(np.tile(tops.astype(np.int64), (permutations, 1)), axis=1)
    out: IntArray = np.count_nonzero(shuffled == refs, axis=1).astype(np.intp)
    return out


def _bootstrap_stats(
    cosine: FloatArray,
    target: FloatArray,
    tops: IntArray,
    refs: IntArray,
    resamples: int,
    rng: np.random.Generator,
) -> dict[str, FloatArray]:
    """Statistics of B resamples of N indices drawn with replacement over the N samples. Each
    sample's (top, reference) pair is one code; one bincount gives every resample's
    top x reference table, whose diagonal is the matches and whose margins are n_top and n_ref.
    Lift uses the resample's exact expected shuffled rate (no permutations inside). No BLAS, so
    no thread pool to contend for on a busy machine."""
    n = tops.size
    width = (N_EMOTIONS + 1) * N_EMOTIONS  # top in 0..12 (12 = no reply), reference in 0..11
    draws = rng.integers(0, n, size=(resamples, n))
    codes = (tops * N_EMOTIONS + refs)[draws] + (np.arange(resamples) * width)[:, None]
    table = np.bincount(codes.ravel(), minlength=resamples * width)
    table = table.reshape(resamples, N_EMOTIONS + 1, N_EMOTIONS).astype(np.float64)
    match_rate = np.trace(table, axis1=1, axis2=2) / n
    top_counts = table[:, :N_EMOTIONS, :].sum(axis=2)
    ref_counts = table.sum(axis=1)
    return {
        "match_rate": match_rate,
        "lift_pp": 100.0 * (match_rate - expected_match_rate(top_counts, ref_counts, n)),
        "cosine": cosine[draws].sum(axis=1) / n,
        "target_score": target[draws].sum(axis=1) / n,
    }


def _shuffled_share_counts(
    shares: FloatArray, refs: IntArray, permutations: int, rng: np.random.Generator
) -> FloatArray:
    """``shuffled_match_counts`` for samples with trials: each sample's share of trials per top
    emotion re-paired as a whole (the same permutations the tops would get from this rng)."""
    order = rng.permuted(np.tile(np.arange(refs.size, dtype=np.int64), (permutations, 1)), axis=1)
    out: FloatArray = shares[order, refs].sum(axis=1)
    return out


def _bootstrap_shares(
    cosine: FloatArray,
    target: FloatArray,
    shares: FloatArray,
    refs: IntArray,
    resamples: int,
    rng: np.random.Generator,
) -> dict[str, FloatArray]:
    """``_bootstrap_stats`` for samples with trials: a resample's matches and n_top(e) sum the
    drawn samples' shares of trials (the same draws the tops would get from this rng)."""
    n = refs.size
    draws = rng.integers(0, n, size=(resamples, n))
    match_rate = shares[np.arange(n), refs][draws].sum(axis=1) / n
    top_counts = np.stack([shares[:, e][draws].sum(axis=1) for e in range(N_EMOTIONS)], axis=1)
    offsets = (np.arange(resamples) * N_EMOTIONS)[:, None]
    codes = (refs[draws] + offsets).ravel()
    ref_counts = np.bincount(codes, minlength=resamples * N_EMOTIONS).astype(np.float64)
    ref_counts = ref_counts.reshape(resamples, N_EMOTIONS)
    return {
        "match_rate": match_rate,
        "lift_pp": 100.0 * (match_rate - expected_match_rate(top_counts, ref_counts, n)),
        "cosine": cosine[draws].sum(axis=1) / n,
        "target_score": target[draws].sum(axis=1) / n,
    }


def _percentile_interval(values: FloatArray) -> Interval:
    low, high = np.percentile(values, CI_PERCENTILES)
    return Interval(float(low), float(high))


# ---------------------------------------------------------------- breakdowns


def _group_rates(
    codes: IntArray, labels: Sequence[K], match: FloatArray, whole: bool
) -> dict[K, GroupRate]:
    """``match``: each sample's share of matching trials (0 or 1 without trials, ``whole``)."""
    size = len(labels)
    totals = _counts(codes, size)
    hits = np.bincount(codes, weights=match, minlength=size)[:size]
    return {
        labels[k]: GroupRate(int(totals[k]), _count(hits[k], whole), float(hits[k] / totals[k]))
        for k in range(size)
        if totals[k] > 0
    }


def _count(x: float, whole: bool) -> float:
    """A count as an int where it is one (no trials), else the sum of shares."""
    return round(x) if whole else float(x)


def _breakdowns(
    table: ItemTable, match: FloatArray, whole: bool
) -> tuple[dict[str, GroupRate], dict[str, GroupRate], dict[tuple[str, str], GroupRate]]:
    languages = sorted(set(table.languages))
    lang_index = {lang: k for k, lang in enumerate(languages)}
    lang_codes = np.array([lang_index[x] for x in table.languages], dtype=np.intp)
    cell_labels = [(e, lang) for e in EMOTION_NAMES for lang in languages]
    return (
        _group_rates(table.refs, EMOTION_NAMES, match, whole),
        _group_rates(lang_codes, languages, match, whole),
        _group_rates(table.refs * len(languages) + lang_codes, cell_labels, match, whole),
    )


# ---------------------------------------------------------------- entry points


def _rngs(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent streams for the permutations and the bootstrap, so changing one count never
    changes the other's draws: SeedSequence(seed).spawn(2)."""
    perm_seq, boot_seq = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(perm_seq), np.random.default_rng(boot_seq)


def _empty_metrics(
    table: ItemTable, permutations: int, bootstrap: int, seed: int
) -> MirroringMetrics:
    nan = math.nan
    return MirroringMetrics(
        n=0,
        n_replied=0,
        reply_rate=nan,
        n_failed=len(table.failed_ids),
        n_excluded=len(table.excluded_ids),
        match_rate=nan,
        shuffled_baseline=nan,
        shuffled_expected=nan,
        lift_pp=nan,
        p_value=nan,
        cosine=nan,
        target_score=nan,
        ref_score=nan,
        per_emotion={},
        per_language={},
        per_emotion_language={},
        predicted_counts=dict.fromkeys(EMOTION_NAMES, 0),
        ci={k: Interval(nan, nan) for k in CI_METRICS},
        permutations=permutations,
        bootstrap=bootstrap,
        seed=seed,
        failed_ids=table.failed_ids,
        excluded_ids=table.excluded_ids,
        out_of_n=table.out_of_n,
    )


def compute_metrics(
    samples: Sequence[SampleScores],
    *,
    permutations: int = 1000,
    bootstrap: int = 1000,
    seed: int = 0,
) -> MirroringMetrics:
    """The MIRRORING metrics of one run. Raises ValueError, naming the sample, for a non-canonical
    emotion, a vector that is not 12 finite numbers, or a repeated sample id or trial. With trials
    (several ``SampleScores`` of one ``item``), every figure is over samples, each sample's value
    the mean over its trials in N (docs/metrics.md, "Repeated trials")."""
    permutations, bootstrap, seed = _check_args(permutations, bootstrap, seed)
    table = tabulate(samples)
    n = len(table.ids)
    if n == 0:
        return _empty_metrics(table, permutations, bootstrap, seed)

    tops = table.tops()
    whole = table.trials == 1  # one trial per sample: counts are whole numbers
    shares = top_shares(tops)  # (N, 13): each sample's share of trials per top (12: no reply)
    rows = np.arange(n)
    match = shares[rows, table.refs]
    matches = float(match.sum())
    cosine = item_means(table.cosine())  # 0 for a non-reply
    target = item_means(table.target())
    top_counts = shares[:, :N_EMOTIONS].sum(axis=0)  # real tops only: no reply is dropped
    ref_counts = _counts(table.refs, N_EMOTIONS).astype(np.float64)

    perm_rng, boot_rng = _rngs(seed)
    if whole:  # integer counts: the table of (top, reference) codes
        perm = shuffled_match_counts(tops[:, 0], table.refs, permutations, perm_rng)
        p_value = float(np.count_nonzero(perm >= round(matches))) / permutations
        baseline = float(perm.mean()) / n
        boot = _bootstrap_stats(cosine, target, tops[:, 0], table.refs, bootstrap, boot_rng)
    else:
        perm_shares = _shuffled_share_counts(shares, table.refs, permutations, perm_rng)
        p_value = float(np.count_nonzero(perm_shares >= matches - 1e-9)) / permutations
        baseline = float(perm_shares.mean()) / n
        boot = _bootstrap_shares(cosine, target, shares, table.refs, bootstrap, boot_rng)
    match_rate = matches / n
    per_emotion, per_language, per_cell = _breakdowns(table, match, whole)
    return MirroringMetrics(
        n=n,
        n_replied=int(np.count_nonzero(shares[:, NO_REPLY] < 1.0)),
        reply_rate=float(np.mean(1.0 - shares[:, NO_REPLY])),
        n_failed=len(table.failed_ids),
        n_excluded=len(table.excluded_ids),
        match_rate=match_rate,
        shuffled_baseline=baseline,
        shuffled_expected=float(expected_match_rate(top_counts, ref_counts, n)),
        lift_pp=100.0 * (match_rate - baseline),
        p_value=p_value,
        cosine=float(cosine.mean()),
        target_score=float(target.mean()),
        ref_score=float(table.reference[rows, table.refs].mean()),
        per_emotion=per_emotion,
        per_language=per_language,
        per_emotion_language=per_cell,
        predicted_counts={
            e: _count(c, whole) for e, c in zip(EMOTION_NAMES, top_counts, strict=True)
        },
        ci={k: _percentile_interval(boot[k]) for k in CI_METRICS},
        permutations=permutations,
        bootstrap=bootstrap,
        seed=seed,
        failed_ids=table.failed_ids,
        excluded_ids=table.excluded_ids,
        out_of_n=table.out_of_n,
        trials=table.trials,
    )


def compute_many(
    runs: Mapping[str, Sequence[SampleScores]],
    *,
    permutations: int = 1000,
    bootstrap: int = 1000,
    seed: int = 0,
) -> dict[str, MirroringMetrics]:
    """``compute_metrics`` for each run (e.g. one per model), in the mapping's order. Every run uses
    the same seed, so a run's numbers never depend on which other runs are computed with it."""
    out: dict[str, MirroringMetrics] = {}
    for name, samples in runs.items():
        try:
            out[name] = compute_metrics(
                samples, permutations=permutations, bootstrap=bootstrap, seed=seed
            )
        except ValueError as exc:
            raise ValueError(f"run {name!r}: {exc}") from exc
    return out
