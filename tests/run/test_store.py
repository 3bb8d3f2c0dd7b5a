"""The results table comes from ResultRow alone: its columns, and older stores gain new ones."""

from __future__ import annotations

import dataclasses
import sqlite3

from duplexsim.run.store import COLUMNS, MEASURES, SCHEMA, ResultRow, RunStore


def row(sample_id: str = "a") -> ResultRow:
    values = {f.name: None for f in dataclasses.fields(ResultRow)}
    values |= {"sample_id": sample_id, "status": "ok", "end_reason": "vad", "attempts": 1}
    values |= {"language": "en", "emotion": "Anger", "finished_at": "now", "latency_s": 0.5}
    return ResultRow(**values)


def test_the_schema_has_every_field_of_the_row_in_order():
    assert tuple(f.name for f in dataclasses.fields(ResultRow)) == COLUMNS
    assert "latency_s REAL" in SCHEMA and "status TEXT NOT NULL" in SCHEMA
    assert "wall_s" in MEASURES and "bundle" not in MEASURES and "status" not in MEASURES


def test_a_store_without_a_newer_column_gains_it_and_reads(tmp_path):
    path = tmp_path / "results.sqlite"
    old = SCHEMA.replace("    wall_s REAL,\n", "")
    assert old != SCHEMA
    db = sqlite3.connect(path)
    db.executescript(old)
    names = [c for c in COLUMNS if c != "wall_s"]
    r = row()
    db.execute(
        f"INSERT INTO results ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
        [getattr(r, c) for c in names],
    )
    db.commit()
    db.close()
    store = RunStore(path)
    try:
        assert store.rows() == [r]  # wall_s: NULL in the older row
        store.put(dataclasses.replace(row("b"), wall_s=1.5))
        assert [x.wall_s for x in store.rows()] == [None, 1.5]
    finally:
        store.close()
