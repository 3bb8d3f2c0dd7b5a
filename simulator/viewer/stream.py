"""A track drawn without holding it: read block by block, mixed to mono, resampled to the page's
rate, and folded into its envelope and its voice activity as it goes. Memory is a few blocks and
the envelope's columns, whatever the track's length; time is linear in it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from duplexsim.core.bundle import MAX_RATE
from duplexsim.core.errors import AudioFileError
from duplexsim.core.vad import Segment, StreamingVad, VadConfig
from duplexsim.viewer.envelope import Envelope, EnvelopeBuilder

__all__ = ["BLOCK_FRAMES", "MAX_CHANNELS", "DrawnTrack", "drawn_track"]

BLOCK_FRAMES = 1 << 16
MAX_CHANNELS = 8  # a session's tracks are mono or stereo


@dataclass(frozen=True)
class DrawnTrack:
    vad: list[Segment]
    envelope: Envelope


def drawn_track(
    path: Path, rate: int, columns: int, vad: VadConfig, max_duration_s: float
) -> DrawnTrack:
    """``path``'s envelope over ``columns`` and its voiced segments, at ``rate`` (the VAD's);
    AudioFileError naming the file when it cannot be read or is longer than ``max_duration_s``."""
    try:
        with sf.SoundFile(str(path)) as f:
            _check(path, f, max_duration_s)
            expected = round(f.frames * rate / f.samplerate)
            resampler = soxr.ResampleStream(f.samplerate, rate, 1, dtype="float32")
            folded = _Fold(expected, rate, columns, vad)
            for block in f.blocks(BLOCK_FRAMES, dtype="float32", always_2d=True):
                folded.push(resampler.resample_chunk(block.mean(axis=1, dtype=np.float32)))
            folded.push(resampler.resample_chunk(np.zeros(0, np.float32), last=True))
    except (sf.LibsndfileError, RuntimeError, ValueError) as exc:
        raise AudioFileError(path, f"cannot be drawn ({exc})") from None
    return folded.finish()


def _check(path: Path, f: sf.SoundFile, max_duration_s: float) -> None:
    if not 0 < f.samplerate <= MAX_RATE or not 0 < f.channels <= MAX_CHANNELS:
        raise AudioFileError(path, f"{f.samplerate} Hz, {f.channels} channels: not a session's")
    if f.frames / f.samplerate > max_duration_s:
        raise AudioFileError(
            path,
            f"absurdly long: {f.frames / f.samplerate:.2f} s, the limit is {max_duration_s:.2f} s",
        )


class _Fold:
    def __init__(self, expected: int, rate: int, columns: int, vad: VadConfig) -> None:
        self.envelope = EnvelopeBuilder(expected, rate, columns)
        self.vad = StreamingVad(rate, vad)
        self.frame_s = vad.frame_s
        self.spans: list[tuple[int, int]] = []

    def push(self, samples: np.ndarray) -> None:
        x = np.nan_to_num(np.asarray(samples, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
        self.envelope.push(x)
        self._spans(self.vad.speech(x))

    def _spans(self, found: list[tuple[int, int]]) -> None:
        for lo, hi in found:
            if self.spans and self.spans[-1][1] == lo:
                self.spans[-1] = (self.spans[-1][0], hi)
            else:
                self.spans.append((lo, hi))

    def finish(self) -> DrawnTrack:
        self._spans(self.vad.finish())
        voiced = [Segment(lo * self.frame_s, hi * self.frame_s) for lo, hi in self.spans]
        return DrawnTrack(voiced, self.envelope.finish())
