"""The per-frame classification (flags and levels) against its plain statement, exactly: the
hot path avoids numpy's Python-level wrappers and converts only loud frames for the VAD, and
must give the same bits on real speech, clipped peaks, noise and digital silence."""

from __future__ import annotations

import numpy as np
import pytest
import webrtcvad

from duplexsim.core.audio import read_audio
from duplexsim.core.vad import VAD_RATE, VadConfig, _classify
from duplexsim.run.demo_data import demo_benchmark

FRAME = 160  # 10 ms at VAD_RATE


def plain(frames: np.ndarray, cfg: VadConfig, vad: webrtcvad.Vad | None) -> tuple:
    """The classification as first written: every frame converted, numpy's own wrappers."""
    n = frames.shape[0]
    if n == 0 or not frames.any():
        return np.zeros(n, dtype=bool), np.full(n, -200.0)
    rms = np.sqrt(np.mean(np.square(frames, dtype=np.float64), axis=1))
    level = 20.0 * np.log10(np.maximum(rms, 1e-10))
    loud = level > cfg.energy_dbfs
    if cfg.kind == "energy" or vad is None:
        return np.asarray(loud, dtype=bool), level
    pcm = np.clip(np.rint(frames * 32768.0), -32768, 32767).astype("<i2")
    flags = np.zeros(n, dtype=bool)
    for i in np.flatnonzero(loud):
        flags[i] = vad.is_speech(pcm[i].tobytes(), VAD_RATE)
    return flags, level


def streams() -> list[np.ndarray]:
    """Real speech (four demo contexts and their references), then edge cases: peaks past full
    scale, noise around the energy threshold, digital silence between loud frames."""
    folder = demo_benchmark() / "audio"
    names = ["ar-anger-1", "en-sadness-1", "hi-elation-1", "tl-confusion-1"]
    out = [
        read_audio(folder / f"{name}.{kind}.ogg", sample_rate=VAD_RATE).samples
        for name in names
        for kind in ("context", "reference")
    ]
    rng = np.random.default_rng(7)
    loud = (rng.standard_normal(40 * FRAME) * 0.9).astype(np.float32)  # clips at +-1
    edge = (rng.standard_normal(40 * FRAME) * 10 ** (-45 / 20)).astype(np.float32)
    gaps = loud.copy()
    gaps[:: 3 * FRAME] = 0.0
    gaps[FRAME : 4 * FRAME] = 0.0
    return [*out, loud, edge, gaps, np.zeros(10 * FRAME, np.float32)]


@pytest.mark.parametrize("kind", ["webrtc", "energy"])
@pytest.mark.parametrize("per_call", [1, 2, 7])
def test_the_classification_is_its_plain_statement_bit_for_bit(kind: str, per_call: int) -> None:
    cfg = VadConfig(kind=kind)  # type: ignore[arg-type]
    for x in streams():
        n = x.size // FRAME
        frames = x[: n * FRAME].reshape(n, FRAME)
        ours, theirs = webrtcvad.Vad(cfg.aggressiveness), webrtcvad.Vad(cfg.aggressiveness)
        for i in range(0, n, per_call):
            got = _classify(frames[i : i + per_call], cfg, ours if kind == "webrtc" else None)
            want = plain(frames[i : i + per_call], cfg, theirs if kind == "webrtc" else None)
            assert np.array_equal(got[0], want[0]) and got[0].dtype == bool
            assert np.array_equal(got[1], want[1]) and got[1].dtype == np.float64
