"""The MIRRORING metrics (scoring/metrics.py): exact hand-computed cases and statistical checks."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import random

import numpy as np
import pytest

from duplexsim.core.emotions import EMOTION_NAMES, emotion_index
from duplexsim.scoring.metrics import (
    CI_METRICS,
    GroupRate,
    Interval,
    MirroringMetrics,
    SampleScores,
    compute_many,
    compute_metrics,
)

LANGUAGES = ("ar", "en", "hi", "it", "tl")


def vec(**scores: float) -> np.ndarray:
    """A 12-vector from keyword scores, e.g. vec(Anger=0.5); Emotional Numbness as Emotional_Numbness."""
    out = np.zeros(len(EMOTION_NAMES))
    for key, value in scores.items():
        out[emotion_index(key.replace("_", " "))] = value
    return out


def sample(
    sid: str,
    emotion: str,
    reply: np.ndarray | None,
    *,
    reference: np.ndarray | None = None,
    language: str = "en",
    failed: bool = False,
) -> SampleScores:
    if reference is None:
        reference = vec(**{emotion.replace(" ", "_"): 0.9})
    return SampleScores(sid, emotion, language, reference, reply, failed)


def unscored(sid: str, emotion: str) -> SampleScores:
    return SampleScores(sid, emotion, "en", None, vec(Anger=1.0))


def synthetic(n: int, strength: float, seed: int) -> list[SampleScores]:
    """n samples; the model's reply is a fixed bias plus ``strength`` on the reference emotion
    (0: independent of the reference, a 'random' model; large: a strong mirror)."""
    rng = np.random.default_rng(seed)
    refs = rng.integers(0, len(EMOTION_NAMES), n)
    bias = rng.dirichlet(np.ones(len(EMOTION_NAMES)))
    eye = np.eye(len(EMOTION_NAMES))
    reference = 0.7 * eye[refs] + 0.3 * rng.random((n, len(EMOTION_NAMES)))
    reply = rng.random((n, len(EMOTION_NAMES))) * bias + strength * eye[refs]
    return [
        SampleScores(
            f"s{i:04d}",
            EMOTION_NAMES[refs[i]],
            LANGUAGES[i % len(LANGUAGES)],
            reference[i],
            None if i % 17 == 0 else reply[i],
        )
        for i in range(n)
    ]


# ---------------------------------------------------------------- the 4-sample worked example
#
# Indices in EMOTIONS order: Amusement 0, Anger 1, Elation 2, ..., Sadness 11.
#
#  id  r_i       lang  R_i                 M_i                          top_i    match
#  a   Amusement en    Amusement 0.8       Amusement 0.3, Anger 0.4     Anger    0
#  b   Anger     en    Anger 0.9           Anger 0.5, Elation 0.5 (tie) Anger    1   (first max)
#  c   Anger     hi    Anger 0.7           (no reply)                   -        0
#  d   Elation   hi    Elation 0.5         Elation 0.8, Sadness 0.6     Elation  1
#
# match rate = 2/4 = 0.5; reply rate = 3/4
# n_top: Anger 2, Elation 1 (the silent sample has no top); n_ref: Amusement 1, Anger 2, Elation 1
# exact expectation = (n_top(Anger) n_ref(Anger) + n_top(Elation) n_ref(Elation)) / N^2
#                   = (2*2 + 1*1) / 16 = 5/16 = 0.3125
# cosines: a: (0.3*0.8) / (0.5*0.8) = 0.6
#          b: (0.5*0.9) / (sqrt(0.5)*0.9) = 1/sqrt(2) = 0.7071067811865476
#          c: 0 (no reply)
#          d: (0.8*0.5) / (1.0*0.5) = 0.8          (|M_d| = sqrt(0.64 + 0.36) = 1)
#   mean = (0.6 + 0.70710678 + 0 + 0.8) / 4 = 0.5267766952966369
# target = (M_a[Amusement] + M_b[Anger] + 0 + M_d[Elation]) / 4 = (0.3 + 0.5 + 0 + 0.8) / 4 = 0.4
# ref    = (0.8 + 0.9 + 0.7 + 0.5) / 4 = 0.725
#
# All 24 permutations of the tops (A, A, -, E) against the references (Am, An, An, E): matches are
# the Anger tops landing on positions b or c plus the Elation top landing on d.
#   E on d (6 perms): silent on a -> 3 matches (2 perms), silent on b or c -> 2 (4 perms)
#   E on a (6 perms): silent on d -> 2 (2 perms), otherwise 1 (4 perms)
#   E on b, E on c (6 perms each): an Anger top on the other Anger slot -> 1 (4), else 0 (2)
# mean matches = (6 + 8 + 4 + 4 + 4 + 4) / 24 = 30/24 = 1.25 -> mean rate 1.25/4 = 5/16, as above
# P(matches >= 2) = (6 + 2) / 24 = 1/3: the p-value the K = 1000 permutations estimate.


def four_samples() -> list[SampleScores]:
    return [
        sample("a", "Amusement", vec(Amusement=0.3, Anger=0.4), reference=vec(Amusement=0.8)),
        sample("b", "Anger", vec(Anger=0.5, Elation=0.5), reference=vec(Anger=0.9)),
        sample("c", "Anger", None, reference=vec(Anger=0.7), language="hi"),
        sample(
            "d",
            "Elation",
            vec(Elation=0.8, Sadness=0.6),
            reference=vec(Elation=0.5),
            language="hi",
        ),
    ]


def test_four_samples_by_hand() -> None:
    m = compute_metrics(four_samples())
    assert (m.n, m.n_replied, m.reply_rate, m.n_failed, m.n_excluded) == (4, 3, 0.75, 0, 0)
    assert m.match_rate == 0.5
    assert m.shuffled_expected == 0.3125
    assert m.cosine == pytest.approx((0.6 + 1 / math.sqrt(2) + 0.8) / 4, abs=1e-12)
    assert m.target_score == pytest.approx(0.4, abs=1e-12)
    assert m.ref_score == pytest.approx(0.725, abs=1e-12)
    assert m.shuffled_baseline == pytest.approx(0.3125, abs=0.03)
    assert m.lift_pp == pytest.approx(100 * (0.5 - m.shuffled_baseline))
    assert m.p_value == pytest.approx(1 / 3, abs=0.06)
    assert m.predicted_counts == {e: {"Anger": 2, "Elation": 1}.get(e, 0) for e in EMOTION_NAMES}
    assert m.per_emotion == {
        "Amusement": GroupRate(1, 0, 0.0),
        "Anger": GroupRate(2, 1, 0.5),
        "Elation": GroupRate(1, 1, 1.0),
    }
    assert m.per_language == {"en": GroupRate(2, 1, 0.5), "hi": GroupRate(2, 1, 0.5)}
    assert m.per_emotion_language == {
        ("Amusement", "en"): GroupRate(1, 0, 0.0),
        ("Anger", "en"): GroupRate(1, 1, 1.0),
        ("Anger", "hi"): GroupRate(1, 0, 0.0),
        ("Elation", "hi"): GroupRate(1, 1, 1.0),
    }


def test_four_samples_permutation_distribution_enumerated() -> None:
    """The hand enumeration in the comment above, checked by brute force."""
    tops = ["Anger", "Anger", None, "Elation"]
    refs = ["Amusement", "Anger", "Anger", "Elation"]
    counts = [
        sum(t == r for t, r in zip(p, refs, strict=True)) for p in itertools.permutations(tops)
    ]
    assert sum(counts) / (24 * 4) == 5 / 16
    assert sum(c >= 2 for c in counts) / 24 == 1 / 3


# ---------------------------------------------------------------- reference behaviours


def test_perfect_mirror() -> None:
    emotions = EMOTION_NAMES[:6]
    samples = [
        sample(f"s{i}", e, vec(**{e.replace(" ", "_"): 0.9}), language=LANGUAGES[i % 2])
        for i, e in enumerate(emotions)
    ]
    m = compute_metrics(samples)
    assert m.match_rate == 1.0
    assert m.reply_rate == 1.0
    assert m.cosine == pytest.approx(1.0)
    assert m.target_score == pytest.approx(m.ref_score) == pytest.approx(0.9)
    assert m.shuffled_expected == pytest.approx(6 / 36)  # six emotions, once each
    assert m.lift_pp == pytest.approx(100 * (1 - m.shuffled_baseline))
    assert m.p_value < 0.02  # only the 1/720 identity-like permutations reach 6 matches
    assert m.ci["match_rate"] == Interval(1.0, 1.0)


def test_silent_model_scores_zero() -> None:
    samples = [sample(f"s{i}", e, None) for i, e in enumerate(EMOTION_NAMES)]
    m = compute_metrics(samples)
    assert (m.n, m.n_replied, m.reply_rate) == (12, 0, 0.0)
    assert (m.match_rate, m.cosine, m.target_score) == (0.0, 0.0, 0.0)
    assert (m.shuffled_baseline, m.shuffled_expected, m.lift_pp) == (0.0, 0.0, 0.0)
    assert m.p_value == 1.0  # every permutation ties the observed 0 matches
    assert m.ref_score == pytest.approx(0.9)
    assert set(m.predicted_counts.values()) == {0}
    assert (m.ci["match_rate"].low, m.ci["match_rate"].high) == (0.0, 0.0)


def test_ties_take_the_first_maximum_in_emotions_order() -> None:
    samples = [
        sample("tie-anger", "Anger", vec(Anger=0.5, Elation=0.5)),  # Anger (1) before Elation (2)
        sample("tie-elation", "Elation", vec(Anger=0.5, Elation=0.5)),
        sample("tie-last", "Sadness", vec(Pride=0.7, Sadness=0.7)),  # Pride (9) wins
        sample("all-zero", "Amusement", vec()),  # replied, all zeros: argmax is Amusement
    ]
    m = compute_metrics(samples)
    assert m.predicted_counts["Anger"] == 2
    assert m.predicted_counts["Pride"] == 1
    assert m.predicted_counts["Amusement"] == 1
    assert m.per_emotion["Anger"].matches == 1
    assert m.per_emotion["Elation"].matches == 0
    assert m.per_emotion["Sadness"].matches == 0
    assert m.per_emotion["Amusement"].matches == 1
    assert m.match_rate == 0.5
    # each tied reply is at 45 degrees to its one-emotion reference (cosine 1/sqrt(2)); the
    # zero-norm reply has cosine 0, not NaN
    assert m.cosine == pytest.approx(3 / math.sqrt(2) / 4)


def test_zero_norm_reference_has_cosine_zero() -> None:
    m = compute_metrics([sample("z", "Anger", vec(Anger=1.0), reference=vec())])
    assert m.cosine == 0.0
    assert m.ref_score == 0.0
    assert m.target_score == 1.0


def test_single_reference_emotion() -> None:
    """All references Anger: every permutation gives n_top(Anger) matches, so the baseline is
    exactly the share of tops that are Anger, and the lift is 0."""
    replies = [vec(Anger=1.0)] * 3 + [vec(Elation=1.0)] * 2 + [None]
    samples = [sample(f"s{i}", "Anger", r) for i, r in enumerate(replies)]
    m = compute_metrics(samples)
    assert m.match_rate == 0.5
    assert m.shuffled_baseline == 0.5
    assert m.shuffled_expected == 0.5  # 3 * 6 / 36
    assert m.lift_pp == 0.0
    assert m.p_value == 1.0
    assert m.per_emotion == {"Anger": GroupRate(6, 3, 0.5)}


@pytest.mark.parametrize("matched", [True, False])
def test_a_single_sample(matched: bool) -> None:
    reply = vec(Anger=0.6, Sadness=0.8) if not matched else vec(Anger=0.8, Sadness=0.6)
    m = compute_metrics([sample("only", "Anger", reply, reference=vec(Anger=1.0))])
    rate = 1.0 if matched else 0.0
    assert (m.n, m.match_rate, m.shuffled_baseline, m.shuffled_expected) == (1, rate, rate, rate)
    assert m.lift_pp == 0.0
    assert m.p_value == 1.0
    assert m.cosine == pytest.approx(0.8 if matched else 0.6)
    for key in CI_METRICS:  # a resample of one sample is that sample
        point = getattr(m, key) if key != "lift_pp" else 0.0
        assert m.ci[key].low == pytest.approx(point) and m.ci[key].high == pytest.approx(point)


# ---------------------------------------------------------------- N, failures, exclusions


def test_failed_and_unscored_samples_are_excluded_but_counted() -> None:
    base = compute_metrics(four_samples())
    extra = [
        sample("f1", "Anger", vec(Anger=1.0), failed=True),
        SampleScores("f2", "Pride", "en", None, None, failed=True),  # failed wins over unscored
        unscored("u1", "Sadness"),
    ]
    m = compute_metrics([*four_samples(), *extra])
    assert (m.n, m.n_failed, m.n_excluded) == (4, 2, 1)
    assert m.failed_ids == ("f1", "f2")
    assert m.excluded_ids == ("u1",)
    same = {k: v for k, v in m.to_dict().items() if k not in ("n_failed", "n_excluded")}
    same |= {"failed_ids": [], "excluded_ids": [], "out_of_n": {}}
    assert m.out_of_n == {"failed": ("f1", "f2"), "unscored": ("u1",)}
    assert same == {k: v for k, v in base.to_dict().items() if k not in ("n_failed", "n_excluded")}


@pytest.mark.parametrize(
    "samples",
    [[], [sample("f", "Anger", vec(Anger=1.0), failed=True), unscored("u", "Anger")]],
    ids=["empty", "nothing-completed"],
)
def test_no_completed_samples_gives_nan_not_a_crash(samples: list[SampleScores]) -> None:
    m = compute_metrics(samples)
    assert m.n == 0 and m.n_replied == 0
    for key in ("reply_rate", "match_rate", "shuffled_baseline", "shuffled_expected", "lift_pp"):
        assert math.isnan(getattr(m, key))
    for key in ("p_value", "cosine", "target_score", "ref_score"):
        assert math.isnan(getattr(m, key))
    assert all(math.isnan(m.ci[k].low) and math.isnan(m.ci[k].high) for k in CI_METRICS)
    assert (m.per_emotion, m.per_language, m.per_emotion_language) == ({}, {}, {})
    d = json.loads(json.dumps(m.to_dict(), allow_nan=False))
    assert d["match_rate"] is None and d["ci"]["cosine"] == {"low": None, "high": None}
    assert d["n_failed"] == (1 if samples else 0)


# ---------------------------------------------------------------- seeds and statistics


def test_same_seed_same_numbers_other_seed_close() -> None:
    samples = synthetic(200, 0.3, seed=1)
    a = compute_metrics(samples, seed=7).to_dict()
    assert a == compute_metrics(samples, seed=7).to_dict()
    b = compute_metrics(samples, seed=8).to_dict()
    assert a != b
    assert b["shuffled_baseline"] == pytest.approx(a["shuffled_baseline"], abs=0.005)
    assert b["p_value"] == pytest.approx(a["p_value"], abs=0.05)
    for key in CI_METRICS:
        scale = 100 if key == "lift_pp" else 1
        for end in ("low", "high"):
            assert b["ci"][key][end] == pytest.approx(a["ci"][key][end], abs=0.03 * scale)
    # the two seeded streams are independent: fewer resamples leave the permutations alone
    c = compute_metrics(samples, seed=7, bootstrap=100).to_dict()
    assert (c["shuffled_baseline"], c["p_value"]) == (a["shuffled_baseline"], a["p_value"])
    assert c["ci"] != a["ci"]
    # nothing seeded changes the exact quantities
    for key in ("match_rate", "shuffled_expected", "cosine", "target_score", "ref_score"):
        assert a[key] == b[key]


def test_input_order_does_not_matter() -> None:
    samples = synthetic(60, 0.2, seed=2)
    shuffled = list(samples)
    random.Random(0).shuffle(shuffled)
    assert compute_metrics(samples).to_dict() == compute_metrics(shuffled).to_dict()


def test_permutation_baseline_matches_exact_expectation() -> None:
    for seed in (3, 4):
        m = compute_metrics(synthetic(200, 0.1, seed=seed), seed=seed)
        assert abs(m.shuffled_baseline - m.shuffled_expected) < 0.01


def test_p_value_strong_mirror_vs_random_model() -> None:
    strong = compute_metrics(synthetic(200, 1.0, seed=5))
    assert strong.match_rate > 0.8
    assert strong.lift_pp > 50
    assert strong.p_value == 0.0
    rand = compute_metrics(synthetic(200, 0.0, seed=5))
    assert abs(rand.lift_pp) < 5
    assert 0.1 < rand.p_value < 0.9


def test_confidence_intervals_contain_the_point_estimates() -> None:
    for strength in (0.0, 0.2, 1.0):
        m = compute_metrics(synthetic(150, strength, seed=6))
        for key in CI_METRICS:
            interval = m.ci[key]
            assert interval.low <= getattr(m, key) <= interval.high, (strength, key)
        assert m.ci["match_rate"].high - m.ci["match_rate"].low > 0.02


# ---------------------------------------------------------------- breakdowns and output


def test_grouping_per_emotion_and_language() -> None:
    samples = synthetic(120, 0.3, seed=9)
    m = compute_metrics(samples)
    refs = [s.emotion for s in samples]
    assert list(m.per_emotion) == [e for e in EMOTION_NAMES if e in refs]  # EMOTIONS order
    assert list(m.per_language) == sorted(LANGUAGES)
    assert sum(g.n for g in m.per_emotion.values()) == m.n
    assert sum(g.matches for g in m.per_language.values()) == round(m.match_rate * m.n)
    cells = m.per_emotion_language
    order = {e: i for i, e in enumerate(EMOTION_NAMES)}
    assert list(cells) == sorted(cells, key=lambda k: (order[k[0]], k[1]))
    for emotion, group in m.per_emotion.items():
        row = [g for (e, _), g in cells.items() if e == emotion]
        assert sum(g.n for g in row) == group.n
        assert sum(g.matches for g in row) == group.matches
    for lang, group in m.per_language.items():
        column = [g for (_, x), g in cells.items() if x == lang]
        assert sum(g.n for g in column) == group.n
    for g in cells.values():
        assert g.match_rate == g.matches / g.n
    for lang, group in m.per_language.items():
        assert group.n == sum(s.language == lang for s in samples)


def test_to_dict_is_json_ready() -> None:
    m = compute_metrics(four_samples(), permutations=50, bootstrap=50, seed=3)
    d = m.to_dict()
    back = json.loads(json.dumps(d, allow_nan=False))
    assert back == d
    assert back["per_emotion_language"] == {  # nested: JSON keys are strings
        "Amusement": {"en": {"n": 1, "matches": 0, "match_rate": 0.0}},
        "Anger": {
            "en": {"n": 1, "matches": 1, "match_rate": 1.0},
            "hi": {"n": 1, "matches": 0, "match_rate": 0.0},
        },
        "Elation": {"hi": {"n": 1, "matches": 1, "match_rate": 1.0}},
    }
    assert (back["permutations"], back["bootstrap"], back["seed"]) == (50, 50, 3)
    assert set(back["ci"]) == set(CI_METRICS)


def test_compute_many_equals_each_run_alone() -> None:
    runs = {"good": synthetic(80, 1.0, seed=10), "bad": synthetic(80, 0.0, seed=11)}
    many = compute_many(runs, permutations=200, bootstrap=200, seed=4)
    assert list(many) == ["good", "bad"]
    for name, samples in runs.items():
        alone = compute_metrics(samples, permutations=200, bootstrap=200, seed=4)
        assert many[name].to_dict() == alone.to_dict()
    assert isinstance(many["good"], MirroringMetrics)


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (sample("short", "Anger", np.ones(11)), r"'short': reply vector must have shape \(12,\)"),
        (sample("matrix", "Anger", np.ones((1, 12))), r"'matrix': reply vector must have shape"),
        (
            sample("nan", "Anger", vec(Anger=1.0), reference=vec(Anger=math.nan)),
            r"'nan': reference vector has NaN or infinite",
        ),
        (sample("inf", "Anger", vec(Anger=math.inf)), r"'inf': reply vector has NaN or infinite"),
        (sample("lower", "anger", vec(), reference=vec()), r"'lower': emotion 'anger' .*'Anger'\?"),
        (
            SampleScores("head", "Impatience_and_Irritability", "en", vec(), vec()),
            r"'head': emotion .*did you mean 'Impatience'",
        ),
        (
            sample("other", "Joy", vec(), reference=vec()),
            r"'other': emotion 'Joy' is not one of the 12",
        ),
        (sample("nolang", "Anger", vec(), language=""), r"'nolang': language"),
        (sample("a", "Anger", vec(Anger=1.0)), r"sample 'a' appears more than once"),
        (
            sample("failed-nan", "Anger", vec(Anger=math.nan), failed=True),
            r"'failed-nan': reply vector",
        ),
    ],
)
def test_validation_names_the_sample(bad: SampleScores, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compute_metrics([*four_samples(), bad])
    with pytest.raises(ValueError, match=r"run 'model-x': sample"):
        compute_many({"model-x": [*four_samples(), bad]})


@pytest.mark.parametrize(
    "kwargs",
    [{"permutations": 0}, {"bootstrap": 0}, {"seed": -1}, {"permutations": 1.5}, {"seed": True}],
)
def test_bad_arguments(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        compute_metrics(four_samples(), **kwargs)  # type: ignore[arg-type]


def test_numpy_integer_arguments_are_accepted() -> None:
    m = compute_metrics(
        four_samples(),
        permutations=np.int64(10),  # type: ignore[arg-type]
        seed=np.int32(2),  # type: ignore[arg-type]
    )
    assert (m.permutations, m.seed) == (10, 2) and type(m.seed) is int


def test_every_sample_is_in_n_or_out_of_it_with_its_reason() -> None:
    out = [
        sample("e", "Anger", vec(Anger=1.0), failed=True),
        unscored("f", "Anger"),
        dataclasses.replace(sample("g", "Anger", vec(Anger=1.0)), out_reason="timing invalid"),
        dataclasses.replace(sample("h", "Anger", None), out_reason="reply too short to score"),
    ]
    m = compute_metrics([*four_samples(), *out])
    assert m.n == 4 and m.match_rate == 0.5  # as the four without them
    assert m.out_of_n == {
        "failed": ("e",),
        "unscored": ("f",),
        "timing invalid": ("g",),
        "reply too short to score": ("h",),
    }
    assert m.n + sum(len(ids) for ids in m.out_of_n.values()) == 8
    assert m.to_dict()["out_of_n"]["timing invalid"] == ["g"]
