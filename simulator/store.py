"""Run results in SQLite: one row per sample, committed only after its bundle is in place.

A run directory may hold several result files (one per shard); readers merge them by run id.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.core.errors import ConfigError

__all__ = ["ResultRow", "RunStore", "read_results", "store_filename"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS run_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    sample_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    end_reason TEXT NOT NULL,
    error TEXT,
    attempts INTEGER NOT NULL,
    language TEXT NOT NULL,
    emotion TEXT NOT NULL,
    latency_s REAL,
    onset_s REAL,
    reply_duration_s REAL,
    overlap_s REAL,
    speech_end_s REAL,
    send_p50_ms REAL,
    send_p99_ms REAL,
    send_max_ms REAL,
    bytes_sent INTEGER,
    bytes_received INTEGER,
    wall_s REAL,
    bundle TEXT,
    finished_at TEXT NOT NULL
);
"""
COLUMNS = (
    "sample_id",
    "status",
    "end_reason",
    "error",
    "attempts",
    "language",
    "emotion",
    "latency_s",
    "onset_s",
    "reply_duration_s",
    "overlap_s",
    "speech_end_s",
    "send_p50_ms",
    "send_p99_ms",
    "send_max_ms",
    "bytes_sent",
    "bytes_received",
    "wall_s",
    "bundle",
    "finished_at",
)
# the measurements among them (REAL or INTEGER, NULL when not measured)
MEASURES = COLUMNS[COLUMNS.index("latency_s") : COLUMNS.index("wall_s") + 1]


@dataclass(frozen=True)
class ResultRow:
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
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"{path}: cannot open run results ({exc})") from None

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
        return [ResultRow(*r) for r in cur]


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
        db = _open_for_reading(file)
        try:
            if not meta:
                meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM run_meta")}
            cur = db.execute(f"SELECT {', '.join(COLUMNS)} FROM results ORDER BY sample_id")
            for values in cur:
                row = ResultRow(*values)
                rows[row.sample_id] = row
        except sqlite3.Error as exc:
            raise ConfigError(f"{file}: cannot read run results ({exc})") from None
        finally:
            db.close()
    return meta, sorted(rows.values(), key=lambda r: r.sample_id)


def _open_for_reading(path: Path) -> sqlite3.Connection:
    """A connection that only reads, and works on read-only media too: there a WAL database
    cannot make its shared-memory file, and is read as immutable instead."""
    uri = path.resolve().as_uri()
    try:
        db = sqlite3.connect(f"{uri}?mode=ro", uri=True)
        db.execute("SELECT 1 FROM run_meta LIMIT 1")
        return db
    except sqlite3.Error:
        try:
            return sqlite3.connect(f"{uri}?immutable=1", uri=True)
        except sqlite3.Error as exc:
            raise ConfigError(f"{path}: cannot open run results ({exc})") from None
