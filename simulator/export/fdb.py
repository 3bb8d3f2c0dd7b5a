"""Full-Duplex-Bench's folder layout, both ways: its task folders (``<task>/<id>/input.wav``) read as a
timing-only benchmark, and a run written as ``<id>/input.wav`` and ``<id>/output.wav``, the output
on the input's timeline at the input's rate and length, which its evaluation scripts read."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from duplexsim.core.audio import read_audio, resample, write_audio
from duplexsim.core.benchmark import MANIFEST_NAME, load_benchmark
from duplexsim.core.bundle import INPUT, MAX_SESSION_S, META, OUTPUT  # FDB's names too
from duplexsim.core.errors import AudioFileError, ConfigError, RunFolderError
from duplexsim.core.files import write_text_atomic
from duplexsim.core.runbench import RunBenchmark
from duplexsim.core.runfolder import RunFolder
from duplexsim.export.fdbv15 import METADATA, exported_metadata, v15_fields
from duplexsim.run.store import read_results

__all__ = ["FdbExport", "FdbImport", "export_fdb", "import_fdb"]


@dataclass(frozen=True)
class FdbExport:
    written: int
    skipped: dict[str, str]  # sample id -> why it has no folder


def export_fdb(run_dir: RunFolder | Path, out: Path) -> FdbExport:
    """One ``<id>/`` folder per recorded session of ``run_dir``: the sample's own input audio as
    ``input.wav`` and the model's output, placed on the same timeline, resampled to the input's
    rate and cut or padded to its length, as ``output.wav``. The input must be a file of the
    run's benchmark (``simulator.runbench``)."""
    run = RunFolder.of(run_dir)
    meta, rows = read_results(run)
    bench = RunBenchmark(run, meta)
    written, skipped = 0, {}
    for row in rows:
        try:
            why = _export_session(run, bench, row.sample_id, out)
        except (RunFolderError, AudioFileError) as exc:  # this session's files: the others go on
            why = str(exc)
        if why is None:
            written += 1
        else:
            skipped[row.sample_id] = why if why != _NO_RECORDING else f"{why} ({row.status})"
    return FdbExport(written, skipped)


_NO_RECORDING = "no recording"


def _export_session(run: RunFolder, bench: RunBenchmark, sample_id: str, out: Path) -> str | None:
    """Write one session's pair; why not, when it has none to write."""
    folder = run.session(sample_id)
    if not run.is_bundle(folder):
        return _NO_RECORDING
    meta = run.meta(folder)
    if meta.sample.context is None:
        return "a live session: no input file"
    context = bench.audio(meta.sample.context, f"{folder / META}: field 'sample.context'")
    # a partner's session: the model heard the context and the partner's clips or its voice
    # (the bundle's input)
    heard = meta.extra.get("partner") or meta.extra.get("partner_model")
    given = run.file(folder, INPUT) if heard else context
    output = run.file(folder, OUTPUT)
    if context is None or given is None or output is None:
        return f"{INPUT} or {OUTPUT} not recorded"
    _write_pair(given, output, out / sample_id)  # a name: it stays in ``out``
    try:
        v15 = exported_metadata(meta, context)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise RunFolderError(f"{folder / META}: field 'outcome.partner': {exc!r}") from None
    if v15 is not None:
        text = json.dumps(v15, indent=2, allow_nan=False) + "\n"
        write_text_atomic(out / sample_id / METADATA, text)
    return None


def _write_pair(context: Path, output: Path, dest: Path) -> None:
    # the input as it was, mono at its own rate (read_audio mixes channels down)
    given = read_audio(context)
    reply = read_audio(output, max_duration_s=MAX_SESSION_S)
    samples = resample(reply.samples, reply.sample_rate, given.sample_rate)
    n = len(given.samples)
    aligned = np.zeros(n, dtype=np.float32)
    aligned[: min(n, len(samples))] = samples[:n]
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{dest}: cannot create ({exc.strerror})") from None
    write_audio(dest / INPUT, given.samples, given.sample_rate, subtype="PCM_16")
    write_audio(dest / OUTPUT, aligned, given.sample_rate, subtype="PCM_16")


@dataclass(frozen=True)
class FdbImport:
    manifest: Path
    tasks: dict[str, int]  # task -> samples


def import_fdb(
    root: Path,
    out: Path,
    *,
    language: str = "en",
    force: bool = False,
    allow_outside: bool = False,
    reactive: bool = False,
) -> FdbImport:
    """A timing-only manifest (no emotion, no reference) over Full-Duplex-Bench's task folders
    ``root/<task>/<id>/input.wav``, or one task folder ``root/<id>/input.wav``; each sample's
    ``task`` is its folder's name. The audio stays where it is. v1.5 folders keep their
    ``metadata.json`` in the sample's ``meta``; ``reactive`` plays them as partner scripts
    (``fdbv15``: their overlap clips are written under ``out/clips``)."""
    if not root.is_dir():
        raise ConfigError(f"{root}: not a folder")
    manifest = out / MANIFEST_NAME
    if manifest.exists() and not force:
        raise ConfigError(f"{manifest} exists; pass --force to replace it")
    tasks = _task_folders(root)
    if not tasks:
        raise ConfigError(f"{root}: no <task>/<id>/input.wav or <id>/input.wav folders")
    lines, counts = [], {}
    for task, folder in tasks:
        inputs = sorted(folder.glob(f"*/{INPUT}"))
        counts[task] = len(inputs)
        for path in inputs:
            sample_id = _sample_id(f"{task}-{path.parent.name}")
            line = {
                "id": sample_id,
                "language": language,
                "task": task,
                "context": os.path.relpath(path.resolve(), out.resolve()),
            }
            line |= v15_fields(path.parent, task, sample_id, out, reactive=reactive)
            lines.append(json.dumps(line))
    draft = out / f".{MANIFEST_NAME}.draft"
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(draft, "\n".join(lines) + "\n")
        load_benchmark(
            draft, audio_check="header", allow_outside=allow_outside
        )  # what it wrote reads back whole, or nothing
        draft.replace(manifest)
    except OSError as exc:
        raise ConfigError(f"{manifest}: cannot write ({exc.strerror})") from None
    finally:
        draft.unlink(missing_ok=True)
    return FdbImport(manifest, counts)


def _task_folders(root: Path) -> list[tuple[str, Path]]:
    if any(root.glob(f"*/{INPUT}")):
        return [(_task_name(root.name), root)]
    return [(_task_name(d.name), d) for d in sorted(root.iterdir()) if any(d.glob(f"*/{INPUT}"))]


def _task_name(name: str) -> str:
    task = re.sub(r"[^a-z0-9_-]+", "_", name.lower()).strip("_-") or "task"
    return task if task[0].isalpha() else f"t{task}"


def _sample_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:128]
