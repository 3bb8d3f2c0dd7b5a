"""Audio files and sample buffers: validated reading, atomic writing, PCM16 and framing helpers.

Every unusable file raises ``AudioFileError`` naming the file and the problem; no libsndfile
exception escapes for a bad file.
"""

from __future__ import annotations

import io
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import soundfile as sf
import soxr

from duplexsim.core.audiolimits import header_problem
from duplexsim.core.errors import AudioFileError, StorageError
from duplexsim.core.files import write_bytes_atomic

__all__ = [
    "DEFAULT_MAX_DURATION_S",
    "Audio",
    "AudioInfo",
    "DigitalSilence",
    "audio_info",
    "float_to_pcm16",
    "frame_signal",
    "pcm16_to_float",
    "read_audio",
    "resample",
    "to_mono",
    "write_audio",
]

DEFAULT_MAX_DURATION_S = 600.0

FloatArray = npt.NDArray[np.float32]

_SOUNDFILE_ERRORS: tuple[type[Exception], ...] = (
    sf.LibsndfileError,
    RuntimeError,
    ValueError,
    EOFError,
    OSError,
)
_WRITE_FORMATS = {
    ".wav": ("WAV", "PCM_16"),
    ".flac": ("FLAC", "PCM_16"),
    ".ogg": ("OGG", "VORBIS"),
}
# Bytes per sample of the uncompressed WAV subtypes whose data chunk size maps directly to frames.
_PCM_SAMPLE_BYTES = {
    "PCM_U8": 1,
    "PCM_S8": 1,
    "ULAW": 1,
    "ALAW": 1,
    "PCM_16": 2,
    "PCM_24": 3,
    "PCM_32": 4,
    "FLOAT": 4,
    "DOUBLE": 8,
}
# Containers that store samples as they are (their size bounds how many there can be)
_UNCOMPRESSED = {"WAV", "WAVEX", "RF64", "W64", "AIFF", "AU", "CAF", "RAW"}
# Streaming writers leave these in the data chunk size when they cannot seek back to fix it.
_UNKNOWN_RIFF_SIZES = (0, 0xFFFFFFFF)
_MAX_RIFF_CHUNKS = 256
_READ_BLOCK_FRAMES = 1 << 14


@dataclass(frozen=True, eq=False)  # eq=False: comparing ndarray fields element-wise is ambiguous
class Audio:
    """Mono float32 samples with their rate."""

    samples: FloatArray
    sample_rate: int

    def __post_init__(self) -> None:
        if self.samples.dtype != np.float32 or self.samples.ndim != 1:
            raise ValueError(
                f"Audio needs 1-D float32 samples, got {self.samples.ndim}-D {self.samples.dtype}"
            )
        if self.sample_rate <= 0:
            raise ValueError(f"sample_rate must be positive, got {self.sample_rate}")
        if not np.isfinite(self.samples).all():
            raise ValueError("Audio samples must be finite")

    @property
    def duration_s(self) -> float:
        return len(self.samples) / self.sample_rate


@dataclass(frozen=True)
class AudioInfo:
    """What an audio file's header says about it."""

    path: str
    sample_rate: int
    channels: int
    frames: int
    format: str  # libsndfile major format: "WAV", "FLAC", "OGG", ...

    @property
    def duration_s(self) -> float:
        return self.frames / self.sample_rate


def audio_info(
    path: str | os.PathLike[str], *, max_duration_s: float = DEFAULT_MAX_DURATION_S
) -> AudioInfo:
    """Validate an audio file from its header alone, without decoding the samples."""
    name = os.fspath(path)
    _check_max_duration(max_duration_s)
    with _open_sound_file(name) as f:
        return _checked_info(name, f, max_duration_s)


def read_audio(
    path: str | os.PathLike[str],
    *,
    sample_rate: int | None = None,
    max_duration_s: float = DEFAULT_MAX_DURATION_S,
) -> Audio:
    """Decode a whole file to mono float32, optionally resampled to ``sample_rate``."""
    name = os.fspath(path)
    _check_max_duration(max_duration_s)
    if sample_rate is not None:
        _check_rate("sample_rate", sample_rate)
    with _open_sound_file(name) as f:
        info = _checked_info(name, f, max_duration_s)
        mono, bad = _decode(name, f, info)
    if bad:
        plural = "s" if bad != 1 else ""
        raise AudioFileError(name, f"contains {bad} non-finite sample{plural} (NaN/inf)")
    if sample_rate is None:
        return Audio(mono, info.sample_rate)
    return Audio(resample(mono, info.sample_rate, sample_rate), sample_rate)


def to_mono(samples: npt.NDArray[Any]) -> FloatArray:
    """(frames,) or (frames, channels) -> float32 (frames,), the mean of the channels."""
    if samples.ndim == 1:
        return np.asarray(samples, dtype=np.float32)
    if samples.ndim != 2 or samples.shape[1] < 1:
        raise ValueError(f"expected (frames,) or (frames, channels) samples, got {samples.shape}")
    mono: FloatArray = np.asarray(samples, dtype=np.float32).mean(axis=1, dtype=np.float32)
    return mono


