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

from duplexsim.core.bundle import EVENTS, INPUT, META, OUTPUT, STEREO
from duplexsim.core.emotions import EMOTIONS
from duplexsim.core.errors import ConfigError, InputError
from duplexsim.core.prices import Cost, PriceTable
from duplexsim.core.runfolder import RunFolder
from duplexsim.core.shown import csv_cell
from duplexsim.report.data import sample_scores
from duplexsim.run.costs import NO_TABLE, row_cost, run_price
from duplexsim.run.store import ResultRow, load_results
from duplexsim.runscores.cache import ScoreCache, cache_path
from duplexsim.scoring.metrics import SampleScores

__all__ = ["FORMATS", "sample_records", "write_records"]

FORMATS = ("jsonl", "csv")


def sample_records(run_dir: RunFolder | Path) -> Iterator[dict[str, Any]]:
    """One record per sample of the run, in sample-id order; ``problems`` lists what could not
    be used of its files (each value it names treated as missing), the others go on."""
    run = RunFolder.of(run_dir)
    results = load_results(run)
    meta, rows = results.meta, results.rows
    price = run_price(meta)
    basis = NO_TABLE if price is None else price.basis()
    caches = _caches(run)
    # what the metrics see (a voice judged against its own register, the out-of-N reasons):
    # the export's top emotion and match are the report's
    judged = {name: _as_judged(rows, cache) for name, cache in caches.items()}
    for row in rows:
        problems = list(results.problems.get(row.sample_id, []))
        record: dict[str, Any] = {
            "run_id": meta.get("run_id", run.path.name),
            "model": meta.get("model", {}).get("name"),
            **dataclasses.asdict(row),  # result, timing, validity and usage, whatever it holds
            # what the sample counts for, read the same way for rows recorded before the split
            "validity": {"input_fidelity": row.faithful, "precision": row.precise},
            "cost": _cost(row_cost(row, price), price, basis),
            "paths": _paths(run, row, problems),
            "scores": {
                name: _scores(cache, row, judged[name].get(row.sample_id), problems)
                for name, cache in caches.items()
            },
            "problems": problems,
        }
        yield record


def _cost(cost: Cost, price: PriceTable | None, basis: str) -> dict[str, Any]:
    """The sample's cost over all its attempts (None where part of it is unknown), on its basis."""
    return {
        "amount": cost.amount,
        "currency": None if price is None else price.currency,
        "unknown": "; ".join(cost.unknown) or None,
        "basis": basis,
    }


def _as_judged(rows: list[ResultRow], cache: ScoreCache) -> dict[str, SampleScores]:
    samples, _ = sample_scores(rows, cache)
    return {s.sample_id: s for s in samples}


def _caches(run: RunFolder) -> dict[str, ScoreCache]:
    return {n: ScoreCache(cache_path(run, n), n) for n in run.scorers()}


_FILES = {"input": INPUT, "output": OUTPUT, "stereo": STEREO, "events": EVENTS, "meta": META}


def _paths(run: RunFolder, row: ResultRow, problems: list[str]) -> dict[str, str | None]:
    """The session's files (those that are regular files inside the run folder) and the
    benchmark files its meta.json names, as text: nothing is opened but meta.json."""
    try:
        folder = run.session(row.sample_id)
        if not run.is_bundle(folder):
            return {"bundle": None}
        paths: dict[str, str | None] = {"bundle": str(folder)}
        for key, name in _FILES.items():
            path = run.file(folder, name)
            paths[key] = None if path is None else str(path)
        sample = run.meta(folder).sample
    except InputError as exc:
        problems.append(str(exc))
        return {"bundle": None}
    return paths | {"context": sample.context, "reference": sample.reference}


def _scores(
    cache: ScoreCache, row: ResultRow, judged: SampleScores | None, problems: list[str]
) -> dict[str, Any]:
    """Reply and reference scores by dimension as the scorer gave them; the reply's top emotion
    among the 12 and whether it matches the reference emotion as the metrics judge them (None
    where there is no reply score, or the sample is out of N: ``out_of_n`` says why)."""
    out: dict[str, Any] = {}
    for part in ("reply", "reference"):
        key = f"{part}/{row.sample_id if part == 'reply' else row.sample}"  # trials share one
        if key in cache.problems:
            problems.append(f"{cache.path}: {key}: {cache.problems[key]} (left out)")
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
    dotted column names (``scores.prosody.reply.Anger``), its text cells made safe for a
    spreadsheet (``csv_cell``); JSON escapes control characters itself."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "jsonl":
        n = 0
        for record in records:
            out.write(json.dumps(record, default=str) + "\n")
            n += 1
        return n
    # a run's text may come from elsewhere: no formula, no control character reaches a sheet
    flat = [{str(csv_cell(k)): csv_cell(v) for k, v in _flatten(r).items()} for r in records]
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
