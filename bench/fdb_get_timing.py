"""Full-Duplex-Bench's own ``get_timing.py`` beside our partner metrics, on the same sessions.

    python bench/fdb_get_timing.py GET_TIMING_PY [--runs DIR]

Runs the demo's partner interruptions (``recordings/demo/partner.jsonl``) against the two
reference models that talk through and that stop, each speaking the demo's recorded
``neutral.ogg`` (silero-vad hears no speech in the synthetic voice the fakes use by default),
exports each run as Full-Duplex-Bench reads it (``duplexsim export fdb``), runs its
``v1_v1.5/evaluation/get_timing.py`` over every folder (silero-vad from its pip wheel, which ships
the model: ``pip install silero-vad``; CPU), and prints, per interruption, its stop and response
latency next to ours (``outcome.partner`` and ``outcome.turns``, ``core.partnermetrics``).

get_timing.py loads audio with torchaudio and the VAD with ``torch.hub``; neither is needed for
what it computes, so both are stood in for here: the wav read with soundfile (resampled with soxr
to its 16 kHz), and the hub's silero model taken from the wheel (``silero_vad.load_silero_vad``,
the same weights). Its own code runs unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import io
import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import soxr
import torch

from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.pcm_ws.server import start_server
from duplexsim.core.audio import read_audio
from duplexsim.core.benchmark import Benchmark, load_benchmark
from duplexsim.core.partnermetrics import step_results
from duplexsim.export.fdb import export_fdb
from duplexsim.profiles.profile import ModelProfile
from duplexsim.run.demo_data import demo_partner_benchmark, demo_utterance
from duplexsim.run.runner import RunOptions, execute_run


def _stand_ins() -> None:
    """torchaudio.load / functional.resample, and torch.hub.load of silero-vad."""
    import silero_vad

    ta = types.ModuleType("torchaudio")

    def load(path: Path) -> tuple[torch.Tensor, int]:
        x, rate = sf.read(str(path), dtype="float32", always_2d=True)
        return torch.from_numpy(np.ascontiguousarray(x.T)), rate

    def resample(wav: torch.Tensor, a: int, b: int) -> torch.Tensor:
        out = soxr.resample(wav.numpy().T, a, b, "HQ")
        return torch.from_numpy(np.ascontiguousarray(np.atleast_2d(out.T)))

    ta.load = load  # type: ignore[attr-defined]
    ta.functional = types.SimpleNamespace(resample=resample)  # type: ignore[attr-defined]
    sys.modules["torchaudio"] = ta
    torch.hub.load = lambda *a, **k: (silero_vad.load_silero_vad(), None)  # type: ignore[assignment]


def _theirs(get_timing: Path) -> Any:
    _stand_ins()
    spec = importlib.util.spec_from_file_location("fdb_get_timing", get_timing)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _run(behaviour: str, runs: Path) -> Path:
    bench = load_benchmark(demo_partner_benchmark())
    bench = Benchmark(bench.manifest, tuple(s for s in bench if s.task == "interruption"))
    voice = read_audio(demo_utterance(), sample_rate=16000).samples
    server = await start_server(behaviour_factory(behaviour, voice=voice))
    opts = RunOptions(run_id=behaviour, runs_dir=runs, quiet=True)
    try:
        await execute_run(bench, ModelProfile(behaviour, "pcm-ws", url=server.url), opts)
    finally:
        await server.aclose()
    return runs / behaviour


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("get_timing", type=Path)
    ap.add_argument("--runs", type=Path, default=Path("/tmp/fdb-timing"))
    args = ap.parse_args()
    fdb = _theirs(args.get_timing)
    for behaviour in ("talk-through", "stop-on-overlap"):
        run_dir = asyncio.run(_run(behaviour, args.runs))
        _compare(fdb, run_dir, args.runs / f"{behaviour}-fdb")


def _compare(fdb: Any, run_dir: Path, out: Path) -> None:
    export_fdb(run_dir, out)
    print(f"{run_dir.name}:")
    print(f"{'session':24} {'at s':>6} | {'stop ms ours':>12} {'theirs':>7} | "
          f"{'answer ms ours':>14} {'theirs':>7}")  # fmt: skip
    for folder in sorted(p for p in out.iterdir() if (p / "output.wav").is_file()):
        with contextlib.redirect_stdout(io.StringIO()):  # it prints every list it writes
            fdb.process_folder(folder)
        theirs = json.loads((folder / fdb.OUT_FILENAME).read_text())
        meta = json.loads((run_dir / "sessions" / folder.name / "meta.json").read_text())
        o = meta["outcome"]
        for r in step_results(o["turns"], o["partner"], o["speech"]):
            if r.kind != "interrupt":
                continue
            at, speech_end = r.at_s, o["turns"][r.turn]["speech_end_s"]
            stop = next((e - s for s, e in theirs["latency_stop_list"] if s >= at - 0.05), None)
            resp = next(
                (b - a for a, b in theirs["latency_resp_list"] if a >= speech_end - 0.6), None
            )
            print(f"{folder.name:24} {at:6.2f} | {_ms(r.stop_latency_s):>12} {_ms(stop):>7} | "
                  f"{_ms(r.response_latency_s):>14} {_ms(resp):>7}")  # fmt: skip


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{1000 * x:.0f}"


if __name__ == "__main__":
    main()