def resample(samples: npt.NDArray[Any], from_rate: int, to_rate: int) -> FloatArray:
    """Resample (frames,) or (frames, channels) samples with soxr's HQ filter."""
    _check_rate("from_rate", from_rate)
    _check_rate("to_rate", to_rate)
    data = np.ascontiguousarray(samples, dtype=np.float32)
    if from_rate == to_rate or data.shape[0] == 0:
        return data
    out: FloatArray = np.asarray(
        soxr.resample(data, from_rate, to_rate, quality="HQ"), dtype=np.float32
    )
    return out


def float_to_pcm16(samples: npt.NDArray[Any]) -> bytes:
    """Float samples -> little-endian int16 bytes; NaN becomes silence, the rest is clipped."""
    # One scale (32768) both ways, as libsndfile uses, so int16 -> float -> int16 is exact.
    # This runs for every frame of every session: in-place float64 work, no temporaries, and
    # ufuncs rather than np.clip (whose Python-level checks cost more than the work on 20 ms).
    scaled = np.array(samples, dtype=np.float64, copy=True).ravel()
    scaled *= 32768.0
    np.rint(scaled, out=scaled)
    np.minimum(scaled, 32767.0, out=scaled)
    np.maximum(scaled, -32768.0, out=scaled)
    nan = np.isnan(scaled)
    if nan.any():
        scaled[nan] = 0.0
    return scaled.astype("<i2").tobytes()


