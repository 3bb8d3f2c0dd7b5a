"""The audio layer: the session player, the fake backend, sounddevice's one-line errors, and smoke
tests on real PortAudio devices without sound hardware (ALSA null device, JACK dummy driver)."""

from __future__ import annotations

import ctypes.util
import importlib.abc
import importlib.util
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from duplexsim.core.audio import resample
from duplexsim.core.errors import ConfigError
from duplexsim.live.audio_io import (
    AudioOptions,
    AudioUnavailable,
    Player,
    fake,
    open_input,
    open_output,
)
from duplexsim.live.audio_io.device import import_sounddevice, resolve_device
from tests.helpers.paths import REPO
from tests.helpers.signals import voiced_signal

ASOUNDRC = 'pcm.nullsink { type null }\npcm.!default { type plug slave.pcm "nullsink" }\n'


def has_portaudio() -> bool:
    """Checked without importing sounddevice here: PortAudio must initialise in the subprocess,
    under the HOME the test gives it."""
    return (
        importlib.util.find_spec("sounddevice") is not None
        and ctypes.util.find_library("portaudio") is not None
    )


needs_portaudio = pytest.mark.skipif(
    not has_portaudio(),
    reason="needs sounddevice and the PortAudio library (apt-get install libportaudio2)",
)


@pytest.fixture(autouse=True)
def _fresh_fake():
    fake.reset()
    yield
    fake.reset()


def play(player: Player, user_rate: int, model_rate: int, user, model, *, late_s: float = 0.0):
    """One session through the player: user frames from 0, model chunks at their start times."""
    tap = player.claim()
    assert tap is not None
    tap.on_start(time.monotonic(), user_rate, model_rate)
    frame = user_rate // 50
    for n in range(0, user.size, frame):
        tap.on_sent(user[n : n + frame], n / user_rate)
    if late_s:
        time.sleep(late_s)
    for start_s, chunk in model:
        tap.on_placed(chunk, start_s)
    tap.on_end()
    assert player.wait_idle(5.0)


def test_player_mixes_user_and_model_on_the_timeline():
    out = fake.open_output(16000, 320)
    user = voiced_signal(0.4)
    reply = voiced_signal(0.2, f0=220.0)
    with Player(out, latency_s=0.05) as player:
        first = player.claim()
        assert first is not None and player.claim() is None  # one session at a time
        first.on_end()
        assert player.wait_idle(1.0)
        started = time.monotonic()
        play(player, 16000, 16000, user, [(0.3, reply[:1600]), (0.4, reply[1600:])])
        assert player.sessions_played == 1 and player.late_samples == 0
        player.claim().on_end()  # free again once the session has played
    expected = np.zeros(round(0.5 * 16000), np.float32)
    expected[: user.size] += user
    expected[4800 : 4800 + reply.size] += reply
    np.testing.assert_allclose(out.audio(), np.clip(expected, -1, 1), atol=1e-7)
    # block k is written once its content is final: latency + (k + 1) blocks after T0
    times = np.array([t for t, _ in out.writes]) - started
    ideal = 0.05 + (np.arange(times.size) + 1) * 0.02
    assert np.all(times >= ideal - 0.002) and np.all(times < ideal + 0.05)
    assert out.closed


def test_player_resamples_each_side_to_the_device_rate():
    out = fake.open_output(48000, 960)
    user = voiced_signal(0.4)  # 16 kHz
    reply = voiced_signal(0.3, 24000, f0=220.0)  # 24 kHz, placed in two contiguous chunks
    with Player(out, latency_s=0.05) as player:
        play(player, 16000, 24000, user, [(0.2, reply[:2400]), (0.3, reply[2400:])])
    got = out.audio()
    expected = np.zeros(round(0.5 * 48000), np.float32)
    expected[: user.size * 3] += resample(user, 16000, 48000)
    expected[9600 : 9600 + reply.size * 2] += resample(reply, 24000, 48000)
    assert got.size == expected.size
    assert np.abs(got - expected).max() < 0.02  # stream vs whole-clip resampling
    assert np.corrcoef(got, expected)[0, 1] > 0.999


def test_player_counts_model_audio_too_late_to_play():
    out = fake.open_output(16000, 320)
    with Player(out, latency_s=0.02) as player:
        play(
            player,
            16000,
            16000,
            np.zeros(3200, np.float32),
            [(0.0, voiced_signal(0.2))],
            late_s=0.2,
        )
        assert player.late_samples > 0
    assert np.abs(out.audio()[:1600]).max() == 0.0  # its place had been played already


