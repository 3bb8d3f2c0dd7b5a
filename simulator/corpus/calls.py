"""Call listings and call audio: which two-speaker recordings to build from, validated up front.

A listing is a CSV file (header row) or a JSONL file (one object a line) with the columns ``id``,
``language`` and either ``audio`` (one file, one speaker per channel) or ``a`` and ``b`` (two
mono files, one per speaker). Paths are relative to the listing's folder. ``read_listings``
parses every listing and checks every audio header before anything is decoded, and reports
every problem at once, each as ``FILE:LINE: field 'NAME': what is wrong``.
"""

from __future__ import annotations

import csv
import difflib
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from numpy.typing import NDArray

from duplexsim.core import safejson
from duplexsim.core.audio import AudioInfo, audio_info, read_audio, resample
from duplexsim.core.benchmark import _LANGUAGE
from duplexsim.core.errors import AudioFileError, InputError, Problem

__all__ = [
    "COLUMNS",
    "MAX_CALL_S",
    "RATE",
    "CallListingError",
    "CallSpec",
    "load_call",
    "read_listings",
]

RATE = 16000  # calls are analysed, scored and cut at 16 kHz
MAX_CALL_S = 4 * 3600.0
COLUMNS = ("id", "language", "audio", "a", "b")
# Call ids name samples ("<call>-<turn>"), so they follow the manifest's id rule, shorter.
_CALL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


