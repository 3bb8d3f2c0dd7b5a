"""Full-Duplex-Bench v1.5's overlap samples, both ways.

A v1.5 sample folder holds ``input.wav`` (the user's audio with an overlap event),
``clean_input.wav`` (the same without it) and ``metadata.json`` (``timestamps``: the overlap's
[start, end] in seconds in ``input.wav``). Imported as recorded, the sample plays ``input.wav``
and keeps the metadata in ``meta.fdb``. Imported ``reactive``, it plays ``clean_input.wav`` and
a partner script places the overlap (``input.wav`` less ``clean_input.wav`` over the window) as
far into the model's own speech as it fell after the end of the user's speech before it: an
interruption for ``user_interruption``, a backchannel for the others (a user's backchannel,
talking to someone else, background speech: the model should talk on).

Exported, a session's folder gets ``metadata.json`` with the overlap where it really was: as
recorded, the original; a reactive session, where its partner played it.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from duplexsim.core.audio import read_audio, write_audio
from duplexsim.core.bundle import INPUT, BundleMeta  # FDB names its input as we do
from duplexsim.core.errors import ConfigError
from duplexsim.core.timing import speech_end

__all__ = ["METADATA", "exported_metadata", "v15_fields"]

METADATA = "metadata.json"
CLEAN = "clean_input.wav"
INTERRUPT_TASKS = ("user_interruption",)


def _metadata(folder: Path) -> dict[str, Any] | None:
    path = folder / METADATA
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        start, end = (float(x) for x in data["timestamps"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"{path}: not v1.5 metadata with timestamps [start, end] ({exc})"
        ) from None
    if not (math.isfinite(start) and math.isfinite(end) and 0 <= start < end):
        raise ConfigError(f"{path}: timestamps must be 0 <= start < end, not {start}, {end}")
    return {**data, "timestamps": [start, end]}


def v15_fields(
    folder: Path, task: str, sample_id: str, out: Path, *, reactive: bool
) -> dict[str, Any]:
    """The manifest fields a v1.5 folder adds to its sample (none without ``metadata.json``)."""
    data = _metadata(folder)
    if data is None:
        if reactive:
            raise ConfigError(f"{folder}: no {METADATA}: --reactive needs v1.5 folders")
        return {}
    fields: dict[str, Any] = {"meta": {"fdb": data}}
    if not reactive:
        return fields
    clean_path = folder / CLEAN
    if not clean_path.is_file():
        raise ConfigError(f"{folder}: no {CLEAN}: --reactive plays the input without the overlap")
    given, clean = read_audio(folder / INPUT), read_audio(clean_path)
    if given.sample_rate != clean.sample_rate:
        raise ConfigError(f"{folder}: input.wav and {CLEAN} differ in sample rate")
    rate = given.sample_rate
    start, end = data["timestamps"]
    lo, hi = round(start * rate), min(round(end * rate), given.samples.size)
    n = max(0, min(hi, clean.samples.size) - lo)
    overlap = given.samples[lo:hi].copy()
    overlap[:n] -= clean.samples[lo : lo + n]  # the event alone, as it was mixed in
    clip = out / "clips" / f"{sample_id}.overlap.wav"
    clip.parent.mkdir(parents=True, exist_ok=True)
    write_audio(clip, overlap.astype(np.float32), rate, subtype="PCM_16")
    before = speech_end(clean.samples[:lo], rate)
    after_ms = max(0, round(1000 * (start - (before if before is not None else 0.0))))
    kind = "interrupt" if task in INTERRUPT_TASKS else "backchannel"
    step = {"kind": kind, "clip": _rel(clip, out), "after_onset_ms": after_ms}
    return fields | {"context": _rel(clean_path, out), "partner": [step]}


def _rel(path: Path, out: Path) -> str:
    return os.path.relpath(path.resolve(), out.resolve())


def exported_metadata(meta: BundleMeta, context: Path) -> dict[str, Any] | None:
    """``metadata.json`` for an exported session: a reactive session's overlap where its partner
    played it, else the sample's own (None: not a v1.5 sample)."""
    original = _metadata(context.parent)
    fired = [e for e in meta.outcome.get("partner") or [] if e.get("fired")]
    if fired:
        e = fired[0]
        moved = {"timestamps": [round(float(e["at_s"]), 6), round(float(e["clip_end_s"]), 6)]}
        return {**(original or {}), **moved}
    return original
