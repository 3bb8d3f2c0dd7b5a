"""Run results in SQLite: one row per sample, committed only after its bundle is in place.

A run directory may hold several result files (one per shard); readers merge them by run id.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import typing
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from duplexsim.core.errors import ConfigError

__all__ = ["ResultRow", "RunStore", "read_results", "store_filename"]


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


def _store_files(run_dir: Path) -> Iterator[Path]:
    yield from sorted(run_dir.glob("results*.sqlite"))


def read_results(run_dir: Path) -> tuple[dict[str, Any], list[ResultRow]]:
    """Merged run metadata and rows from every result file in ``run_dir``."""
    files = list(_store_files(run_dir))
    if not files:
        raise ConfigError(f"{run_dir}: not a run directory (no results*.sqlite)")
    meta: dict[str, Any] = {}
    rows: dict[str, ResultRow] = {}
    for file in files:
        try:
            store = RunStore(file)
        except ConfigError:  # read-only media: read it as it is
            file_meta, file_rows = _read_only(file)
        else:
            try:
                file_meta, file_rows = store.meta(), store.rows()
            finally:
                store.close()
        meta = meta or file_meta
        rows.update((row.sample_id, row) for row in file_rows)
    return meta, sorted(rows.values(), key=lambda r: r.sample_id)


def _read_only(path: Path) -> tuple[dict[str, Any], list[ResultRow]]:
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
        meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM run_meta")}
        cur = db.execute(f"SELECT {', '.join(picks)} FROM results ORDER BY sample_id")
        return meta, [_row(values) for values in cur]
    except sqlite3.Error as exc:
        raise ConfigError(f"{path}: cannot read run results ({exc})") from None
    finally:
        db.close()