def test_player_without_user_plays_the_model_only():
    out = fake.open_output(16000, 320)
    with Player(out, latency_s=0.02, include_user=False) as player:
        play(player, 16000, 16000, voiced_signal(0.2), [(0.1, voiced_signal(0.1, f0=300.0))])
    audio = out.audio()
    assert np.abs(audio[:1600]).max() == 0.0 and np.abs(audio[1600:3200]).max() > 0.1


def test_a_failing_output_stops_the_player_not_the_caller():
    class Broken(fake.FakeOutput):
        def write(self, samples):
            raise OSError("device unplugged")

    with Player(Broken(16000, 320), latency_s=0.0) as player:
        tap = player.claim()
        tap.on_start(time.monotonic(), 16000, 16000)
        tap.on_sent(np.ones(320, np.float32), 0.0)
        tap.on_end()
        player.wait_idle(2.0)
        assert "device unplugged" in str(player.error)
        assert player.claim() is None


def test_a_session_that_never_started_releases_the_player():
    with Player(fake.open_output(16000, 320)) as player:
        player.claim().on_end()  # connect failed: no on_start
        assert player.wait_idle(1.0)
        player.claim().on_end()


def test_fake_input_plays_its_clip_in_real_time_then_ends():
    clip = voiced_signal(0.1)
    now = [100.0]  # its clock, moved only by its sleeps: exact however loaded the machine

    def sleep(s: float) -> None:
        now[0] += s

    mic = fake.FakeInput(16000, 320, clip, tail_s=0.04, clock=lambda: now[0], sleep=sleep)
    blocks = []
    while (block := mic.read()) is not None:
        blocks.append(block)
    assert len(blocks) == 7  # 5 blocks of clip, 2 of silence
    assert now[0] - 100.0 == pytest.approx(0.14, abs=1e-9)  # each block once it is due
    np.testing.assert_array_equal(np.concatenate(blocks)[: clip.size], clip)


def test_backend_selection():
    fake.set_microphone(voiced_signal(0.1), 16000, tail_s=0.0)
    out = open_output(AudioOptions(backend="fake"), 48000)
    mic = open_input(AudioOptions(backend="fake"), 48000)
    assert (out.rate, out.block, mic.block) == (48000, 960, 960)
    assert fake.outputs() == [out] and fake.inputs() == [mic]
    assert mic.signal.size == 4800  # resampled to the device rate
    with pytest.raises(ConfigError, match="unknown audio backend 'pulse'"):
        open_output(AudioOptions(backend="pulse"), 48000)
    with pytest.raises(ConfigError, match="--audio-rate"):
        AudioOptions(rate=100)


class _Refuse(importlib.abc.MetaPathFinder):
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def find_spec(self, name, path=None, target=None):
        if name == "sounddevice":
            raise self.exc
        return None


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (
            OSError("PortAudio library not found"),
            "audio unavailable: PortAudio library not found (install libportaudio2)",
        ),
        (
            ModuleNotFoundError("No module named 'sounddevice'"),
            "audio unavailable: the sounddevice package is not installed",
        ),
    ],
)
def test_missing_sounddevice_or_portaudio_is_one_line(monkeypatch, exc, message):
    monkeypatch.delitem(sys.modules, "sounddevice", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_Refuse(exc), *sys.meta_path])
    with pytest.raises(AudioUnavailable) as info:
        import_sounddevice()
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


class _FakeSd:
    """Just what resolve_device asks of sounddevice."""

    class PortAudioError(Exception):
        pass

    def __init__(self, devices, default=(-1, -1)):
        self.devices = devices
        self.default = SimpleNamespace(device=list(default))

    def query_devices(self, device=None, kind=None):
        if device is None:
            return self.devices
        names = [d["name"] for d in self.devices]
        if device not in names and device not in range(len(names)):
            raise ValueError(f"No {kind} device matching {device!r}")
        return self.devices[names.index(device) if isinstance(device, str) else device]


def _dev(name, ins=0, outs=2):
    return {"name": name, "max_input_channels": ins, "max_output_channels": outs}


