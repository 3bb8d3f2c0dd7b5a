"""The metrics of a run with repeated trials (scoring/items.py, scoring/metrics.py): each sample's
value is the mean over its trials in N."""

from __future__ import annotations

import numpy as np
import pytest

from duplexsim.core.emotions import EMOTION_NAMES
from duplexsim.scoring import metrics
from duplexsim.scoring.items import MISSING, NO_REPLY, SampleScores, tabulate
from duplexsim.scoring.metrics import compute_metrics, expected_match_rate
from duplexsim.scoring.paired import top_shares

EYE = np.eye(12)


def session(item: str, trial: int, emotion: str, top: int | None, **kw: object) -> SampleScores:
    reply = None if top is None else 0.2 + 0.6 * EYE[top]
    sid = item if trial == 1 else f"{item}.trial{trial}"
    ref = 0.1 + 0.8 * EYE[EMOTION_NAMES.index(emotion)]
    return SampleScores(sid, emotion, "en", ref, reply, item=item, trial=trial, **kw)  # type: ignore[arg-type]


def trial_run(n: int, k: int, seed: int) -> list[SampleScores]:
    rng = np.random.default_rng(seed)
    refs = rng.integers(0, 12, n)
    out = []
    for i in range(n):
        for t in range(1, k + 1):
            top = int(refs[i]) if rng.random() < 0.4 else int(rng.integers(0, 12))
            out.append(
                session(f"s{i:03d}", t, EMOTION_NAMES[refs[i]], None if rng.random() < 0.1 else top)
            )
    return out


def test_one_trial_is_the_plain_run() -> None:
    plain = [
        SampleScores(s.sample_id, s.emotion, s.language, s.reference, s.reply)
        for s in trial_run(40, 1, 3)
    ]
    a, b = compute_metrics(plain), compute_metrics(trial_run(40, 1, 3))
    assert a.to_dict() == b.to_dict()
    assert b.trials == 1 and isinstance(b.per_emotion[next(iter(b.per_emotion))].matches, int)


def test_trials_are_averaged_per_sample() -> None:
    samples = trial_run(60, 3, 1)
    m = compute_metrics(samples, permutations=200, bootstrap=200)
    table = tabulate(samples)
    assert m.trials == 3 and m.n == 60 and table.tops().shape == (60, 3)
    per_trial = [compute_metrics([s for s in samples if s.trial == t]) for t in (1, 2, 3)]
    # with every trial of every sample in N, each figure is the mean of the trials' figures
    assert m.match_rate == pytest.approx(np.mean([x.match_rate for x in per_trial]))
    assert m.shuffled_expected == pytest.approx(np.mean([x.shuffled_expected for x in per_trial]))
    assert m.cosine == pytest.approx(np.mean([x.cosine for x in per_trial]))
    assert m.target_score == pytest.approx(np.mean([x.target_score for x in per_trial]))
    assert m.reply_rate == pytest.approx(np.mean([x.reply_rate for x in per_trial]))
    for emotion, group in m.per_emotion.items():
        assert group.matches == pytest.approx(
            np.mean([x.per_emotion[emotion].matches for x in per_trial])
        )
    assert m.shuffled_baseline == pytest.approx(m.shuffled_expected, abs=0.01)
    assert m.ci["match_rate"].low < m.match_rate < m.ci["match_rate"].high
    assert m.to_dict()["trials"] == 3


def test_a_trial_out_of_n_leaves_the_sample_in() -> None:
    samples = [
        session("a", 1, "Anger", 1),
        session("a", 2, "Anger", 2, failed=True),
        session("b", 1, "Pride", None, out_reason="timing invalid"),
        session("b", 2, "Pride", 9),
        session("c", 1, "Sadness", 11, failed=True),
    ]
    m = compute_metrics(samples)
    assert m.n == 2 and m.match_rate == 1.0  # a: trial 1 matched; b: trial 2 matched
    assert m.out_of_n == {"failed": ("a.trial2", "c"), "timing invalid": ("b",)}
    tops = tabulate(samples).tops()
    assert tops.tolist() == [[1, MISSING], [MISSING, 9]]


def test_repeated_trial_refused() -> None:
    with pytest.raises(ValueError, match="trial 2 appears more than once"):
        tabulate(
            [
                session("a", 2, "Anger", 1),
                SampleScores("x", "Anger", "en", EYE[1], EYE[1], item="a", trial=2),
            ]
        )
    with pytest.raises(ValueError, match="trial must be"):
        tabulate([SampleScores("a", "Anger", "en", EYE[1], EYE[1], trial=0)])


def test_share_paths_equal_the_count_paths_on_single_trials() -> None:
    """The permutations and bootstrap over shares draw what the integer paths draw."""
    rng = np.random.default_rng(0)
    refs = rng.integers(0, 12, 80)
    tops = np.where(rng.random(80) < 0.3, refs, rng.integers(0, 13, 80))
    shares = top_shares(tops)
    counts = metrics.shuffled_match_counts(tops, refs, 50, np.random.default_rng(4))
    from_shares = metrics._shuffled_share_counts(shares, refs, 50, np.random.default_rng(4))
    assert np.array_equal(counts, from_shares)
    cos, tgt = rng.random(80), rng.random(80)
    a = metrics._bootstrap_stats(cos, tgt, tops, refs, 30, np.random.default_rng(5))
    b = metrics._bootstrap_shares(cos, tgt, shares, refs, 30, np.random.default_rng(5))
    for key in a:
        assert a[key] == pytest.approx(b[key])
    assert NO_REPLY in tops


def test_expected_rate_pools_the_trials() -> None:
    tops = np.array([[0, 1], [1, 1], [NO_REPLY, 0]])
    refs = np.array([0, 1, 2])
    shares = top_shares(tops)
    ref_counts = np.bincount(refs, minlength=12).astype(float)
    pooled = expected_match_rate(shares[:, :12].sum(axis=0), ref_counts, 3)
    # n_top: emotion 0 = 0.5 + 0.5, emotion 1 = 0.5 + 1; n_ref one each: (1 + 1.5) / 9
    assert pooled == pytest.approx(2.5 / 9)
