"""Two-speaker calls made of tones, and a tone scorer, for building benchmarks in tests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import soundfile as sf
from numpy.typing import NDArray

from duplexsim.core.emotions import EMOTION_NAMES, HEAD_NAMES
from duplexsim.core.errors import ConfigError
from duplexsim.scoring.models.base import EmotionModel
from tests.helpers.signals import voiced_signal

RATE = 16000


F0 = {e: 110.0 + 20.0 * i for i, e in enumerate(EMOTION_NAMES)}  # 110 .. 330 Hz


UNSCORABLE_F0 = 420.0  # the tone scorer returns NaN for this one


FACTORY = ["--scorer", "tone", "--factory", "tests.helpers.corpus:tone_factory"]


class ToneScorer(EmotionModel):
    """The emotion whose F0 is nearest the clip's dominant frequency scores 1, the rest 0.1."""

    name = "tone"

    @property
    def dimensions(self) -> tuple[str, ...]:
        return (*HEAD_NAMES, "Extra_Dimension")

    def score(self, clips: Sequence[NDArray[np.float32]]) -> NDArray[np.float32]:
        rows = []
        for clip in clips:
            spectrum = np.abs(np.fft.rfft(clip))
            peak = np.fft.rfftfreq(len(clip), 1 / RATE)[int(np.argmax(spectrum))]
            row = np.full(len(HEAD_NAMES) + 1, 0.1, dtype=np.float32)
            if abs(peak - UNSCORABLE_F0) < 10:
                row[:] = np.nan
            else:
                row[int(np.argmin([abs(peak - f) for f in F0.values()]))] = 1.0
            rows.append(row)
        return np.asarray(rows, dtype=np.float32)


def tone_factory(name: str) -> EmotionModel:
    """``--factory tests.helpers.corpus:tone_factory --scorer tone``."""
    if name == "tone":
        return ToneScorer()
    raise ConfigError(f"unknown test scorer {name!r}")


def call_audio(turns: Sequence[tuple[int, float, float, str | float]], seconds: float):
    x = np.zeros((2, round(seconds * RATE)), dtype=np.float32)
    for speaker, start, end, what in turns:
        f0 = what if isinstance(what, float) else F0[what]
        lo = round(start * RATE)
        x[speaker, lo : lo + round((end - start) * RATE)] = voiced_signal(end - start, f0=f0)
    return x


def write_call(folder: Path, call_id: str, audio: np.ndarray, *, stereo: bool) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    if stereo:
        sf.write(folder / f"{call_id}.wav", audio.T, RATE, subtype="PCM_16")
        return {"audio": f"{call_id}.wav"}
    sf.write(folder / f"{call_id}.a.wav", audio[0], RATE, subtype="PCM_16")
    sf.write(folder / f"{call_id}.b.wav", audio[1], RATE, subtype="PCM_16")
    return {"a": f"{call_id}.a.wav", "b": f"{call_id}.b.wav"}


def write_listing(path: Path, rows: Sequence[dict[str, str]]) -> Path:
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    else:
        columns = list(rows[0])
        lines = [",".join(columns), *(",".join(r[c] for c in columns) for r in rows)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def alternating(emotions: Sequence[str], *, turn_s: float = 0.8, gap_s: float = 0.6):
    """Turns of alternating speakers, one per emotion, ``gap_s`` apart; and the call's length."""
    turns, t = [], 0.5
    for k, emotion in enumerate(emotions):
        turns.append((k % 2, t, t + turn_s, emotion))
        t += turn_s + gap_s
    return turns, t + 0.5


def corpus(root: Path) -> Path:
    """Two calls: 9 Anger pairs in English; 5 Sadness pairs and a Sadness/Pride one in Hindi."""
    anger, _ = alternating(["Anger"] * 10)
    sad, sad_s = alternating(["Sadness"] * 6 + ["Pride"])
    anger_s = alternating(["Anger"] * 10)[1]
    rows = [
        {"id": "en1", "language": "en"}
        | write_call(root, "en1", call_audio(anger, anger_s), stereo=True),
        {"id": "hi1", "language": "hi"}
        | write_call(root, "hi1", call_audio(sad, sad_s), stereo=True),
    ]
    return write_listing(root / "calls.csv", rows)
