"""Audio files whose headers lie: a sparse file of gigabytes that says 1e9 Hz or 1024 channels is
refused from its header, in one problem line naming it, by every command that reads benchmark
audio, before anything is allocated for its samples."""

from __future__ import annotations

import json
import struct
import tracemalloc
from pathlib import Path

import pytest

from duplexsim.cli import main
from duplexsim.core.audio import audio_info, read_audio
from duplexsim.core.errors import AudioFileError

GB = 10**9
MiB = 2**20


def sparse_wav(path: Path, size: int, rate: int, channels: int, bits: int = 16) -> Path:
    """A PCM WAV of ``size`` bytes whose header says ``rate`` and ``channels``; the samples are
    a hole (no disk is used)."""
    block = channels * bits // 8
    head = b"RIFF" + struct.pack("<I", min(size - 8, 0xFFFFFFFF)) + b"WAVE"
    fmt = struct.pack("<IHHIIHH", 16, 1, channels, rate, (rate * block) & 0xFFFFFFFF, block, bits)
    head += b"fmt " + fmt + b"data" + struct.pack("<I", min(size - 44, 0xFFFFFFFF))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        fh.write(head)
        fh.truncate(size)
    if path.stat().st_blocks * 512 > MiB:
        pytest.skip("this file system does not keep sparse files")
    return path


CRAFTED = {
    "3GB-1e9Hz": (3 * GB, 10**9, 1, "sample rate 1000000000 Hz in header"),
    "10GB-1e9Hz": (10 * GB, 10**9, 1, "sample rate 1000000000 Hz in header"),
    "3GB-1024ch": (3 * GB, 16000, 1024, "1024 channels in header"),
    "10GB-1024ch": (10 * GB, 16000, 1024, "1024 channels in header"),
}


@pytest.fixture(params=CRAFTED.values(), ids=CRAFTED.keys())
def crafted(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str]:
    """A Full-Duplex-Bench folder of one crafted input.wav, and what must be said of it."""
    size, rate, channels, said = request.param
    sparse_wav(tmp_path / "fdb" / "task" / "x1" / "input.wav", size, rate, channels)
    return tmp_path / "fdb", said


def one_line_refusal(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str], limit_mib: float = 16
) -> None:
    tracemalloc.start()
    try:
        code = main(argv)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    # the benchmark's one problem, on its own line under the count, as every manifest problem
    head, line = err.splitlines()
    assert head == "duplexsim: error: 1 problem in benchmark", err
    assert "field 'context':" in line and "x1/input.wav: " in line and said in line, err
    assert peak < limit_mib * MiB, f"peak {peak / MiB:.1f} MiB"


def test_import_fdb_refuses_a_lying_header(
    crafted: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, said = crafted
    one_line_refusal(["benchmark", "import-fdb", str(root)], said, capsys)
    assert not (root / "manifest.jsonl").exists()


def manifest(root: Path) -> Path:
    line = {"id": "task-x1", "language": "en", "task": "task", "context": "task/x1/input.wav"}
    (root / "manifest.jsonl").write_text(json.dumps(line) + "\n")
    return root


@pytest.mark.parametrize("quick", [[], ["--quick"]], ids=["full", "quick"])
def test_check_refuses_a_lying_header(
    crafted: tuple[Path, str], quick: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, said = crafted
    one_line_refusal(["benchmark", "check", str(manifest(root)), *quick], said, capsys)


def test_run_refuses_a_lying_header_before_any_session(
    crafted: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, said = crafted
    runs = tmp_path / "runs"
    argv = ["run", "--model", "fake:echo", "--benchmark", str(manifest(root))]
    one_line_refusal([*argv, "--runs-dir", str(runs), "--quiet"], said, capsys)
    assert not runs.exists() or not any(runs.rglob("*.wav"))


def test_a_header_promising_more_samples_than_the_file_holds_is_truncation(
    tmp_path: Path,
) -> None:
    path = sparse_wav(tmp_path / "short.wav", 44 + 3200, 16000, 1)
    data = bytearray(path.read_bytes())
    data[40:44] = struct.pack("<I", 2 * 16000 * 60)  # a minute in a file of 0.1 s
    path.write_bytes(bytes(data))
    with pytest.raises(AudioFileError, match="truncated: header says 960000 frames"):
        read_audio(path)


def test_many_channels_within_the_limit_decode_block_by_block(tmp_path: Path) -> None:
    """32 channels of 2 s at 48 kHz mix down to mono without a (frames, channels) array."""
    import numpy as np
    import soundfile as sf

    path = tmp_path / "array.wav"
    frames = 2 * 48000
    sf.write(path, np.full((frames, 32), 0.25, np.float32), 48000, subtype="PCM_16")
    assert audio_info(path).channels == 32
    tracemalloc.start()
    try:
        audio = read_audio(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert audio.samples.shape == (frames,) and np.allclose(audio.samples, 0.25)
    assert peak < frames * 32 * 4 / 3  # one block of every channel; all at once: 12 MiB
