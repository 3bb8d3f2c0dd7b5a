"""Tests for duplexsim.core.audio: buffer helpers, round-trips and malformed files."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from duplexsim.core.audio import (
    Audio,
    audio_info,
    float_to_pcm16,
    frame_signal,
    pcm16_to_float,
    read_audio,
    resample,
    to_mono,
    write_audio,
)
from duplexsim.core.errors import AudioFileError, InputError

SR = 16000


def sine(seconds: float = 1.0, freq: float = 440.0, sr: int = SR, amp: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def pcm_exact(n: int, seed: int = 0) -> np.ndarray:
    """Samples that PCM_16 stores exactly (libsndfile scales float by 32768)."""
    ints = np.random.default_rng(seed).integers(-32768, 32768, n)
    return (ints / 32768).astype(np.float32)


# --- PCM16 conversions -----------------------------------------------------------------------


def test_float_to_pcm16_scales_rounds_and_clips() -> None:
    samples = np.array([0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 1e-5], dtype=np.float32)
    expected = struct.pack("<8h", 0, 16384, -16384, 32767, -32768, 32767, -32768, 0)
    assert float_to_pcm16(samples) == expected


def test_float_to_pcm16_turns_nan_into_silence() -> None:
    assert float_to_pcm16(np.array([np.nan], dtype=np.float32)) == b"\x00\x00"


def test_pcm16_to_float_exact_values() -> None:
    data = struct.pack("<5h", -32768, -1, 0, 1, 32767)
    out = pcm16_to_float(data)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array([-32768, -1, 0, 1, 32767], np.float32) / 32768)
    assert np.array_equal(pcm16_to_float(bytearray(data)), out)
    assert np.array_equal(pcm16_to_float(memoryview(data)), out)


def test_pcm16_round_trip_is_exact() -> None:
    ints = np.arange(-32768, 32768, dtype="<i2")
    data = ints.tobytes()
    assert float_to_pcm16(pcm16_to_float(data)) == data


def test_pcm16_to_float_rejects_odd_length() -> None:
    with pytest.raises(ValueError, match="even number of bytes"):
        pcm16_to_float(b"\x00\x01\x02")


def test_pcm16_empty() -> None:
    assert pcm16_to_float(b"").shape == (0,)
    assert float_to_pcm16(np.zeros(0, np.float32)) == b""


# --- framing, mono, resampling ---------------------------------------------------------------


def test_frame_signal_pads_last_frame() -> None:
    frames = frame_signal(np.arange(10, dtype=np.float32), 4)
    assert frames.shape == (3, 4)
    assert frames.dtype == np.float32
    np.testing.assert_array_equal(frames, [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 0]])


def test_frame_signal_exact_multiple_and_empty() -> None:
    assert frame_signal(np.ones(8, np.float32), 4).shape == (2, 4)
    assert frame_signal(np.ones(1, np.float32), 4).shape == (1, 4)
    assert frame_signal(np.zeros(0, np.float32), 160).shape == (0, 160)


@pytest.mark.parametrize("frame_len", [0, -3])
def test_frame_signal_rejects_bad_frame_len(frame_len: int) -> None:
    with pytest.raises(ValueError, match="frame_len"):
        frame_signal(np.ones(4, np.float32), frame_len)


def test_to_mono_means_channels() -> None:
    stereo = np.array([[0.5, 0.25], [1.0, -1.0], [-0.5, -0.25]], dtype=np.float32)
    mono = to_mono(stereo)
    assert mono.dtype == np.float32
    np.testing.assert_array_equal(mono, [0.375, 0.0, -0.375])


def test_to_mono_keeps_mono_and_rejects_other_shapes() -> None:
    np.testing.assert_array_equal(to_mono(np.array([0.1, 0.2])), np.array([0.1, 0.2], np.float32))
    with pytest.raises(ValueError):
        to_mono(np.zeros((2, 2, 2), np.float32))


@pytest.mark.parametrize(("src", "dst"), [(16000, 24000), (16000, 8000), (48000, 16000)])
def test_resample_length_and_dtype(src: int, dst: int) -> None:
    out = resample(sine(1.0, sr=src), src, dst)
    assert out.dtype == np.float32
    assert out.shape == (dst,)
    # A 440 Hz tone keeps its level through the HQ filter.
    assert np.sqrt(np.mean(out**2)) == pytest.approx(0.5 / np.sqrt(2), rel=0.02)


def test_resample_identity_and_empty() -> None:
    x = sine(0.1)
    np.testing.assert_array_equal(resample(x, SR, SR), x)
    empty = resample(np.zeros(0, np.float32), SR, 24000)
    assert empty.shape == (0,)
    assert empty.dtype == np.float32
    with pytest.raises(ValueError):
        resample(x, 0, SR)


def test_audio_dataclass() -> None:
    audio = Audio(np.zeros(8000, np.float32), SR)
    assert audio.duration_s == 0.5
    with pytest.raises(ValueError):
        Audio(np.zeros((10, 2), np.float32), SR)
    with pytest.raises(ValueError):
        Audio(np.array([np.nan], np.float32), SR)


# --- writing and reading ---------------------------------------------------------------------


@pytest.mark.parametrize(("suffix", "fmt"), [(".wav", "WAV"), (".flac", "FLAC")])
def test_lossless_round_trip_is_exact(tmp_path: Path, suffix: str, fmt: str) -> None:
    path = tmp_path / f"clip{suffix}"
    samples = pcm_exact(SR)
    write_audio(path, samples, SR)
    info = audio_info(path)
    assert (info.path, info.sample_rate, info.channels, info.frames, info.format) == (
        str(path),
        SR,
        1,
        SR,
        fmt,
    )
    assert info.duration_s == 1.0
    audio = read_audio(path)
    assert audio.sample_rate == SR
    assert audio.samples.dtype == np.float32
    np.testing.assert_array_equal(audio.samples, samples)


def test_ogg_round_trip_within_tolerance(tmp_path: Path) -> None:
    path = tmp_path / "clip.ogg"
    samples = sine(1.0)
    write_audio(path, samples, SR)
    info = audio_info(path)
    assert (info.format, info.frames, info.channels) == ("OGG", SR, 1)
    audio = read_audio(path)
    assert audio.samples.shape == samples.shape
    error_rms = np.sqrt(np.mean((audio.samples - samples) ** 2))
    assert error_rms < 0.02


def test_stereo_file_is_downmixed(tmp_path: Path) -> None:
    path = tmp_path / "stereo.wav"
    left, right = pcm_exact(1000, seed=1), pcm_exact(1000, seed=2)
    write_audio(path, np.stack([left, right], axis=1), SR, subtype="FLOAT")
    assert audio_info(path).channels == 2
    np.testing.assert_array_equal(read_audio(path).samples, (left + right) / np.float32(2))


def test_read_audio_resamples_to_target_rate(tmp_path: Path) -> None:
    path = tmp_path / "clip.wav"
    write_audio(path, sine(1.0), SR)
    audio = read_audio(path, sample_rate=24000)
    assert audio.sample_rate == 24000
    assert audio.samples.shape == (24000,)
    assert audio.duration_s == 1.0
    assert read_audio(path, sample_rate=SR).samples.shape == (SR,)


def test_write_audio_creates_dirs_and_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "out.wav"
    write_audio(path, pcm_exact(100), SR)
    write_audio(path, pcm_exact(200), SR)  # replaces the existing file
    assert read_audio(path).samples.shape == (200,)
    assert os.listdir(path.parent) == ["out.wav"]


def test_write_audio_cleans_up_after_failure(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_audio(tmp_path / "x.ogg", pcm_exact(100), SR, subtype="PCM_16")
    assert os.listdir(tmp_path) == []


def test_write_audio_rejects_unknown_suffix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'\.mp4'"):
        write_audio(tmp_path / "clip.mp4", pcm_exact(100), SR)
    assert os.listdir(tmp_path) == []


def test_streaming_wav_with_unknown_data_size_is_accepted(tmp_path: Path) -> None:
    # Pipe writers leave 0xFFFFFFFF as the data size; that is not a truncation.
    path = tmp_path / "stream.wav"
    samples = pcm_exact(1000)
    write_audio(path, samples, SR)
    data = bytearray(path.read_bytes())
    data[40:44] = struct.pack("<I", 0xFFFFFFFF)
    path.write_bytes(bytes(data))
    np.testing.assert_array_equal(read_audio(path).samples, samples)


# --- malformed files -------------------------------------------------------------------------

Case = Callable[[Path], tuple[Path, str]]


def _missing(tmp: Path) -> tuple[Path, str]:
    return tmp / "nope.wav", "file not found"


def _directory(tmp: Path) -> tuple[Path, str]:
    path = tmp / "folder.wav"
    path.mkdir()
    return path, "is a directory, not an audio file"


def _empty(tmp: Path) -> tuple[Path, str]:
    path = tmp / "empty.wav"
    path.write_bytes(b"")
    return path, "empty file (0 bytes)"


def _text(tmp: Path) -> tuple[Path, str]:
    path = tmp / "notes.wav"
    path.write_text("this is a shopping list, not audio\n" * 20)
    return path, "not a readable audio file (Format not recognised)"


def _random_bytes(tmp: Path) -> tuple[Path, str]:
    path = tmp / "noise.wav"
    path.write_bytes(np.random.default_rng(7).bytes(4096))
    return path, "not a readable audio file"


def _broken_riff_header(tmp: Path) -> tuple[Path, str]:
    path = tmp / "broken.wav"
    write_audio(path, sine(0.1), SR)
    data = bytearray(path.read_bytes())
    data[0:4], data[8:12] = b"RIFX", b"WAVX"
    path.write_bytes(bytes(data))
    return path, "not a readable audio file"


def _truncated_wav(tmp: Path) -> tuple[Path, str]:
    path = tmp / "cut.wav"
    write_audio(path, sine(1.0), SR)
    data = path.read_bytes()
    cut = data[: len(data) // 2]
    path.write_bytes(cut)
    held = (len(cut) - 44) // 2  # 44-byte canonical header, 2 bytes per mono frame
    return path, f"truncated: header says {SR} frames, file holds {held}"


def _zero_frames(tmp: Path) -> tuple[Path, str]:
    path = tmp / "silent.wav"
    write_audio(path, np.zeros(0, np.float32), SR)
    return path, "no audio data (0 frames)"


def _one_nan(tmp: Path) -> tuple[Path, str]:
    path = tmp / "nan.wav"
    samples = sine(0.1)
    samples[37] = np.nan
    write_audio(path, samples, SR, subtype="FLOAT")
    return path, "contains 1 non-finite sample (NaN/inf)"


def _all_inf(tmp: Path) -> tuple[Path, str]:
    path = tmp / "inf.wav"
    write_audio(path, np.full((100, 2), np.inf, np.float32), SR, subtype="FLOAT")
    return path, "contains 200 non-finite samples (NaN/inf)"


def _truncated_flac(tmp: Path) -> tuple[Path, str]:
    path = tmp / "cut.flac"
    write_audio(path, pcm_exact(SR), SR)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path, "truncated or corrupt: decoding failed"


def _truncated_ogg(tmp: Path) -> tuple[Path, str]:
    # Cut inside the Vorbis setup header; a later cut just decodes fewer frames (Ogg has no
    # length in its header to compare against).
    path = tmp / "cut.ogg"
    write_audio(path, sine(1.0), SR)
    path.write_bytes(path.read_bytes()[:1000])
    return path, "not a readable audio file (Supported file format but file is malformed)"


def _fifo(tmp: Path) -> tuple[Path, str]:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    path = tmp / "pipe.wav"
    os.mkfifo(path)
    return path, "is not a regular file"


def _unreadable(tmp: Path) -> tuple[Path, str]:
    if not hasattr(os, "geteuid") or os.geteuid() == 0:
        pytest.skip("needs POSIX permissions and a non-root user")
    path = tmp / "locked.wav"
    write_audio(path, sine(0.1), SR)
    path.chmod(0)
    return path, "cannot read file (Permission denied)"


MALFORMED: dict[str, Case] = {
    "missing": _missing,
    "directory": _directory,
    "empty": _empty,
    "text": _text,
    "random-bytes": _random_bytes,
    "broken-riff-header": _broken_riff_header,
    "truncated-wav": _truncated_wav,
    "zero-frames": _zero_frames,
    "one-nan": _one_nan,
    "all-inf": _all_inf,
    "truncated-flac": _truncated_flac,
    "truncated-ogg": _truncated_ogg,
    "fifo": _fifo,
    "unreadable": _unreadable,
}


@pytest.mark.parametrize("make", MALFORMED.values(), ids=MALFORMED.keys())
def test_read_audio_names_file_and_problem(tmp_path: Path, make: Case) -> None:
    path, problem = make(tmp_path)
    with pytest.raises(AudioFileError) as caught:
        read_audio(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert problem in message
    assert caught.value.path == str(path)
    assert isinstance(caught.value, InputError)


def test_too_long_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "long.wav"
    write_audio(path, sine(1.0), SR)
    for check in (audio_info, read_audio):
        with pytest.raises(AudioFileError) as caught:
            check(path, max_duration_s=0.5)
        assert str(caught.value) == f"{path}: absurdly long: 1.00 s, the limit is 0.50 s"


@pytest.mark.parametrize(
    "name", ["missing", "directory", "empty", "text", "truncated-wav", "zero-frames"]
)
def test_audio_info_rejects_header_problems(tmp_path: Path, name: str) -> None:
    path, problem = MALFORMED[name](tmp_path)
    with pytest.raises(AudioFileError) as caught:
        audio_info(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert problem in str(caught.value)


def test_audio_info_does_not_decode(tmp_path: Path) -> None:
    path, _ = _one_nan(tmp_path)
    assert audio_info(path).frames == SR // 10


def test_soundfile_really_hides_wav_truncation(tmp_path: Path) -> None:
    # Why audio.py parses the RIFF data chunk itself: libsndfile shrinks frames silently.
    path, _ = _truncated_wav(tmp_path)
    assert sf.info(str(path)).frames < SR


def test_bad_arguments_are_value_errors(tmp_path: Path) -> None:
    path = tmp_path / "clip.wav"
    write_audio(path, sine(0.1), SR)
    with pytest.raises(ValueError):
        read_audio(path, sample_rate=0)
    with pytest.raises(ValueError):
        read_audio(path, max_duration_s=0)


def test_write_text_atomic_replaces_with_a_plain_files_mode(tmp_path: Path) -> None:
    import os
    import stat

    from duplexsim.core.files import write_text_atomic

    target = tmp_path / "report.json"
    write_text_atomic(target, "one")
    write_text_atomic(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temporary left
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
    from duplexsim.core.errors import StorageError

    # one line naming the file and the cause, as for a full or read-only disk
    with pytest.raises(StorageError, match=r"x\.json: cannot write \(No such file or directory\)"):
        write_text_atomic(tmp_path / "missing" / "x.json", "x")