class CallListingError(InputError):
    """Every problem found in the call listings; one problem is one line."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        if len(self.problems) == 1:
            message = str(self.problems[0])
        else:
            head = f"{len(self.problems)} problems in the call listings"
            message = "\n".join([head, *(f"  {p}" for p in self.problems)])
        super().__init__(message)


@dataclass(frozen=True)
class CallSpec:
    id: str
    language: str
    listing: Path
    line: int
    audio: Path | None = None  # one file, speaker A on channel 0 ...
    a: Path | None = None  # ... or one mono file per speaker
    b: Path | None = None
    duration_s: float = 0.0  # from the headers (the shorter channel for two files)

    @property
    def where(self) -> str:
        return f"{self.listing}:{self.line}"


def read_listings(
    paths: Sequence[str | Path], *, length_tolerance_s: float = 0.05
) -> list[CallSpec]:
    """Every call of every listing, in order, with its audio headers checked."""
    problems: list[Problem] = []
    calls: list[CallSpec] = []
    first: dict[str, str] = {}
    for path in paths:
        for call in _parse_listing(Path(path), problems):
            if call.id in first:
                problems.append(
                    Problem(
                        str(call.listing),
                        call.line,
                        "id",
                        f"duplicate call id '{call.id}' (first at {first[call.id]})",
                    )
                )
                continue
            first[call.id] = call.where
            checked = _check_audio(call, problems, length_tolerance_s)
            if checked is not None:
                calls.append(checked)
    if not calls and not problems:
        problems.append(Problem(", ".join(map(str, paths)), None, None, "no calls listed"))
    if problems:
        raise CallListingError(problems)
    return calls


def load_call(call: CallSpec) -> NDArray[np.float32]:
    """The call as (2, frames) float32 at 16 kHz: row 0 is channel 0 / file a, row 1 the other.
    Two files within the length tolerance are padded with silence to the longer one."""
    if call.audio is not None:
        data, rate = _read_channels(call.audio)
        both = resample(data, rate, RATE)
        return np.ascontiguousarray(both.T, dtype=np.float32)
    assert call.a is not None and call.b is not None
    a = read_audio(call.a, sample_rate=RATE, max_duration_s=MAX_CALL_S).samples
    b = read_audio(call.b, sample_rate=RATE, max_duration_s=MAX_CALL_S).samples
    out = np.zeros((2, max(a.size, b.size)), dtype=np.float32)
    out[0, : a.size] = a
    out[1, : b.size] = b
    return out


def _read_channels(path: Path) -> tuple[NDArray[np.float32], int]:
    """All channels as (frames, channels) float32; ``read_audio`` would mix them down."""
    info = audio_info(path, max_duration_s=MAX_CALL_S)  # header, truncation and length checks
    try:
        data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, ValueError, EOFError, OSError) as exc:
        raise AudioFileError(path, f"cannot decode ({exc})") from exc
    if data.shape[0] < info.frames:
        raise AudioFileError(path, f"truncated: header says {info.frames} frames, got {len(data)}")
    if not np.isfinite(data).all():
        raise AudioFileError(path, "contains non-finite samples (NaN/inf)")
    return np.asarray(data, dtype=np.float32), int(rate)


# ------------------------------------------------------------------------- listing parsing


def _parse_listing(path: Path, problems: list[Problem]) -> list[CallSpec]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        problems.append(Problem(str(path), None, None, "no such call listing"))
        return []
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(str(path), None, None, f"cannot read: {exc}"))
        return []
    rows = _jsonl_rows(path, text, problems) if _is_jsonl(text) else _csv_rows(path, text, problems)
    calls = []
    for line, row in rows:
        call = _RowParser(path, line, problems).parse(row)
        if call is not None:
            calls.append(call)
    return calls


def _is_jsonl(text: str) -> bool:
    return text.lstrip().startswith("{")


def _jsonl_rows(path: Path, text: str, problems: list[Problem]) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = safejson.loads(raw, object_pairs_hook=_object)
        except _DuplicateKey as exc:
            problems.append(Problem(str(path), line, exc.key, "duplicate key"))
            continue
        except safejson.JsonError as exc:
            problems.append(Problem(str(path), line, None, f"not valid JSON: {exc}"))
            continue
        if not isinstance(obj, dict):
            problems.append(
                Problem(str(path), line, None, f"expected a JSON object, got {type(obj).__name__}")
            )
            continue
        rows.append((line, obj))
    return rows


class _DuplicateKey(safejson.JsonError):
    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object that refuses duplicate keys (``json`` would keep the last silently)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _csv_rows(path: Path, text: str, problems: list[Problem]) -> list[tuple[int, dict[str, Any]]]:
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    rows: list[tuple[int, dict[str, Any]]] = []
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # e.g. a cell over csv's field size limit: the rest is unsure
            problems.append(Problem(str(path), reader.line_num, None, f"cannot parse CSV: {exc}"))
            return rows
        line = reader.line_num
        if not any(c.strip() for c in cells):
            continue
        if header is None:
            header = [c.strip() for c in cells]
            bad = [name for name in header if name not in COLUMNS]
            for name in bad:
                problems.append(Problem(str(path), line, name, _unknown_column(name)))
            twice = sorted({name for name in header if header.count(name) > 1} - set(bad))
            for name in twice:
                problems.append(Problem(str(path), line, name, "duplicate column"))
            if bad or twice:
                return []
            continue
        if len(cells) != len(header):
            problems.append(
                Problem(
                    str(path),
                    line,
                    None,
                    f"expected {len(header)} columns ({','.join(header)}), got {len(cells)}",
                )
            )
            continue
        rows.append((line, {k: v.strip() for k, v in zip(header, cells, strict=True) if v.strip()}))
    if header is None:
        problems.append(Problem(str(path), None, None, "empty call listing (no header row)"))
    return rows


def _unknown_column(name: str) -> str:
    near = difflib.get_close_matches(name, COLUMNS, n=1, cutoff=0.6)
    hint = f"did you mean '{near[0]}'?" if near else "known: " + ", ".join(COLUMNS)
    return f"unknown column ({hint})"


class _RowParser:
    """One listing row: collects problems instead of stopping at the first."""

    def __init__(self, listing: Path, line: int, problems: list[Problem]) -> None:
        self.listing = listing
        self.line = line
        self.problems = problems
        self.ok = True

    def problem(self, field_name: str | None, message: str) -> None:
        self.ok = False
        self.problems.append(Problem(str(self.listing), self.line, field_name, message))

    def parse(self, row: dict[str, Any]) -> CallSpec | None:
        for name in row:
            if name not in COLUMNS:
                self.problem(name, _unknown_column(name))
        call_id = self._string(row, "id", _CALL_ID, "letters, digits, '.', '_', '-'")
        language = self._string(row, "language", _LANGUAGE, "an ISO 639 code like 'en' or 'pt-BR'")
        audio, a, b = (self._path(row, name) for name in ("audio", "a", "b"))
        has = {name for name in ("audio", "a", "b") if row.get(name) not in (None, "")}
        if "audio" in has and has & {"a", "b"}:
            self.problem("audio", "give either 'audio' (one two-channel file) or 'a' and 'b'")
        elif not has:
            self.problem("audio", "missing: give 'audio' (two channels) or 'a' and 'b' (mono)")
        elif "audio" not in has and len(has) == 1:
            missing = ({"a", "b"} - has).pop()
            self.problem(missing, f"missing: '{missing}' goes with '{has.pop()}'")
        if not self.ok:
            return None
        assert call_id is not None and language is not None
        return CallSpec(call_id, language, self.listing, self.line, audio, a, b)

    def _string(
        self, row: dict[str, Any], name: str, pattern: re.Pattern[str], hint: str
    ) -> str | None:
        value = row.get(name)
        if value is None or value == "":
            self.problem(name, "missing required column")
            return None
        if not isinstance(value, str):
            self.problem(name, f"expected a string, got {type(value).__name__}")
            return None
        if not pattern.fullmatch(value):
            self.problem(name, f"invalid value {value!r} (expected {hint})")
            return None
        return value

    def _path(self, row: dict[str, Any], name: str) -> Path | None:
        value = row.get(name)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            self.problem(name, f"expected a path, got {type(value).__name__}")
            return None
        try:
            path = (self.listing.parent / value).resolve()
            found = path.exists()
        except (OSError, ValueError) as exc:  # a NUL byte, a name too long for the file system
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self.problem(name, f"invalid path {_show(value, 80)}: {reason}")
            return None
        if not found:
            self.problem(name, f"file not found: {_show(value)} (looked for {_show(str(path))})")
            return None
        return path


def _show(value: str, limit: int | None = None) -> str:
    """A value for a one-line message: quoted if it holds unprintable characters, and cut
    to ``limit`` characters."""
    shown = value if value.isprintable() else repr(value)
    if limit is not None and len(shown) > limit:
        shown = f"{shown[: limit - 3]}... ({len(value)} characters)"
    return shown


# ------------------------------------------------------------------------- header checks


def _check_audio(call: CallSpec, problems: list[Problem], tolerance_s: float) -> CallSpec | None:
    def problem(field_name: str, message: str) -> None:
        problems.append(Problem(str(call.listing), call.line, field_name, message))

    def info(field_name: str, path: Path) -> AudioInfo | None:
        try:
            return audio_info(path, max_duration_s=MAX_CALL_S)
        except AudioFileError as exc:
            problem(field_name, f"{path.name}: {exc.problem}")
            return None

    if call.audio is not None:
        got = info("audio", call.audio)
        if got is None:
            return None
        if got.channels != 2:
            kind = "a mono file" if got.channels == 1 else f"{got.channels} channels"
            problem(
                "audio",
                f"{call.audio.name}: expected 2 channels (one speaker each), got {kind}; "
                "give one mono file per speaker as 'a' and 'b' instead",
            )
            return None
        return _with_duration(call, got.duration_s)
    assert call.a is not None and call.b is not None
    sides = (("a", call.a), ("b", call.b))
    found = {name: info(name, path) for name, path in sides}
    ok = True
    for name, path in sides:
        got = found[name]
        if got is not None and got.channels != 1:
            problem(name, f"{path.name}: expected a mono file, got {got.channels} channels")
            ok = False
    a, b = found["a"], found["b"]
    if a is None or b is None or not ok:
        return None
    if abs(a.duration_s - b.duration_s) > tolerance_s:
        problem(
            "b",
            f"{call.b.name} is {b.duration_s:.3f} s long but {call.a.name} is "
            f"{a.duration_s:.3f} s: the two sides of a call must have the same length "
            f"(within {tolerance_s:g} s)",
        )
        return None
    return _with_duration(call, min(a.duration_s, b.duration_s))


def _with_duration(call: CallSpec, duration_s: float) -> CallSpec:
    return CallSpec(
        call.id, call.language, call.listing, call.line, call.audio, call.a, call.b, duration_s
    )
