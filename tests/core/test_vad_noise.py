"""Steady noise is not speech: the run rule keeps webrtcvad's first adapting frames of steady
noise (plain, and through Opus as a Moshi server idles) from reading as a reply, and keeps speech."""

from __future__ import annotations

import numpy as np
import pytest

from duplexsim.core.timing import measure_reply
from duplexsim.core.vad import VadConfig
from tests.helpers.signals import voiced_signal

RATE = 24000


def noise(level_dbfs: float, seconds: float, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(round(seconds * RATE)) * 10 ** (level_dbfs / 20)).astype(np.float32)


def opus_round_trip(x: np.ndarray) -> np.ndarray:
    codec = pytest.importorskip("duplexsim.clients.moshi.codec")
    encoder, decoder = codec.OggOpusEncoder(), codec.OggOpusDecoder()
    return decoder.decode(encoder.encode(x))


@pytest.mark.parametrize("level", [-30.0, -35.0, -39.0, -45.0, -50.0])
@pytest.mark.parametrize("coded", [False, True])
def test_steady_noise_has_no_reply(level: float, coded: bool) -> None:
    x = noise(level, 3.0)
    if coded:
        x = opus_round_trip(x)
    assert measure_reply(x, RATE, speech_end_s=0.5).onset_s is None
    # without the run rule webrtcvad calls the start of it speech (where it is loud enough)
    if level >= -40.0 and not coded:
        loose = VadConfig(min_spread_db=0.0)
        assert measure_reply(x, RATE, speech_end_s=0.5, vad=loose).onset_s is not None


@pytest.mark.parametrize("level", [None, -50.0, -45.0])
@pytest.mark.parametrize("coded", [False, True])
def test_speech_in_noise_keeps_its_onset(level: float | None, coded: bool) -> None:
    x = np.zeros(3 * RATE, np.float32)
    x[RATE : 2 * RATE] = voiced_signal(1.0, RATE)
    if level is not None:
        x = x + noise(level, 3.0)
    if coded:
        x = opus_round_trip(x)
    t = measure_reply(x, RATE, speech_end_s=0.5)
    assert t.onset_s is not None and t.offset_s is not None
    delay = 156 / RATE if coded else 0.0  # the Opus encoder's lookahead
    # the edge is refined at -40 dBFS: noise peaks near it may move it within a VAD frame
    tolerance = 0.003 if level is None or level < -45.0 else 0.016
    assert t.onset_s == pytest.approx(1.0 + delay, abs=tolerance)
    # webrtcvad holds a frame or two of loud noise after speech
    assert t.offset_s == pytest.approx(2.0 + delay, abs=0.012 if level is None else 0.035)
