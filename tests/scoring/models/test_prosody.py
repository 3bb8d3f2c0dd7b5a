"""The offline prosody scorer: interface, determinism, edge cases, direction, the demo."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from duplexsim.core.emotions import EMOTION_NAMES, HEAD_NAMES, emotion_index
from duplexsim.scoring.models import load_scorer
from duplexsim.scoring.models.base import emotion_matrix
from duplexsim.scoring.models.prosody import FEATURE_NAMES, ProsodyScorer
from tests.helpers.paths import DEMO

SR = 16000


def harmonic_speech(
    seconds: float,
    *,
    f0_hz: float,
    swing_st: float,
    swing_hz: float,
    syllables_per_s: float,
    pause_every: int = 0,
    pause_s: float = 0.0,
) -> np.ndarray:
    """A harmonic synth with an f0 contour (f0 ± swing_st semitones at swing_hz) under a syllable
    envelope; every ``pause_every`` syllables a silent pause of ``pause_s`` is inserted."""
    t = np.arange(round(seconds * SR)) / SR
    f0 = f0_hz * 2.0 ** (swing_st * np.sin(2 * np.pi * swing_hz * t) / 12.0)
    phase = 2 * np.pi * np.cumsum(f0) / SR
    tone = sum(np.sin(k * phase) / k for k in range(1, 9))
    syllable = np.sin(np.pi * syllables_per_s * t) ** 2  # dips to zero between syllables
    x = tone * (0.05 + 0.95 * syllable)
    if pause_every:
        period = pause_every / syllables_per_s
        parts = []
        for start in np.arange(0.0, seconds, period):
            seg = x[int(start * SR) : int((start + period) * SR)]
            parts += [seg, np.zeros(int(pause_s * SR))]
        x = np.concatenate(parts)[: t.size]
    out: np.ndarray = (0.5 * x / np.max(np.abs(x))).astype(np.float32)
    return out


@pytest.fixture(scope="module")
def scorer() -> ProsodyScorer:
    return ProsodyScorer()


def test_interface_and_dimensions(scorer: ProsodyScorer) -> None:
    assert scorer.name == "prosody"
    assert scorer.comparable_with_mirroring is False
    assert scorer.dimensions[:12] == HEAD_NAMES
    assert scorer.dimensions[12:] == FEATURE_NAMES
    loaded = load_scorer("prosody", model_path=Path("/nonexistent"), device="cuda")
    assert isinstance(loaded, ProsodyScorer)
    with pytest.raises(TypeError):
        ProsodyScorer(colour="blue")


def test_deterministic_and_batch_independent(scorer: ProsodyScorer) -> None:
    rng = np.random.default_rng(1)
    clips = [
        harmonic_speech(1.5, f0_hz=220, swing_st=4, swing_hz=2, syllables_per_s=4),
        (0.01 * rng.standard_normal(8000)).astype(np.float32),
        harmonic_speech(1.0, f0_hz=150, swing_st=1, swing_hz=1, syllables_per_s=3),
    ]
    a = scorer.score(clips)
    assert a.shape == (3, len(scorer.dimensions)) and a.dtype == np.float32
    assert np.array_equal(a, scorer.score(clips))
    assert np.array_equal(a, ProsodyScorer().score(clips))
    assert np.array_equal(a[::-1], scorer.score(clips[::-1]))
    for i, clip in enumerate(clips):
        assert np.array_equal(a[i], scorer.score([clip])[0])
    emotions = emotion_matrix(a, scorer.dimensions)
    assert emotions.shape == (3, 12) and np.all((emotions >= 0) & (emotions <= 4))


def test_silence_and_short_clips_are_finite(scorer: ProsodyScorer) -> None:
    voiced = harmonic_speech(0.1, f0_hz=200, swing_st=2, swing_hz=3, syllables_per_s=4)
    clips = [
        np.zeros(SR, np.float32),
        np.zeros(1600, np.float32),
        np.zeros(800, np.float32),
        np.full(4000, 0.3, np.float32),
        voiced,
        (1e-4 * np.random.default_rng(0).standard_normal(1600)).astype(np.float32),
    ]
    out = scorer.score(clips)
    assert np.all(np.isfinite(out))
    emotions = emotion_matrix(out, scorer.dimensions)
    assert np.all(emotions[0] == 0.0) and np.all(emotions[1] == 0.0)  # silence: all low
    assert scorer.score([]).shape == (0, len(scorer.dimensions))


def test_high_arousal_vs_low_flat_slow(scorer: ProsodyScorer) -> None:
    high = harmonic_speech(3.0, f0_hz=290, swing_st=5, swing_hz=3, syllables_per_s=6)
    low = harmonic_speech(
        3.0, f0_hz=150, swing_st=0.3, swing_hz=0.5, syllables_per_s=2.5, pause_every=3, pause_s=0.3
    )
    hi, lo = emotion_matrix(scorer.score([high, low]), scorer.dimensions)
    aroused = [emotion_index(e) for e in ("Elation", "Anger", "Amusement")]
    subdued = [emotion_index(e) for e in ("Sadness", "Emotional Numbness")]
    assert np.all(hi[aroused] > lo[aroused])
    assert np.all(lo[subdued] > hi[subdued])
    assert EMOTION_NAMES[int(hi.argmax())] in {"Elation", "Amusement", "Anger", "Surprise"}
    assert EMOTION_NAMES[int(lo.argmax())] in {"Sadness", "Emotional Numbness", "Disappointment"}


def test_demo_references_rank_their_emotion_high(scorer: ProsodyScorer) -> None:
    rows = [json.loads(line) for line in (DEMO / "manifest.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["language"] == "en"]  # 12 clips, one per emotion
    clips = [sf.read(DEMO / r["reference"], dtype="float32")[0] for r in rows]
    emotions = emotion_matrix(scorer.score(clips), scorer.dimensions)
    top3 = np.argsort(-emotions, axis=1, kind="stable")[:, :3]
    hits = sum(emotion_index(r["emotion"]) in top3[i] for i, r in enumerate(rows))
    assert hits >= 9, f"only {hits}/12 demo references have their emotion in the top 3"
