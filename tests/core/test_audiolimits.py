"""An audio file's header against the limits and the file's real size, before any allocation."""

from __future__ import annotations

import pytest

from duplexsim.core.audiolimits import MAX_CHANNELS, MAX_RATE, MIN_RATE, header_problem


def problem(
    rate: int = 16000, channels: int = 1, frames: int = 16000, **kw: int | None
) -> str | None:
    sizes = {"sample_bytes": 2, "file_size": 44 + 2 * frames * channels, **kw}
    return header_problem(rate=rate, channels=channels, frames=frames, **sizes)


@pytest.mark.parametrize("rate", [MIN_RATE, 8000, 44100, 48000, MAX_RATE])
@pytest.mark.parametrize("channels", [1, 2, 8, MAX_CHANNELS])
def test_every_real_recording_passes(rate: int, channels: int) -> None:
    assert problem(rate, channels) is None


@pytest.mark.parametrize(
    ("rate", "said"),
    [(0, "sample rate 0 Hz"), (-1, "sample rate -1 Hz"), (MIN_RATE - 1, "999 Hz"),
     (MAX_RATE + 1, "192001 Hz"), (1_000_000_000, "1000000000 Hz in header: outside")],
)  # fmt: skip
def test_a_rate_outside_the_limits_is_refused(rate: int, said: str) -> None:
    assert said in (problem(rate) or "")


@pytest.mark.parametrize("channels", [0, -3, MAX_CHANNELS + 1, 1024])
def test_a_channel_count_outside_the_limits_is_refused(channels: int) -> None:
    assert f"{channels} channels in header: outside 1-{MAX_CHANNELS}" == problem(channels=channels)


def test_uncompressed_samples_must_fit_in_the_file() -> None:
    assert problem(frames=1000, file_size=2000) is None
    assert problem(frames=1000, file_size=1999) == (
        "header says 1000 frames of 1 x 2 bytes, more than the file's 1999 bytes"
    )
    assert problem(frames=1000, channels=2, sample_bytes=3, file_size=5999) is not None
    # compressed: its size says nothing about how many samples it decodes to
    assert problem(frames=10**9, sample_bytes=None, file_size=100) is None
