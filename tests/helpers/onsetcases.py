"""Reply onsets with a known truth: real human speech (tests/data, see its README) placed after
known silence or noise, and the cases that moved onsets before (a level syllable then a pause,
speech after steady noise, a breath, noise alone), plain and through Opus as a Moshi server
sends them.

The truth is the first sample at the edge level (``VadConfig.edge_dbfs``) at or after the word's
start, marked by hand in tests/data/README.md, in the audio as a listener receives it: a case
places the clip at a known position (after the codec's delay, through Opus, which also loses
the quietest part of some soft onsets). Where noise lies under the speech, the truth is the
clean speech's onset. A case without speech has no onset.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import soundfile as sf
from numpy.typing import NDArray

from duplexsim.core.audio import resample
from duplexsim.core.vad import VadConfig
from tests.helpers.paths import REPO

RATE = 24000  # a model's output rate (Moshi's, OpenAI's)
DATA = REPO / "tests" / "data"
LEAD_S = 0.5  # silence before a clip
EDGE = 10 ** (VadConfig().edge_dbfs / 20)
OPUS_DELAY_S = 156 / RATE  # the Opus encoder's lookahead at 24 kHz

FloatArray = NDArray[np.float32]

# clip -> where its first word starts (s, in the clip): a sound before it (a breath, a click)
# is not speech, and a consonant below the VAD's energy floor is not counted (README)
WORD_STARTS = {
    "librivox-0930": 0.200,
    "librivox-0870": 0.190,
    "goforward": 0.200,
    "arctic-a0009": 0.190,
    "cards-001": 0.180,
}


@dataclass(frozen=True)
class Case:
    name: str
    audio: FloatArray  # the model's output at RATE
    onset_s: float | None  # the truth; None: no reply
    word_s: float | None = None  # where the word starts, in a case with no noise under it


def heard_onset_s(x: FloatArray, word_s: float) -> float:
    """The first sample at the edge level from the word's start."""
    start = round(word_s * RATE)
    return (start + int(np.flatnonzero(np.abs(x[start:]) >= EDGE)[0])) / RATE


def clip(name: str) -> FloatArray:
    x, rate = sf.read(DATA / f"{name}.flac", dtype="float32")
    return resample(np.asarray(x, np.float32), rate, RATE)


def clip_onset_s(name: str) -> float:
    """The clip's true onset: its first sample at the edge level from the word's start."""
    return heard_onset_s(clip(name), WORD_STARTS[name])


def noise(level_dbfs: float, seconds: float, seed: int = 1) -> FloatArray:
    rng = np.random.default_rng(seed)
    amp = 10 ** (level_dbfs / 20)
    return (rng.standard_normal(round(seconds * RATE)) * amp).astype(np.float32)


def at_level(x: FloatArray, rms_dbfs: float) -> FloatArray:
    rms = float(np.sqrt(np.mean(np.square(x, dtype=np.float64))))
    return (x * (10 ** (rms_dbfs / 20) / rms)).astype(np.float32)


def faded(x: FloatArray, fade_s: float = 0.002) -> FloatArray:
    n = round(fade_s * RATE)
    ramp = np.arange(1, n + 1, dtype=np.float32) / n
    y = x.copy()
    y[:n] *= ramp
    y[-n:] *= ramp[::-1]
    return y


def opus(x: FloatArray) -> FloatArray:
    """Through a continuous Ogg/Opus stream in 80 ms frames, as a Moshi server sends audio."""
    codec = pytest.importorskip("duplexsim.clients.moshi.codec")
    encoder, decoder = codec.OggOpusEncoder(RATE), codec.OggOpusDecoder(RATE)
    tail = np.zeros(RATE // 5, np.float32)  # flush the encoder's frame and lookahead
    y = decoder.decode(encoder.encode(np.concatenate((x, tail))))
    return np.asarray(y[: x.size], np.float32)


def placed(parts: list[FloatArray], noise_floor: FloatArray | None = None) -> FloatArray:
    x = np.concatenate(parts)
    if noise_floor is not None:
        x = x + noise_floor[: x.size]
    return x


def real_speech(name: str) -> Case:
    lead = np.zeros(round(LEAD_S * RATE), np.float32)
    word = LEAD_S + WORD_STARTS[name]
    return Case(f"speech {name}", placed([lead, clip(name)]), LEAD_S + clip_onset_s(name), word)


def level_syllable() -> Case:
    """hi-contemplation-1 as heard in a demo: 60 ms at -23..-25 dBFS (a real vowel, the "o" of
    "go"), 70 ms at -58 dBFS, then speech."""
    voice = clip("goforward")
    vowel = faded(voice[round(0.235 * RATE) : round(0.295 * RATE)])
    gap = noise(-58.0, 0.07, seed=3)
    word = clip("arctic-a0009")[round(WORD_STARTS["arctic-a0009"] * RATE) :]
    lead = np.zeros(round(LEAD_S * RATE), np.float32)
    x = placed([lead, vowel, gap, word])
    return Case("level syllable, 70 ms pause", x, heard_onset_s(x, LEAD_S), LEAD_S)


def after_noise(level_dbfs: float = -39.0) -> Case:
    """Speech 1 s into steady noise that goes on under it."""
    voice = clip("goforward")
    lead = np.zeros(round(1.0 * RATE), np.float32)
    x = placed([lead, voice], noise(level_dbfs, 1.0 + voice.size / RATE))
    return Case(f"speech after {level_dbfs:g} dBFS noise", x, 1.0 + clip_onset_s("goforward"))


def breath_alone() -> Case:
    """The breath that opens librivox-0930 (-41..-44 dBFS, 80 ms), its room tone, no word."""
    lead = np.zeros(round(LEAD_S * RATE), np.float32)
    return Case("breath alone", placed([lead, clip("librivox-0930")[: round(0.2 * RATE)]]), None)


def noise_alone(level_dbfs: float) -> Case:
    return Case(f"noise {level_dbfs:g} dBFS", noise(level_dbfs, 3.0), None)


def coded(case: Case) -> Case:
    y = opus(case.audio)
    if case.word_s is not None:
        word = case.word_s + OPUS_DELAY_S
        return Case(f"{case.name} (Opus)", y, heard_onset_s(y, word), word)
    onset = None if case.onset_s is None else case.onset_s + OPUS_DELAY_S
    return Case(f"{case.name} (Opus)", y, onset)


CLIPS = tuple(WORD_STARTS)
NOISE_LEVELS = (-30.0, -35.0, -39.0, -45.0, -50.0)
BUILDERS: dict[str, Callable[[], Case]] = {
    **{f"speech {n}": (lambda n=n: real_speech(n)) for n in CLIPS},  # type: ignore[misc]
    "level syllable": level_syllable,
    "after noise": after_noise,
    "breath alone": breath_alone,
    **{f"noise {v:g}": (lambda v=v: noise_alone(v)) for v in NOISE_LEVELS},  # type: ignore[misc]
}


def all_cases() -> list[Case]:
    """Every case, plain and through Opus."""
    plain = [build() for build in BUILDERS.values()]
    return plain + [coded(c) for c in plain]
