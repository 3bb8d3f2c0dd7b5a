"""``speech_onset`` reads only as far as the first speech, and must say what ``speech_bounds``
says of the whole clip, to the sample: on windows cut anywhere from real speech (demo contexts,
the recordings in tests/data), at any gain, over noise, and where nothing counts as speech."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duplexsim.core.audio import read_audio
from duplexsim.core.vad import VAD_RATE, VadConfig, speech_bounds, speech_onset
from duplexsim.run.demo_data import demo_benchmark

DATA = __import__("pathlib").Path(__file__).resolve().parents[1] / "data"
CONFIGS = [
    VadConfig(),
    VadConfig(min_spread_db=0.0),  # the fakes' turns
    VadConfig(edge_above_floor=False, onset_floor_db=0.0),
    VadConfig(kind="energy"),
]


def clips() -> list[np.ndarray]:
    folder = demo_benchmark() / "audio"
    demo = [
        read_audio(folder / f"{name}.context.ogg", sample_rate=VAD_RATE).samples
        for name in ("ar-anger-1", "en-sadness-1", "hi-elation-1")
    ]
    human = [read_audio(DATA / name, sample_rate=VAD_RATE).samples for name in ("goforward.flac",)]
    return demo + human


CLIPS = clips()


def whole(x: np.ndarray, cfg: VadConfig) -> float | None:
    bounds = speech_bounds(x, VAD_RATE, cfg)
    return None if bounds is None else bounds[0]


@settings(max_examples=60, deadline=None)
@given(
    clip=st.integers(0, len(CLIPS) - 1),
    start=st.floats(0.0, 0.95),
    length_s=st.floats(0.0, 4.0),
    gain_db=st.floats(-50.0, 6.0),
    noise_db=st.one_of(st.none(), st.floats(-70.0, -35.0)),
    cfg=st.sampled_from(CONFIGS),
)
def test_the_onset_is_the_whole_clips_to_the_sample(
    clip: int,
    start: float,
    length_s: float,
    gain_db: float,
    noise_db: float | None,
    cfg: VadConfig,
) -> None:
    x = CLIPS[clip]
    lo = int(start * x.size)
    window = x[lo : lo + int(length_s * VAD_RATE)] * np.float32(10 ** (gain_db / 20))
    if noise_db is not None:
        rng = np.random.default_rng(lo)
        noise = rng.standard_normal(window.size) * 10 ** (noise_db / 20)
        window = (window + noise).astype(np.float32)
    assert speech_onset(window, VAD_RATE, cfg) == whole(window, cfg)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_silence_noise_and_clicks_have_no_onset_as_the_whole_clip_has_none(cfg: VadConfig) -> None:
    rng = np.random.default_rng(3)
    steady = (rng.standard_normal(VAD_RATE) * 10 ** (-39 / 20)).astype(np.float32)
    click = np.zeros(VAD_RATE, np.float32)
    click[8000:8100] = 0.5  # 6 ms: shorter than any speech
    for x in (np.zeros(VAD_RATE, np.float32), np.zeros(0, np.float32), steady, click):
        assert speech_onset(x, VAD_RATE, cfg) == whole(x, cfg)


def test_another_rate_is_measured_as_the_whole_clip_is() -> None:
    x = read_audio(DATA / "goforward.flac", sample_rate=24000).samples[: 3 * 24000]
    bounds = speech_bounds(x, 24000)
    assert bounds is not None and speech_onset(x, 24000) == bounds[0]
