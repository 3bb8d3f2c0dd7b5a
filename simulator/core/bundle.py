"""The recording bundle of one session: its format and its writer.

    sessions/<sample-id>/
        input.wav     what was sent (context then silence), at the client's input rate
        output.wav    the model's audio on the input timeline, at the client's output rate
        stereo.wav    left: user, right: model, at the higher of the two rates
        events.jsonl  every send and receive, stamped in seconds since T0
        meta.json     bundle version, kind, sample, model, settings, outcome, package versions

A bundle is written into a hidden temporary folder and renamed into place, so a reader never sees
half of one. Its files are read by ``duplexsim.core.runfolder`` (a run folder may come from
elsewhere: every file is checked there); what they may hold is said here (``meta_json``,
``bundle_meta``, ``event_problem``). Version 1 bundles (no ``kind``; a talk session was told
apart only by its ``reference: null``) read as version 2: ``meta_json`` upgrades them.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.audio import resample, write_audio
from duplexsim.core.errors import ConfigError, StorageError

__all__ = [
    "BUNDLE_VERSION",
    "EVENTS",
    "INPUT",
    "MAX_ATTEMPTS",
    "MAX_CHUNK_SAMPLES",
    "MAX_RATE",
    "MAX_SESSION_S",
    "META",
    "OUTPUT",
    "STEREO",
    "BundleMeta",
    "Kind",
    "SampleRef",
    "Tracks",
    "bundle_meta",
    "event_problem",
    "meta_json",
    "number_problem",
    "remove_unfinished",
    "write_bundle",
]

BUNDLE_VERSION = 2
INPUT, OUTPUT, STEREO, EVENTS, META = (
    "input.wav",
    "output.wav",
    "stereo.wav",
    "events.jsonl",
    "meta.json",
)
# "benchmark": a benchmark sample (context and reference from the manifest); "live": a person's
# turn (``talk``): the context is input.wav and there is no reference to mirror
Kind = Literal["benchmark", "live"]
KINDS: tuple[Kind, ...] = ("benchmark", "live")
# A bundle is written in ``.<id>.<8 random characters>`` (``mkdtemp``) and an older attempt is
# moved to ``.<id>.old`` while it is replaced; ``remove_unfinished`` recognises both.
_MKDTEMP_SUFFIX = 8
_OLD = "old"
# the sections every reader may take as objects; the rest are kept as they are in ``extra``
_SECTIONS = ("sample", "model", "client", "capabilities", "settings", "outcome", "packages")


@dataclass(frozen=True)
class SampleRef:
    """Which sample a session played: a benchmark's (paths to its audio) or a live turn."""

    id: str
    kind: Kind = "benchmark"
    language: str | None = None
    emotion: str | None = None
    context: str | None = None  # None for a live session: the user's audio is input.wav
    reference: str | None = None  # None for a live session: nothing to mirror
    context_turn_start_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "language": self.language,
            "emotion": self.emotion,
            "context": self.context,
            "reference": self.reference,
            "context_turn_start_s": self.context_turn_start_s,
        }


@dataclass(frozen=True)
class BundleMeta:
    """meta.json, typed. Sections whose contents belong to other owners (the model's description,
    settings, the session outcome) stay mappings; ``extra`` keeps anything else (``talk``...)."""

    sample: SampleRef
    run_id: str
    model: Mapping[str, Any]
    settings: Mapping[str, Any]
    outcome: Mapping[str, Any]
    client: Mapping[str, Any] = field(default_factory=dict)
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    attempts: int = 1
    input_rate: int | None = None
    output_rate: int | None = None
    packages: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    version: int = BUNDLE_VERSION

    @property
    def kind(self) -> Kind:
        return self.sample.kind

    @property
    def status(self) -> str:
        return str(self.outcome.get("status", ""))

    def to_dict(self) -> dict[str, Any]:
        return {
            "bundle_version": self.version,
            "kind": self.sample.kind,
            **self.extra,
            "sample": self.sample.to_dict(),
            "run_id": self.run_id,
            "model": dict(self.model),
            "client": dict(self.client),
            "capabilities": dict(self.capabilities),
            "settings": dict(self.settings),
            "attempts": self.attempts,
            "outcome": dict(self.outcome),
            "input_rate": self.input_rate,
            "output_rate": self.output_rate,
            "packages": dict(self.packages),
        }


@dataclass(frozen=True, eq=False)
class Tracks:
    """The session's audio: what was sent and the model's audio on the same timeline."""

    sent: NDArray[np.float32]
    input_rate: int
    output: NDArray[np.float32]
    output_rate: int


