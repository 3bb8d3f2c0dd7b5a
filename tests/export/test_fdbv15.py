"""Full-Duplex-Bench v1.5's overlap folders: imported as recorded or as reactive partner scripts,
and exported with their metadata.json where the overlap really was."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.pcm_ws.server import start_server
from duplexsim.core.audio import read_audio
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.errors import ConfigError
from duplexsim.core.runfolder import RunFolder
from duplexsim.export.fdb import export_fdb, import_fdb
from duplexsim.profiles.profile import ModelProfile
from duplexsim.run.runner import RunOptions, execute_run
from tests.helpers.cli import duplexsim
from tests.helpers.runs import SETTINGS
from tests.helpers.signals import voiced_signal, write_wav

RATE = 16000
OVERLAP = voiced_signal(0.8, f0=230.0)


def v15_folder(folder: Path, *, clean: bool = True) -> None:
    """The user speaks 0.2-1.7 s; the overlap is mixed in at 3.0-3.8 s."""
    quiet = np.zeros(6 * RATE, np.float32)
    quiet[round(0.2 * RATE) : round(1.7 * RATE)] = voiced_signal(1.5)
    given = quiet.copy()
    given[3 * RATE : 3 * RATE + OVERLAP.size] += OVERLAP
    write_wav(folder / "input.wav", given)
    if clean:
        write_wav(folder / "clean_input.wav", quiet)
    meta = {"context_text": "hi", "current_turn_text": "wait", "timestamps": [3.0, 3.8]}
    (folder / "metadata.json").write_text(json.dumps(meta))


@pytest.fixture
def v15(tmp_path: Path) -> Path:
    root = tmp_path / "v1_5"
    v15_folder(root / "user_interruption" / "1")
    v15_folder(root / "background_speech" / "4")
    return root


def test_as_recorded_the_input_plays_and_the_metadata_is_kept(v15, tmp_path):
    import_fdb(v15, tmp_path / "b", allow_outside=True)
    bench = load_benchmark(tmp_path / "b", allow_outside=True)
    s = bench.get("user_interruption-1")
    assert s is not None and s.context.name == "input.wav" and not s.partner
    assert s.meta["fdb"]["timestamps"] == [3.0, 3.8]


def test_reactive_the_clean_input_plays_and_the_overlap_follows_the_models_speech(v15, tmp_path):
    import_fdb(v15, tmp_path / "b", allow_outside=True, reactive=True)
    bench = load_benchmark(tmp_path / "b", allow_outside=True)
    interruption, background = bench.get("user_interruption-1"), bench.get("background_speech-4")
    assert interruption is not None and background is not None
    assert interruption.context.name == "clean_input.wav"
    (step,) = interruption.partner
    assert step.kind == "interrupt"
    # it fell 1.3 s after the user's speech ended: 1.3 s into the model's own speech
    assert step.after_onset_s == pytest.approx(1.3, abs=0.02)
    clip = read_audio(step.clip).samples
    assert np.abs(clip[: OVERLAP.size] - OVERLAP).max() < 2e-4  # the event alone (PCM16)
    assert background.partner[0].kind == "backchannel"


def test_reactive_needs_the_clean_input(tmp_path):
    v15_folder(tmp_path / "v" / "user_interruption" / "1", clean=False)
    with pytest.raises(ConfigError, match=r"no clean_input\.wav"):
        import_fdb(tmp_path / "v", tmp_path / "b", allow_outside=True, reactive=True)
    bad = duplexsim("benchmark", "import-fdb", str(tmp_path / "v"), "--reactive", "--force")
    assert bad.returncode == 2 and "no clean_input.wav" in bad.stderr
    assert "Traceback" not in bad.stderr


async def test_a_reactive_session_exports_what_the_model_heard_and_where(v15, tmp_path):
    import_fdb(v15 / "user_interruption", tmp_path / "b", allow_outside=True, reactive=True)
    bench = load_benchmark(tmp_path / "b", allow_outside=True)
    server = await start_server(behaviour_factory("talk-through", hangover_s=0.25))
    opts = RunOptions(run_id="r", runs_dir=tmp_path / "runs", settings=SETTINGS, quiet=True)
    try:
        (row,) = await execute_run(bench, ModelProfile("m", "pcm-ws", url=server.url), opts)
    finally:
        await server.aclose()
    assert row.status == "ok"
    # its benchmark's audio lies outside the benchmark's folder: read only when allowed again
    export_fdb(RunFolder(tmp_path / "runs" / "r", allow_outside=True), tmp_path / "out")
    folder = tmp_path / "out" / "user_interruption-1"
    meta = json.loads((folder / "metadata.json").read_text())
    start, end = meta["timestamps"]
    assert end - start == pytest.approx(0.8, abs=0.002) and meta["current_turn_text"] == "wait"
    assert start == pytest.approx(row.onset_s + 1.3, abs=0.03)  # on the model's onset
    heard = read_audio(folder / "input.wav").samples
    a = round(start * RATE)
    assert np.abs(heard[a : a + OVERLAP.size] - OVERLAP).max() < 1e-3
