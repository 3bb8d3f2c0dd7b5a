"""One direction of a two-model session: exact to the sample at any pair of rates."""

from __future__ import annotations

import numpy as np
import pytest

from duplexsim.core.relay import Relay
from duplexsim.core.timeline import OutputTrack


def track(rate: int, samples: np.ndarray) -> OutputTrack:
    t = OutputTrack(rate)
    t.place(samples.astype(np.float32), 0.0)
    return t


def relayed(relay: Relay, source: OutputTrack, frames: int, **kw: float) -> np.ndarray:
    return np.concatenate([relay.frame(k, source, **kw) for k in range(frames)])


def test_at_one_rate_frame_k_holds_the_source_two_frames_and_the_bridge_earlier():
    x = np.arange(1, 16001, dtype=np.float32) / 16000  # every sample tells where it was
    relay = Relay(16000, 16000, 0.02, 0.1)
    assert relay.lag == 2240 and relay.delay_s == 0.14
    out = relayed(relay, track(16000, x), 50)
    assert out.size == 50 * 320
    assert not out[:2240].any()
    assert np.array_equal(out[2240:16000], x[: 16000 - 2240])


@pytest.mark.parametrize(
    ("src", "dst"), [(24000, 16000), (16000, 24000), (48000, 16000), (24000, 48000), (8000, 16000)]
)
@pytest.mark.parametrize("frame_s", [0.02, 0.08])
def test_between_rates_a_click_is_heard_exactly_the_delay_later(src, dst, frame_s):
    x = np.zeros(3 * src, np.float32)
    x[src] = 1.0  # at 1 s
    relay = Relay(src, dst, frame_s, 0.1)
    frames = round(2.4 / frame_s)
    out = relayed(relay, track(src, x), frames)
    assert relay.lag == round((2 * frame_s + 0.1) * src) + 32  # and the kernel's look-ahead
    assert out.size == round(frames * frame_s * dst)  # whole frames, every one
    assert int(np.argmax(np.abs(out))) == round((1.0 + relay.delay_s) * dst)


@pytest.mark.parametrize(("src", "dst"), [(24000, 16000), (16000, 24000), (44100, 16000)])
def test_between_rates_a_tone_below_both_nyquists_passes_and_silence_stays_silence(src, dst):
    t = np.arange(2 * src) / src
    tone = (0.5 * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32)
    relay = Relay(src, dst, 0.02, 0.1)
    out = relayed(relay, track(src, tone), 100)
    lag = round(relay.delay_s * dst)
    want = 0.5 * np.sin(2 * np.pi * 440.0 * (np.arange(lag, out.size) / dst - relay.delay_s))
    assert np.abs(out[lag + 64 :] - want[64:]).max() < 1e-3
    assert not relayed(Relay(src, dst, 0.02, 0.1), track(src, 0 * tone), 20).any()


def test_audio_from_where_it_is_muted_on_is_not_relayed():
    x = np.ones(16000, np.float32)
    out = relayed(Relay(16000, 16000, 0.02, 0.0), track(16000, x), 50, muted_from_s=0.5)
    assert out[640:8640].all() and not out[8640:].any()  # two frames late, as everything


def test_frames_come_in_order():
    relay, source = Relay(16000, 16000, 0.02, 0.1), track(16000, np.zeros(10, np.float32))
    relay.frame(0, source)
    with pytest.raises(ValueError, match="relay frame 2 asked after frame 0"):
        relay.frame(2, source)


@pytest.mark.parametrize("args", [(0, 16000, 0.02, 0.1), (16000, 16000, 0.0, 0.1), (1, 1, 1, -1)])
def test_nonsense_is_refused(args):
    with pytest.raises(ValueError):
        Relay(*args)