# ---- writing ----------------------------------------------------------------------------------


def write_bundle(
    folder: Path, meta: BundleMeta, tracks: Tracks, events: Iterable[Mapping[str, Any]]
) -> Path:
    """Write the bundle into ``folder``, replacing an older attempt atomically; a full or
    read-only disk is a StorageError naming the path."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=_hidden(folder.name, ""), dir=folder.parent))
    except OSError as exc:
        raise StorageError(folder.parent, exc) from None
    try:
        _write_tracks(tmp, tracks)
        with open(tmp / EVENTS, "w", encoding="utf-8") as fh:
            for event in events:
                fh.write(json.dumps(event, separators=(",", ":")) + "\n")
        text = json.dumps(meta.to_dict(), indent=2, default=str)
        (tmp / META).write_text(text, encoding="utf-8")
        _swap_into_place(tmp, folder)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):  # one line with the path, not a traceback
            raise StorageError(exc.filename or folder, exc) from None
        raise
    return folder


def _write_tracks(folder: Path, t: Tracks) -> None:
    write_audio(folder / INPUT, t.sent, t.input_rate)
    write_audio(folder / OUTPUT, t.output, t.output_rate)
    rate = max(t.input_rate, t.output_rate)
    left = resample(t.sent, t.input_rate, rate)
    right = resample(t.output, t.output_rate, rate)
    stereo = np.zeros((max(left.size, right.size), 2), dtype=np.float32)
    stereo[: left.size, 0] = left
    stereo[: right.size, 1] = right
    write_audio(folder / STEREO, stereo, rate)


def _swap_into_place(tmp: Path, folder: Path) -> None:
    if folder.exists():
        old = folder.with_name(_hidden(folder.name, _OLD))
        shutil.rmtree(old, ignore_errors=True)
        os.replace(folder, old)
        os.replace(tmp, folder)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, folder)


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


# ---- what a bundle may hold (``duplexsim.core.runfolder`` reads the files) -----------------------

MAX_SESSION_S = 3600.0  # no session is longer: every time a bundle records lies within it
MAX_RATE = 384_000  # Hz
MAX_ATTEMPTS = 1000
# one received message's samples: a 16 MiB WebSocket message of PCM16 (the largest we accept)
MAX_CHUNK_SAMPLES = 1 << 23
MAX_FRAME_N = int(MAX_SESSION_S * 1000)  # frames of at least 1 ms (``--frame-ms``)
_TIME = (-MAX_SESSION_S, MAX_SESSION_S)
# events.jsonl: the numbers each field may hold (where the field is there), as (low, high, int)
EVENT_NUMBERS: dict[str, tuple[float, float, bool]] = {
    "t": (*_TIME, False),
    "due": (*_TIME, False),
    "woke": (*_TIME, False),
    "placed_s": (*_TIME, False),
    "end_s": (*_TIME, False),
    "offset_s": (*_TIME, False),  # null too: the server declared none
    "n": (0, MAX_FRAME_N, True),
    "samples": (0, MAX_CHUNK_SAMPLES, True),
    "frame_ms": (1, 1000, False),
    "input_rate": (1, MAX_RATE, True),
    "output_rate": (1, MAX_RATE, True),
}
EVENT_FLAGS = ("silent", "final", "fatal", "retryable")
EVENT_TEXTS = ("dir", "kind", "text", "message", "reason", "role", "source")


def number_problem(value: object, low: float, high: float, integer: bool = False) -> str | None:
    """Why ``value`` is not a number in [low, high] (an integer where ``integer``); None if it
    is. Booleans, strings, NaN and infinities are not numbers here."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{_shown(value)} is not a number"
    if integer and not isinstance(value, int) and not float(value).is_integer():
        return f"{value!r} is not a whole number"
    if not math.isfinite(value):
        return f"{value!r} is not a finite number"
    if not low <= value <= high:
        return f"{value!r} is out of range ({low:g} to {high:g})"
    return None


