"""Session recording bundles: what was sent, what came back, every event, every setting.

A bundle is written to a temporary folder and renamed into place, so a reader never sees half of one.

    sessions/<sample-id>/
        input.wav     what was sent (context then silence), at the client's input rate
        output.wav    the model's audio on the input timeline, at the client's output rate
        stereo.wav    left: user, right: model, at the higher of the two rates
        events.jsonl  every send and receive, stamped in seconds since T0
        meta.json     bundle version, model, protocol, settings, outcome, package versions
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from simulator.core.audio import resample, write_audio
from simulator.core.errors import StorageError
from simulator.session import SessionOutcome

__all__ = [
    "BUNDLE_VERSION",
    "package_versions",
    "read_meta",
    "remove_unfinished",
    "write_bundle",
]

BUNDLE_VERSION = 1
# A bundle is written in ``.<id>.<8 random characters>`` (``mkdtemp``) and an older attempt is
# moved to ``.<id>.old`` while it is replaced; ``remove_unfinished`` recognises both.
_MKDTEMP_SUFFIX = 8
_OLD = "old"
_PACKAGES = (
    "duplexsim",
    "numpy",
    "soundfile",
    "soxr",
    "websockets",
    "webrtcvad-wheels",
    "pyzmq",
    "aiortc",
    "torch",
    "transformers",
)


def package_versions() -> dict[str, str]:
    found: dict[str, str] = {}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def outcome_summary(outcome: SessionOutcome) -> dict[str, Any]:
    return {
        "status": outcome.status,
        "end_reason": outcome.end_reason,
        "error": outcome.error,
        "retryable": outcome.retryable,
        "timing": None if outcome.timing is None else asdict(outcome.timing),
        "send": asdict(outcome.send),
        "bytes_sent": outcome.bytes_sent,
        "bytes_received": outcome.bytes_received,
        "wall_s": round(outcome.wall_s, 3),
    }


def write_bundle(folder: Path, outcome: SessionOutcome, meta: dict[str, Any]) -> Path:
    """Write the bundle for one session into ``folder`` (replacing an older attempt atomically)."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=_hidden(folder.name, ""), dir=folder.parent))
    except OSError as exc:
        raise StorageError(folder.parent, exc) from None
    try:
        _write_audio_files(tmp, outcome)
        with open(tmp / "events.jsonl", "w", encoding="utf-8") as fh:
            for event in outcome.events:
                fh.write(json.dumps(event, separators=(",", ":")) + "\n")
        full = {
            "bundle_version": BUNDLE_VERSION,
            **meta,
            "outcome": outcome_summary(outcome),
            "input_rate": outcome.input_rate,
            "output_rate": outcome.output_rate,
            "packages": package_versions(),
        }
        (tmp / "meta.json").write_text(json.dumps(full, indent=2, default=str), encoding="utf-8")
        _swap_into_place(tmp, folder)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):  # a full or read-only disk: one line with the path
            raise StorageError(exc.filename or folder, exc) from None
        raise
    return folder


def remove_unfinished(sessions: Path, sample_ids: Iterable[str]) -> int:
    """Delete the temporary folders a killed run left for these samples' bundles; returns how
    many. Only these samples': other shards of the run may be writing theirs right now."""
    if not sessions.is_dir():
        return 0
    wanted = set(sample_ids)
    removed = 0
    for entry in sessions.iterdir():
        if entry.is_dir() and _unfinished_of(entry.name) & wanted:
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed


def _hidden(sample_id: str, suffix: str) -> str:
    return f".{sample_id}.{suffix}"


def _unfinished_of(name: str) -> set[str]:
    """The sample ids a folder name could be a temporary of (an id may hold dots itself)."""
    if not name.startswith("."):
        return set()
    ids = set()
    if name.endswith(f".{_OLD}"):
        ids.add(name[1 : -len(_OLD) - 1])
    if len(name) > _MKDTEMP_SUFFIX + 2 and name[-_MKDTEMP_SUFFIX - 1] == ".":
        ids.add(name[1 : -_MKDTEMP_SUFFIX - 1])
    return ids - {""}


def _write_audio_files(folder: Path, outcome: SessionOutcome) -> None:
    write_audio(folder / "input.wav", outcome.sent, outcome.input_rate)
    write_audio(folder / "output.wav", outcome.output, outcome.output_rate)
    rate = max(outcome.input_rate, outcome.output_rate)
    left = resample(outcome.sent, outcome.input_rate, rate)
    right = resample(outcome.output, outcome.output_rate, rate)
    n = max(left.size, right.size)
    stereo = np.zeros((n, 2), dtype=np.float32)
    stereo[: left.size, 0] = left
    stereo[: right.size, 1] = right
    write_audio(folder / "stereo.wav", stereo, rate)


def _swap_into_place(tmp: Path, folder: Path) -> None:
    if folder.exists():
        old = folder.with_name(_hidden(folder.name, _OLD))
        shutil.rmtree(old, ignore_errors=True)
        os.replace(folder, old)
        os.replace(tmp, folder)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, folder)


def read_meta(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    return data
