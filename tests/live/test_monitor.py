"""``run --monitor`` against the fake audio backend: what the output device received is the
recorded session (left + right of stereo.wav), played in real time behind the session clock."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf

from duplexsim.cli import main
from duplexsim.live.audio_io import fake
from tests.helpers.runs import FAST_ARGS, short_benchmark

BUNDLE_FILES = {"input.wav", "output.wav", "stereo.wav", "events.jsonl", "meta.json"}


@pytest.fixture(autouse=True)
def _fresh_fake():
    fake.reset()
    yield
    fake.reset()


def monitored_run(tmp_path, n: int, *extra: str) -> int:
    bench = short_benchmark(tmp_path / "bench", n)
    return main(
        [
            *("run", "--model", "fake:echo", "--benchmark", str(bench), "--run-id", "mon"),
            *("--runs-dir", str(tmp_path / "runs"), "--monitor", "--audio-backend", "fake"),
            *("--audio-rate", "16000", "--audio-latency-ms", "100", *FAST_ARGS, *extra),
        ]
    )


def session_mix(bundle) -> np.ndarray:
    stereo, rate = sf.read(bundle / "stereo.wav", dtype="float32")
    assert rate == 16000
    return np.clip(stereo.sum(axis=1), -1.0, 1.0)


def test_monitor_plays_the_recorded_session(tmp_path, capsys):
    assert monitored_run(tmp_path, 1) == 0
    assert "monitor: played 1 session(s)" in capsys.readouterr().err
    bundle = tmp_path / "runs" / "mon" / "sessions" / "s0"
    assert {p.name for p in bundle.iterdir()} == BUNDLE_FILES
    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["outcome"]["status"] == "ok"
    [out] = fake.outputs()
    assert out.closed and out.rate == 16000
    played, mix = out.audio(), session_mix(bundle)
    # the user's context and the echo, each at its place on the session timeline
    assert played.size == pytest.approx(mix.size, abs=out.block)
    n = min(played.size, mix.size)
    np.testing.assert_allclose(played[:n], mix[:n], atol=1e-6)
    assert np.abs(played[n:]).max(initial=0.0) == 0.0
    onset = meta["outcome"]["timing"]["onset_s"]
    assert np.abs(played[round(onset * 16000) : round((onset + 0.5) * 16000)]).max() > 0.1
    # in real time: block k is written at T0 + latency + (k + 1) x 20 ms, never before
    times = np.array([t for t, _ in out.writes])
    lag = times - np.arange(times.size) * 0.02
    assert lag.max() - lag.min() < 0.05


def test_monitor_plays_one_session_at_a_time(tmp_path, capsys):
    assert monitored_run(tmp_path, 2, "--concurrency", "2") == 0
    assert "monitor: played 1 session(s)" in capsys.readouterr().err
    [out] = fake.outputs()
    played = out.audio()
    sessions = tmp_path / "runs" / "mon" / "sessions"
    mixes = [session_mix(sessions / s) for s in ("s0", "s1")]
    n = min(played.size, *(m.size for m in mixes))
    errors = [np.abs(played[:n] - m[:n]).max() for m in mixes]
    assert min(errors) < 1e-6 < max(errors)  # exactly one of the two concurrent sessions