class DigitalSilence:
    """All-zero PCM16 bytes and float32 samples, made once per length: a continuous stream is
    mostly silence, and comparing its bytes with these is far cheaper than decoding them."""

    def __init__(self) -> None:
        self._pcm16 = b""
        self._samples: FloatArray = np.zeros(0, dtype=np.float32)

    def pcm16(self, n_bytes: int) -> bytes:
        if len(self._pcm16) != n_bytes:
            self._pcm16 = bytes(n_bytes)
        return self._pcm16

    def decoded(self, data: bytes) -> FloatArray | None:
        """``pcm16_to_float(data)`` when ``data`` is whole PCM16 samples of digital silence
        (shared read-only zeros), else None: decode it the usual way."""
        if len(data) % 2 or data != self.pcm16(len(data)):
            return None
        return self.samples(len(data) // 2)

    def samples(self, n: int) -> FloatArray:
        """Read-only zeros (shared: a caller that wants to write makes a copy)."""
        if self._samples.size != n:
            self._samples = np.zeros(n, dtype=np.float32)
            self._samples.flags.writeable = False
        return self._samples


def pcm16_to_float(data: bytes | bytearray | memoryview) -> FloatArray:
    """Little-endian int16 bytes -> float32 samples in [-1, 1)."""
    raw = memoryview(data).cast("B")
    if len(raw) % 2:
        raise ValueError(f"PCM16 data must have an even number of bytes, got {len(raw)}")
    ints = np.frombuffer(raw, dtype="<i2")
    return ints.astype(np.float32) * np.float32(1.0 / 32768.0)


def frame_signal(samples: npt.NDArray[Any], frame_len: int) -> FloatArray:
    """Split 1-D samples into rows of ``frame_len``; the last row is zero-padded."""
    if frame_len <= 0:
        raise ValueError(f"frame_len must be positive, got {frame_len}")
    data = np.asarray(samples, dtype=np.float32)
    if data.ndim != 1:
        raise ValueError(f"frame_signal needs 1-D samples, got shape {data.shape}")
    n_frames = -(-len(data) // frame_len)
    frames = np.zeros((n_frames, frame_len), dtype=np.float32)
    frames.reshape(-1)[: len(data)] = data
    return frames


def write_audio(
    path: str | os.PathLike[str],
    samples: npt.NDArray[Any],
    sample_rate: int,
    *,
    subtype: str | None = None,
) -> None:
    """Write (frames,) or (frames, channels) samples; the format follows the file suffix.

    Readers never see a half-written file: the data goes to a temporary file in the same
    directory, which then replaces ``path``.
    """
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in _WRITE_FORMATS:
        known = ", ".join(_WRITE_FORMATS)
        raise ValueError(f"cannot write audio with suffix {target.suffix!r}; use one of {known}")
    fmt, default_subtype = _WRITE_FORMATS[suffix]
    if samples.ndim not in (1, 2):
        raise ValueError(f"expected (frames,) or (frames, channels) samples, got {samples.shape}")
    _check_rate("sample_rate", sample_rate)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(target.parent, exc, "create") from None
    # encoded in memory, then written by Python: a full or read-only disk is then an OSError
    # with its cause, where libsndfile would only say "System error"
    buffer = io.BytesIO()
    sf.write(buffer, samples, sample_rate, format=fmt, subtype=subtype or default_subtype)
    write_bytes_atomic(target, buffer.getvalue())


def _check_rate(name: str, rate: int) -> None:
    if rate <= 0:
        raise ValueError(f"{name} must be a positive number of Hz, got {rate}")


def _check_max_duration(max_duration_s: float) -> None:
    if not max_duration_s > 0:
        raise ValueError(f"max_duration_s must be positive, got {max_duration_s}")


def _check_file(path: str) -> None:
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise AudioFileError(path, "file not found") from None
    except OSError as exc:
        raise AudioFileError(path, f"cannot access file ({exc.strerror})") from exc
    if stat.S_ISDIR(st.st_mode):
        raise AudioFileError(path, "is a directory, not an audio file")
    if not stat.S_ISREG(st.st_mode):
        raise AudioFileError(path, "is not a regular file")
    if st.st_size == 0:
        raise AudioFileError(path, "empty file (0 bytes)")


def _open_sound_file(path: str) -> Any:
    _check_file(path)
    try:
        # libsndfile reports an unreadable file only as "System error"; Python names the cause.
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise AudioFileError(path, f"cannot read file ({exc.strerror})") from exc
    try:
        return sf.SoundFile(path)
    except _SOUNDFILE_ERRORS as exc:
        raise AudioFileError(path, f"not a readable audio file ({_reason(exc)})") from exc


def _reason(exc: Exception) -> str:
    text = exc.error_string if isinstance(exc, sf.LibsndfileError) else str(exc)
    # libsndfile prefixes some decoder messages with "Error : ", which says nothing here.
    return str(text).strip().removeprefix("Error : ").rstrip(".") or type(exc).__name__


def _checked_info(path: str, f: Any, max_duration_s: float) -> AudioInfo:
    info = AudioInfo(path, int(f.samplerate), int(f.channels), int(f.frames), str(f.format))
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise AudioFileError(path, f"cannot access file ({exc.strerror})") from exc
    problem = header_problem(
        rate=info.sample_rate,
        channels=info.channels,
        frames=info.frames,
        sample_bytes=_stored_sample_bytes(str(f.format), str(f.subtype)),
        file_size=size,
    )
    if problem is not None:  # before a sample is allocated
        raise AudioFileError(path, problem)
    declared = _riff_declared_frames(path, info.channels, str(f.subtype))
    if declared is not None and declared > info.frames:
        raise AudioFileError(path, _truncated(declared, info.frames))
    if info.frames <= 0:
        raise AudioFileError(path, "no audio data (0 frames)")
    if info.duration_s > max_duration_s:
        raise AudioFileError(
            path,
            f"absurdly long: {info.duration_s:.2f} s, the limit is {max_duration_s:.2f} s",
        )
    return info


def _stored_sample_bytes(major: str, subtype: str) -> int | None:
    """Bytes per sample as the file stores them; None where they are compressed (FLAC says
    PCM_16 of what it decodes to)."""
    return _PCM_SAMPLE_BYTES.get(subtype) if major in _UNCOMPRESSED else None


def _truncated(declared: int, held: int) -> str:
    return f"truncated: header says {declared} frames, file holds {held}"


def _riff_declared_frames(path: str, channels: int, subtype: str) -> int | None:
    """Frames the WAV data chunk header promises; None when not a plain RIFF/WAVE file.

    libsndfile quietly shrinks the frame count of a cut-off WAV to what the file holds, so
    the only trace of the truncation is the size in the data chunk header.
    """
    sample_bytes = _PCM_SAMPLE_BYTES.get(subtype)
    if sample_bytes is None:
        return None
    try:
        with open(path, "rb") as fh:
            size = _riff_data_size(fh)
    except OSError as exc:
        raise AudioFileError(path, f"cannot read file ({exc.strerror})") from exc
    if size is None or size in _UNKNOWN_RIFF_SIZES:
        return None
    return size // (sample_bytes * channels)


def _riff_data_size(fh: Any) -> int | None:
    head = fh.read(12)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    for _ in range(_MAX_RIFF_CHUNKS):
        chunk = fh.read(8)
        if len(chunk) < 8:
            return None
        chunk_id, size = struct.unpack("<4sI", chunk)
        if chunk_id == b"data":
            return int(size)
        fh.seek(size + (size & 1), os.SEEK_CUR)  # chunks are word-aligned
    return None


def _decode(path: str, f: Any, info: AudioInfo) -> tuple[FloatArray, int]:
    """All frames mixed down to mono float32, and how many samples were not finite; read in
    blocks (to locate a failure, and so that only one block holds every channel)."""
    out = np.empty(info.frames, dtype=np.float32)
    block = np.empty((min(_READ_BLOCK_FRAMES, info.frames), info.channels), dtype=np.float32)
    held = bad = 0
    while held < info.frames:
        part = block[: info.frames - held]
        try:
            got = len(f.read(out=part))
        except _SOUNDFILE_ERRORS as exc:
            raise AudioFileError(
                path,
                f"truncated or corrupt: decoding failed after {held} of {info.frames} frames "
                f"({_reason(exc)})",
            ) from exc
        if got == 0:
            break
        bad += part[:got].size - int(np.count_nonzero(np.isfinite(part[:got])))
        out[held : held + got] = to_mono(part[:got])
        held += got
    if held < info.frames:
        raise AudioFileError(path, _truncated(info.frames, held))
    return out, bad