def test_device_resolution_errors_name_what_is_missing():
    with pytest.raises(
        AudioUnavailable, match=r"^no audio output device \(sounddevice lists none\)$"
    ):
        resolve_device(_FakeSd([]), None, "output")
    with pytest.raises(AudioUnavailable, match=r"^no audio input device"):
        resolve_device(_FakeSd([_dev("speakers")]), None, "input")
    with pytest.raises(
        AudioUnavailable,
        match=r"no default audio output device; choose one with --audio-device .*speakers",
    ):
        resolve_device(_FakeSd([_dev("speakers")]), None, "output")
    with pytest.raises(AudioUnavailable, match="audio output device 'hdmi'"):
        resolve_device(_FakeSd([_dev("speakers")], (0, 0)), "hdmi", "output")
    assert resolve_device(_FakeSd([_dev("speakers")], (-1, 0)), None, "output") == 0
    assert resolve_device(_FakeSd([_dev("a"), _dev("b")], (0, 0)), "1", "output") == 1


def _python(code: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "HOME": str(home), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


SMOKE = """
import numpy as np
from duplexsim.live.audio_io import AudioOptions, open_input, open_output
out = open_output(AudioOptions(), 48000)
out.write(np.zeros(960, np.float32))
out.close()
mic = open_input(AudioOptions(), 16000)
print(mic.read().shape)
mic.close()
"""


@needs_portaudio
def test_sounddevice_on_the_alsa_null_device(tmp_path):
    (tmp_path / ".asoundrc").write_text(ASOUNDRC)
    result = _python(SMOKE, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "(320,)"


@needs_portaudio
def test_no_audio_device_is_a_one_line_error(tmp_path, make_benchmark):
    probe = _python("import sounddevice as sd; print(len(sd.query_devices()))", tmp_path)
    if probe.stdout.strip() != "0":
        pytest.skip("this machine has audio devices; the no-device case is covered above")
    result = subprocess.run(
        [
            *(sys.executable, "-m", "duplexsim", "run", "--model", "fake:echo", "--monitor"),
            *("--benchmark", str(make_benchmark(n=1)), "--runs-dir", str(tmp_path / "runs")),
        ],
        cwd=REPO,
        env={**os.environ, "HOME": str(tmp_path), "DUPLEXSIM_AUDIO_BACKEND": "sounddevice"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result
    assert result.stderr == "duplexsim: error: no audio output device (sounddevice lists none)\n"
    assert not (tmp_path / "runs").exists()  # nothing ran


JACK_CHECK = """
import time, numpy as np, sounddevice as sd
from duplexsim.live.audio_io import AudioOptions, open_input, open_output
jack = [i for i, d in enumerate(sd.query_devices())
        if "JACK" in sd.query_hostapis(d["hostapi"])["name"]][0]
options = AudioOptions(output_device=str(jack), input_device=str(jack))
mic = open_input(options, 48000)
started = time.monotonic()
blocks = [mic.read() for _ in range(25)]
print(round(time.monotonic() - started, 2), float(np.abs(np.concatenate(blocks)).max()))
mic.close()
out = open_output(options, 48000)
for _ in range(10):
    out.write(np.full(960, 0.1, np.float32))
time.sleep(0.3)
print(out.underflows)
out.close()
"""


@pytest.fixture
def jack_server(tmp_path):
    if shutil.which("jackd") is None or shutil.which("jack_wait") is None:
        pytest.skip("needs jackd (apt-get install jackd2)")
    name = f"duplexsim-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        ["jackd", "-n", name, "--no-realtime", "-d", "dummy", "-r", "48000", "-p", "960"],
        env={**os.environ, "JACK_NO_AUDIO_RESERVATION": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        up = subprocess.run(["jack_wait", "-s", name, "-w", "-t", "5"], capture_output=True)
        if up.returncode != 0 or proc.poll() is not None:
            pytest.skip("jackd did not start here")
        yield name
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@needs_portaudio
def test_sounddevice_on_the_jack_dummy_driver_runs_in_real_time(jack_server, tmp_path):
    result = _python(JACK_CHECK, tmp_path, JACK_DEFAULT_SERVER=jack_server)
    assert result.returncode == 0, result.stderr
    took, peak, underflows = result.stdout.split()
    assert 0.4 <= float(took) <= 0.8  # 25 blocks of 20 ms, paced by the dummy driver's clock
    assert float(peak) == 0.0  # the dummy driver captures silence
    assert int(underflows) == 0
