"""The per-sample log of a run: each sample's result, timing, scores and file paths on one record,
as JSON lines or CSV (what lm-evaluation-harness's ``--log_samples`` gives per document)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from duplexsim.core.bundle import EVENTS, INPUT, META, OUTPUT, STEREO, is_bundle, read_meta
from duplexsim.core.emotions import EMOTIONS
from duplexsim.core.errors import ConfigError
from duplexsim.report.data import sample_scores
from duplexsim.run.store import ResultRow, read_results
from duplexsim.runscores.cache import ScoreCache, cache_path
from duplexsim.scoring.metrics import SampleScores

__all__ = ["FORMATS", "sample_records", "write_records"]

FORMATS = ("jsonl", "csv")


def sample_records(run_dir: Path) -> Iterator[dict[str, Any]]:
    """One record per sample of the run, in sample-id order."""
    meta, rows = read_results(run_dir)
    caches = _caches(run_dir)
    # what the metrics see (a voice judged against its own register, the out-of-N reasons):
    # the export's top emotion and match are the report's
    judged = {name: _as_judged(rows, cache) for name, cache in caches.items()}
    for row in rows:
        record: dict[str, Any] = {
            "run_id": meta.get("run_id", run_dir.name),
            "model": meta.get("model", {}).get("name"),
            **dataclasses.asdict(row),  # result, timing and validity, whatever the row holds
            # what the sample counts for, read the same way for rows recorded before the split
            "validity": {"input_fidelity": row.faithful, "precision": row.precise},
            "paths": _paths(run_dir, row),
            "scores": {
                name: _scores(cache, row, judged[name].get(row.sample_id))
                for name, cache in caches.items()
            },
        }
        yield record


def _as_judged(rows: list[ResultRow], cache: ScoreCache) -> dict[str, SampleScores]:
    samples, _ = sample_scores(rows, cache)
    return {s.sample_id: s for s in samples}


def _caches(run_dir: Path) -> dict[str, ScoreCache]:
    names = sorted(p.stem for p in (run_dir / "scores").glob("*.json"))
    return {n: ScoreCache(cache_path(run_dir, n), n) for n in names}


def _paths(run_dir: Path, row: ResultRow) -> dict[str, str | None]:
    folder = run_dir / "sessions" / row.sample_id
    if not is_bundle(folder):
        return {"bundle": None}
    files = {"input": INPUT, "output": OUTPUT, "stereo": STEREO, "events": EVENTS, "meta": META}
    paths: dict[str, str | None] = {"bundle": str(folder)}
    paths |= {k: str(folder / f) if (folder / f).exists() else None for k, f in files.items()}
    sample = read_meta(folder).sample
    paths |= {"context": sample.context, "reference": sample.reference}
    return paths


def _scores(cache: ScoreCache, row: ResultRow, judged: SampleScores | None) -> dict[str, Any]:
    """Reply and reference scores by dimension as the scorer gave them; the reply's top emotion
    among the 12 and whether it matches the reference emotion as the metrics judge them (None
    where there is no reply score, or the sample is out of N: ``out_of_n`` says why)."""
    out: dict[str, Any] = {}
    for part in ("reply", "reference"):
        key = f"{part}/{row.sample_id}"
        values = cache.vector(key)
        dims = cache.dimensions_of(key)
        out[part] = None if values is None else dict(zip(dims, values, strict=True))
    top = None
    if judged is not None and judged.reply is not None and judged.out_reason is None:
        top = EMOTIONS[int(np.argmax(judged.reply))].name
    out["reply_top"] = top
    out["match"] = None if top is None or not row.emotion else top == row.emotion
    out["out_of_n"] = None if judged is None else judged.out_reason
    return out


def write_records(records: Iterator[dict[str, Any]], fmt: str, out: io.TextIOBase | Any) -> int:
    """Write ``records`` to ``out`` as ``fmt``; returns how many. CSV flattens nested fields into
    dotted column names (``scores.prosody.reply.Anger``)."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "jsonl":
        n = 0
        for record in records:
            out.write(json.dumps(record, default=str) + "\n")
            n += 1
        return n
    flat = [_flatten(r) for r in records]
    columns: dict[str, None] = {}
    for r in flat:
        columns |= dict.fromkeys(r)
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(flat)
    return len(flat)


def _flatten(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat |= _flatten(value, f"{name}.")
        else:
            flat[name] = value
    return flat
