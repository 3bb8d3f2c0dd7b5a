"""Run results in SQLite: one row per sample, committed only after its bundle is in place.

A run directory may hold several result files (one per shard); readers merge them by run id,
and read every value as something that may have been edited by hand (``load_results``).
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import typing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from duplexsim.core import safejson
from duplexsim.core.bundle import MAX_ATTEMPTS, MAX_SESSION_S, number_problem
from duplexsim.core.emotions import EMOTION_NAMES
from duplexsim.core.errors import ConfigError
from duplexsim.core.partnerfield import MAX_STEPS
from duplexsim.core.partnermetrics import PartnerRecord
from duplexsim.core.runfolder import RunFolder

__all__ = [
    "ResultRow",
    "RunResults",
    "RunStore",
    "load_results",
    "read_results",
    "sample_of",
    "session_key",
    "store_filename",
]


@dataclass(frozen=True)
class ResultRow:
    """One sample's result. The table's columns, their SQL types and the order of every query
    come from these fields: a field added here is a column everywhere (older stores gain it,
    NULL in their rows, when opened)."""

    sample_id: str
    status: str
    end_reason: str
    error: str | None
    attempts: int
    language: str
    emotion: str
    latency_s: float | None
    onset_s: float | None
    reply_duration_s: float | None
    overlap_s: float | None
    speech_end_s: float | None
    send_p50_ms: float | None
    send_p99_ms: float | None
    send_max_ms: float | None
    bytes_sent: int | None
    bytes_received: int | None
    wall_s: float | None
    bundle: str | None
    finished_at: str
    # our own timing kept its budget (None: recorded before it was checked), the first figure
    # over it, and a reply cut short (max-length, deadline, server-closed)
    timing_valid: bool | None = None
    timing_invalid: str | None = None
    loop_lag_max_ms: float | None = None
    recv_lag_max_ms: float | None = None
    truncated: str | None = None
    task: str | None = None  # the benchmark's task (Full-Duplex-Bench's), for timing by task
    # what the machine may have added to the latency (send + our loop + a co-located server)
    latency_bound_ms: float | None = None
    # a partner's session: what the model did at each step, and its next turns (JSON,
    # ``core.partnermetrics.PartnerRecord``)
    partner: str | None = None
    # which run of the sample this row is (``run --trials K``): None for a sample run once;
    # trial t > 1 is keyed ``<sample id>.trial<t>`` (``session_key``)
    trial: int | None = None

    @property
    def sample(self) -> str:
        """The benchmark sample this row ran (its key without a trial's suffix)."""
        return sample_of(self.sample_id, self.trial)

    # what the sample used over all its attempts (every attempt is billed): the provider's token
    # counts (None where it reported none) and the seconds measured here (duplexsim.core.usage)
    input_audio_tokens: int | None = None
    input_text_tokens: int | None = None
    cached_audio_tokens: int | None = None
    cached_text_tokens: int | None = None
    output_audio_tokens: int | None = None
    output_text_tokens: int | None = None
    audio_sent_s: float | None = None
    audio_received_s: float | None = None
    connected_s: float | None = None
    # the provider's limits: attempts it refused for them, and how long this sample's starts
    # were held back by them (pacing under what remains, back-off after a refusal)
    rate_limited: int | None = None
    provider_wait_s: float | None = None
    context_s: float | None = None  # the context's length (what estimates scale usage by)
    # the model heard Speaker A's audio as a person's client sends it (None: recorded before
    # fidelity was told apart from precision), and why not
    input_faithful: bool | None = None
    fidelity_lost: str | None = None

    @property
    def faithful(self) -> bool:
        """Input fidelity kept: the sample counts for every metric. A row recorded before the
        split reads as it did: a session whose timing was invalid counted for none."""
        if self.input_faithful is not None:
            return self.input_faithful
        return self.timing_valid is not False

    @property
    def precise(self) -> bool:
        """Measurement precision kept (or never checked): its latency counts."""
        return self.timing_valid is not False and self.faithful


def session_key(sample_id: str, trial: int) -> str:
    """The row's key and the session's folder name of one trial of a sample: the sample id for
    trial 1 (so a run extended with more trials keeps its first), ``<id>.trial<t>`` after it."""
    return sample_id if trial <= 1 else f"{sample_id}{TRIAL_MARK}{trial}"


def sample_of(key: str, trial: int | None) -> str:
    """The sample id of a row's key (``session_key`` reversed, given the row's trial)."""
    if trial is None or trial <= 1:
        return key
    return key.removesuffix(f"{TRIAL_MARK}{trial}")


TRIAL_MARK = ".trial"
_SQL_TYPES = {str: "TEXT", int: "INTEGER", float: "REAL", bool: "INTEGER"}


def _base(hint: Any) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args else hint


def _column(name: str, hint: Any) -> tuple[str, str, bool]:
    """(name, SQL type, whether NULL is allowed) of one field."""
    return name, _SQL_TYPES[_base(hint)], type(None) in typing.get_args(hint)


_HINTS = typing.get_type_hints(ResultRow)
_COLUMNS = [_column(f.name, _HINTS[f.name]) for f in dataclasses.fields(ResultRow)]
COLUMNS = tuple(name for name, _, _ in _COLUMNS)
_BOOLS = tuple(name for name in COLUMNS if _base(_HINTS[name]) is bool)
# the measurements among them (numbers, NULL when not measured)
MEASURES = tuple(
    name for name, _, nullable in _COLUMNS if nullable and _base(_HINTS[name]) in (int, float)
)
_DEFINITIONS = ",\n    ".join(
    f"{name} {sql}" + ("" if nullable else " NOT NULL") + (" PRIMARY KEY" if i == 0 else "")
    for i, (name, sql, nullable) in enumerate(_COLUMNS)
)
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS run_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    {_DEFINITIONS}
);
"""


def store_filename(shard: tuple[int, int] | None) -> str:
    return "results.sqlite" if shard is None else f"results-shard{shard[0]}of{shard[1]}.sqlite"


class RunStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript(SCHEMA)
            self._add_missing_columns()
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"{path}: cannot open run results ({exc})") from None

    def _add_missing_columns(self) -> None:
        """A store written before a column existed gains it (NULL in its rows)."""
        have = {row[1] for row in self.db.execute("PRAGMA table_info(results)")}
        for name, sql, nullable in _COLUMNS:
            if name not in have:
                empty = "''" if sql == "TEXT" else "0"
                default = "" if nullable else f" NOT NULL DEFAULT {empty}"
                self.db.execute(f"ALTER TABLE results ADD COLUMN {name} {sql}{default}")

    def close(self) -> None:
        self.db.close()

    def set_meta(self, values: dict[str, Any]) -> None:
        with self.db:
            self.db.execute("BEGIN")
            for key, value in values.items():
                self.db.execute(
                    "INSERT OR REPLACE INTO run_meta VALUES (?, ?)",
                    (key, json.dumps(value, default=str)),
                )

    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self.db.execute("SELECT key, value FROM run_meta")}

    def put(self, row: ResultRow) -> None:
        values = tuple(getattr(row, c) for c in COLUMNS)
        marks = ", ".join("?" * len(COLUMNS))
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute(
                f"INSERT OR REPLACE INTO results ({', '.join(COLUMNS)}) VALUES ({marks})", values
            )

    def rows(self) -> list[ResultRow]:
        cur = self.db.execute(f"SELECT {', '.join(COLUMNS)} FROM results ORDER BY sample_id")
        return [_row(values) for values in cur]


def _row(values: tuple[Any, ...]) -> ResultRow:
    """A row as read back: SQLite keeps booleans as 0 and 1."""
    row = ResultRow(*values)
    flags: dict[str, Any] = {
        n: bool(getattr(row, n)) for n in _BOOLS if getattr(row, n) is not None
    }
    return replace(row, **flags) if flags else row


# ---- reading a run's results, as run folders from elsewhere are read -------------------------

MAX_TEXT = 1_000_000  # characters: a session's whole text budget
_S = MAX_SESSION_S
# the range of each number column (others: a duration, 0 to a session's length)
_RANGES: dict[str, tuple[float, float]] = {
    "attempts": (0, MAX_ATTEMPTS),
    "latency_s": (-_S, _S),  # negative: the model spoke before Speaker A had finished
    "wall_s": (0, _S * MAX_ATTEMPTS),
    "bytes_sent": (0, 2**53),
    "bytes_received": (0, 2**53),
    **{name: (-_S * 1000, _S * 1000) for name in COLUMNS if name.endswith("_ms")},
}
_META_TYPES: dict[str, type | tuple[type, ...]] = {
    "run_id": str,
    "model": dict,
    "benchmark": (dict, str),
    "settings": dict,
    "run": dict,
    "created": str,
    "duplexsim": str,
    "packages": dict,
}


@dataclass(frozen=True)
class RunResults:
    """A run's metadata and rows, every value typed; ``problems``: what was unusable, by sample
    id ("" for the run's metadata), each value it names treated as missing."""

    meta: dict[str, Any]
    rows: list[ResultRow]
    problems: dict[str, list[str]]


def read_results(run: RunFolder | Path) -> tuple[dict[str, Any], list[ResultRow]]:
    """Merged run metadata and rows from every result file of the run (see ``load_results``)."""
    results = load_results(run)
    return results.meta, results.rows


def load_results(run: RunFolder | Path) -> RunResults:
    """Merged run metadata and rows from every result file of the run, each value of the type
    and range its column holds: a value that is not is treated as missing (NULL, or empty for a
    column that cannot be) and said in ``problems``; a row without a usable sample id is left
    out (said under "")."""
    folder = RunFolder.of(run)
    meta: dict[str, Any] = {}
    rows: dict[str, tuple[ResultRow, list[str]]] = {}
    run_problems: list[str] = []
    for file in folder.store_files():
        pairs, raw_rows = _read_store(file)
        meta = meta or _typed_meta(pairs, file, run_problems)
        for values in raw_rows:
            notes: list[str] = []
            row = _typed_row(values, file, notes)
            if row is None:
                run_problems += notes
            else:
                rows[row.sample_id] = (row, notes)
    problems = {sid: notes for sid, (_, notes) in rows.items() if notes}
    if run_problems:
        problems[""] = run_problems
    ordered = [row for _, (row, _) in sorted(rows.items())]
    return RunResults(meta, ordered, problems)


def _read_store(path: Path) -> tuple[list[tuple[Any, Any]], list[tuple[Any, ...]]]:
    """The raw (key, value) pairs of run_meta and the raw rows of results."""
    try:
        store = RunStore(path)
    except ConfigError:  # read-only media: read it as it is
        return _read_only(path)
    try:
        pairs = list(store.db.execute("SELECT key, value FROM run_meta"))
        cur = store.db.execute(f"SELECT {', '.join(COLUMNS)} FROM results ORDER BY sample_id")
        return pairs, list(cur)
    except sqlite3.Error as exc:
        raise ConfigError(f"{path}: cannot read run results ({exc})") from None
    finally:
        store.close()


def _read_only(path: Path) -> tuple[list[tuple[Any, Any]], list[tuple[Any, ...]]]:
    """A store read without writing anything: on read-only media a WAL database cannot make
    its shared-memory file, so it is opened as immutable; columns it predates read as empty."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True)
    except sqlite3.Error as exc:
        raise ConfigError(f"{path}: cannot open run results ({exc})") from None
    try:
        have = {row[1] for row in db.execute("PRAGMA table_info(results)")}
        picks = [
            name if name in have else ("NULL" if nullable else "''" if sql == "TEXT" else "0")
            for name, sql, nullable in _COLUMNS
        ]
        pairs = list(db.execute("SELECT key, value FROM run_meta"))
        cur = db.execute(f"SELECT {', '.join(picks)} FROM results ORDER BY sample_id")
        return pairs, list(cur)
    except sqlite3.Error as exc:
        raise ConfigError(f"{path}: cannot read run results ({exc})") from None
    finally:
        db.close()


def _typed_meta(pairs: list[tuple[Any, Any]], file: Path, problems: list[str]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for key, text in pairs:
        where = f"{file.name}: run_meta {str(key)[:40]!r}"
        if not isinstance(key, str) or not isinstance(text, str):
            problems.append(f"{where}: not text (left out)")
            continue
        try:
            value = safejson.loads(text)
        except safejson.JsonError as exc:
            problems.append(f"{where}: {exc} (left out)")
            continue
        wanted = _META_TYPES.get(key)
        if wanted is not None and not isinstance(value, wanted):
            problems.append(f"{where}: not a {_type_names(wanted)} (left out)")
            continue
        meta[key] = value
    return meta


def _type_names(wanted: type | tuple[type, ...]) -> str:
    names: dict[type, str] = {dict: "JSON object", str: "string"}
    kinds = wanted if isinstance(wanted, tuple) else (wanted,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _typed_row(values: tuple[Any, ...], file: Path, notes: list[str]) -> ResultRow | None:
    """The row with each value of its column's type and range (see ``load_results``)."""
    sample_id = values[0]
    if not isinstance(sample_id, str) or not sample_id or len(sample_id) > MAX_TEXT:
        notes.append(f"{file.name}: a row whose sample_id is not a usable text (left out)")
        return None
    fields: dict[str, Any] = {}
    for (name, sql, nullable), value in zip(_COLUMNS, values, strict=True):
        problem = _value_problem(name, sql, value)
        if problem is not None:
            notes.append(f"{file.name}: field '{name}': {problem} (treated as missing)")
            value = None if nullable else ("" if sql == "TEXT" else 0)
        elif name in _BOOLS and value is not None:
            value = bool(value)  # SQLite keeps booleans as 0 and 1
        elif value is not None and not isinstance(value, str):
            value = float(value) if sql == "REAL" else int(value)
        fields[name] = value
    _enumerated(fields, file, notes)
    return ResultRow(**fields)


STATUSES = ("ok", "no-reply", "failed")


def _enumerated(fields: dict[str, Any], file: Path, notes: list[str]) -> None:
    """The columns that name one of a few things: a status, and an emotion (one of the 12, or
    none: a sample without a reference) that comes with its language."""
    if fields["status"] not in STATUSES:
        notes.append(
            f"{file.name}: field 'status': {str(fields['status'])[:40]!r} is not one of "
            f"{', '.join(STATUSES)} (treated as failed)"
        )
        fields["status"] = "failed"
    emotion = fields["emotion"]
    if emotion and (emotion not in EMOTION_NAMES or not fields["language"]):
        why = "has no language" if emotion in EMOTION_NAMES else "is not one of the 12 emotions"
        notes.append(
            f"{file.name}: field 'emotion': {emotion[:40]!r} {why} (treated as no reference)"
        )
        fields["emotion"] = ""


def _value_problem(name: str, sql: str, value: object) -> str | None:
    if value is None:
        return None  # a NULL where the column cannot hold one reads as SQLite gives it
    if sql == "TEXT":
        if not isinstance(value, str):
            return f"a {type(value).__name__}, not text"
        if len(value) > MAX_TEXT:
            return f"{len(value):,} characters, more than {MAX_TEXT:,}"
        return _partner_problem(value) if name == "partner" else None
    if name in _BOOLS:
        return (
            None if value in (0, 1) and not isinstance(value, float) else f"{value!r} is not 0 or 1"
        )
    low, high = _RANGES.get(name, (0, _S))
    return number_problem(value, low, high, integer=sql == "INTEGER")


def _partner_problem(text: str) -> str | None:
    """Why a ``partner`` value is no record a partner's session writes (None: it is one)."""
    try:
        data = safejson.loads(text)
        record = PartnerRecord.from_json(text)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        return f"not a partner record ({type(exc).__name__}: {str(exc)[:80]})"
    bad = _bad_number(data)
    if bad is not None:
        return f"not a partner record ({bad})"
    for t in record.turns:
        wrong = [
            number_problem(t.turn, 0, MAX_STEPS, integer=True),
            number_problem(t.step, 0, MAX_STEPS, integer=True),
            None if t.emotion is None or t.emotion in EMOTION_NAMES else "an unknown emotion",
            *(number_problem(v, 0, _S) for v in (t.onset_s, t.duration_s) if v is not None),
        ]
        problem = next((w for w in wrong if w), None)
        if problem:
            return f"not a partner record (turn: {problem})"
    return None


def _bad_number(value: Any) -> str | None:
    """The first number in a JSON value that no session's times, counts or steps reach."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, int | float) and not isinstance(item, bool):
            problem = number_problem(item, -_S * 1000, _S * 1000)
            if problem:
                return problem
    return None
