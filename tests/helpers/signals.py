"""Synthetic voiced signals and WAV files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf


def voiced_signal(
    seconds: float, rate: int = 16000, *, f0: float = 140.0, peak: float = 0.3
) -> np.ndarray:
    """A speech-like signal (harmonics under a 4 Hz syllable envelope) that webrtcvad calls speech."""
    t = np.arange(round(seconds * rate)) / rate
    tone = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 8))
    envelope = 0.6 + 0.4 * np.sin(2 * np.pi * 4.0 * t)
    x = tone * envelope
    return (peak * x / np.max(np.abs(x))).astype(np.float32)


def write_wav(path: Path, samples: np.ndarray, rate: int = 16000) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, samples, rate, subtype="PCM_16")
    return path