def _shown(value: object) -> str:
    text = repr(value) if isinstance(value, str | bool) or value is None else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def event_problem(event: object) -> str | None:
    """What is wrong with one line of events.jsonl (None: a usable event). Every event has a
    time ``t``; the fields whose meaning is fixed (``EVENT_NUMBERS``, flags, texts) hold what a
    recorded session can hold."""
    if not isinstance(event, dict):
        return "not a JSON object"
    if "t" not in event:
        return "field 't' is missing"
    for name, (low, high, integer) in EVENT_NUMBERS.items():
        if name not in event or (name == "offset_s" and event[name] is None):
            continue  # absent; a null offset: the server declared none
        problem = number_problem(event[name], low, high, integer)
        if problem:
            return f"field '{name}': {problem}"
    for name in EVENT_FLAGS:
        if name in event and not isinstance(event[name], bool):
            return f"field '{name}': {_shown(event[name])} is not true or false"
    for name in EVENT_TEXTS:
        if name in event and not isinstance(event[name], str):
            return f"field '{name}': {_shown(event[name])} is not a string"
    scores = event.get("scores")
    if scores is not None and not (
        isinstance(scores, dict)
        and all(number_problem(v, -1e9, 1e9) is None for v in scores.values())
    ):
        return "field 'scores': not an object of finite numbers"
    return None


def meta_json(data: object, where: str) -> dict[str, Any]:
    """meta.json's parsed JSON as an object, upgraded to the current version (a ``kind``);
    ConfigError naming ``where`` when it is no bundle's meta.json. For readers that show
    whatever is there (the viewer)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: not a JSON object")
    version = data.get("bundle_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version > BUNDLE_VERSION:
        raise ConfigError(
            f"{where}: bundle_version {version!r} is newer than this duplexsim reads "
            f"(up to {BUNDLE_VERSION})"
        )
    if "kind" not in data:
        data["kind"] = _v1_kind(data.get("sample"))
    return data


def _v1_kind(sample: object) -> Kind:
    """Version 1 told a live session apart only by a sample with neither context nor reference."""
    if isinstance(sample, dict) and sample.get("reference", "") is None:
        return "live"
    return "benchmark"


def bundle_meta(data: dict[str, Any], where: str) -> BundleMeta:
    """The typed meta.json (as ``meta_json`` returns it); ConfigError naming the file and field
    when it is off."""
    for name in _SECTIONS:
        if name in data and not isinstance(data[name], dict):
            raise ConfigError(f"{where}: field '{name}' is not an object")
    kind = data["kind"]
    if kind not in KINDS:
        raise ConfigError(f"{where}: field 'kind' is {_shown(kind)}, expected one of {KINDS}")
    sample = _sample(data.get("sample", {}), kind, where)
    known = {"bundle_version", "kind", "run_id", "attempts", "input_rate", "output_rate"}
    return BundleMeta(
        sample=sample,
        run_id=str(data.get("run_id", "")),
        model=data.get("model", {}),
        settings=data.get("settings", {}),
        outcome=data.get("outcome", {}),
        client=data.get("client", {}),
        capabilities=data.get("capabilities", {}),
        attempts=_int(data, "attempts", where, 1, (1, MAX_ATTEMPTS)),
        input_rate=_int(data, "input_rate", where, None, (1, MAX_RATE)),
        output_rate=_int(data, "output_rate", where, None, (1, MAX_RATE)),
        packages=data.get("packages", {}),
        extra={k: v for k, v in data.items() if k not in known and k not in _SECTIONS},
        version=int(data.get("bundle_version", 1)),
    )


def _sample(raw: Mapping[str, Any], kind: Kind, where: str) -> SampleRef:
    def text(name: str) -> str | None:
        value = raw.get(name)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{where}: field 'sample.{name}' is not a string")
        return value

    start = raw.get("context_turn_start_s")
    problem = None if start is None else number_problem(start, 0.0, MAX_SESSION_S)
    if problem:
        raise ConfigError(f"{where}: field 'sample.context_turn_start_s': {problem}")
    sample_id = text("id")
    if not sample_id:
        raise ConfigError(f"{where}: field 'sample.id' is missing")
    ref = SampleRef(
        id=sample_id,
        kind=kind,
        language=text("language"),
        emotion=text("emotion"),
        context=text("context"),
        reference=text("reference"),
        context_turn_start_s=None if start is None else float(start),
    )
    if kind == "benchmark" and not ref.context:  # no reference: a timing-only sample
        raise ConfigError(f"{where}: a benchmark session records no context path")
    return ref


def _int(
    data: Mapping[str, Any],
    name: str,
    where: str,
    default: int | None,
    bounds: tuple[int, int],
) -> Any:
    value = data.get(name, default)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{where}: field '{name}' is not an integer")
    if value is not None and not bounds[0] <= value <= bounds[1]:
        raise ConfigError(f"{where}: field '{name}': {value} is out of range {bounds}")
    return value
