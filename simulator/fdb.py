"""Full-Duplex-Bench's folder layout: ``<id>/input.wav`` and ``<id>/output.wav``, the output on the
input's timeline at the input's rate and length, which its evaluation scripts read."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.core.audio import read_audio, resample, write_audio
from simulator.core.bundle import OUTPUT, is_bundle, read_meta
from simulator.core.errors import ConfigError
from simulator.store import read_results

__all__ = ["FdbExport", "export_fdb"]


@dataclass(frozen=True)
class FdbExport:
    written: int
    skipped: dict[str, str]  # sample id -> why it has no folder


def export_fdb(run_dir: Path, out: Path) -> FdbExport:
    """One ``<id>/`` folder per recorded session of ``run_dir``: the sample's own input audio as
    ``input.wav`` and the model's output, placed on the same timeline, resampled to the input's
    rate and cut or padded to its length, as ``output.wav``."""
    _, rows = read_results(run_dir)
    written, skipped = 0, {}
    for row in rows:
        folder = run_dir / "sessions" / row.sample_id
        if not is_bundle(folder):
            skipped[row.sample_id] = f"no recording ({row.status})"
            continue
        context = read_meta(folder).sample.context
        if context is None:
            skipped[row.sample_id] = "a live session: no input file"
            continue
        _write_pair(Path(context), folder / OUTPUT, out / row.sample_id)
        written += 1
    return FdbExport(written, skipped)


def _write_pair(context: Path, output: Path, dest: Path) -> None:
    # the input as it was, mono at its own rate (read_audio mixes channels down)
    given = read_audio(context)
    reply = read_audio(output)
    samples = resample(reply.samples, reply.sample_rate, given.sample_rate)
    n = len(given.samples)
    aligned = np.zeros(n, dtype=np.float32)
    aligned[: min(n, len(samples))] = samples[:n]
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{dest}: cannot create ({exc.strerror})") from None
    write_audio(dest / "input.wav", given.samples, given.sample_rate, subtype="PCM_16")
    write_audio(dest / "output.wav", aligned, given.sample_rate, subtype="PCM_16")
