"""Text from outside reaches the terminal and spreadsheets shown, never acted on: a server's error
in ``models check``, a run folder's text in ``report``, ``replay`` and the CSV export."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest
from websockets.asyncio.server import ServerConnection, serve

from duplexsim.cli import main
from duplexsim.session import eventloop
from tests.helpers.hostile_servers import drain
from tests.helpers.runs import short_benchmark
from tests.helpers.views import record_run

ESC = "\x1b]0;PWNED\x07\x1b[31m"  # retitles the window, turns the text red
SHOWN = "\\x1b]0;PWNED\\x07\\x1b[31m"
FORMULA = '=HYPERLINK("http://evil.example","x")'


def shown_not_sent(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text, text
    assert SHOWN in text, text


async def test_models_check_shows_a_servers_error_escaped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def handler(ws: ServerConnection) -> None:
        said = {"type": "error", "code": "E0100", "slug": "x", "message": f"{ESC}bad\r\nthings"}
        await ws.send(json.dumps(said))
        await drain(ws)

    monkeypatch.setenv("HUME_API_KEY", "k")
    async with serve(handler, "127.0.0.1", 0) as server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        code = await asyncio.to_thread(main, ["models", "check", "hume-evi", "--url", url])
    out = capsys.readouterr().out
    assert code == 1
    shown_not_sent(out)
    [row] = [line for line in out.splitlines() if line.startswith("hume-evi")]
    assert f"FAILED: EVI error E0100 (x): {SHOWN}bad\\r\\nthings" in row


@pytest.fixture(scope="module")
def crafted_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recorded run (timing only: it reports unscored) whose text was edited by hand: escapes
    in a language, the model's name and a session's recorded status, a formula in an error."""
    root = tmp_path_factory.mktemp("crafted")
    bench = short_benchmark(root / "b", 1)
    [line] = [json.loads(text) for text in (bench / "manifest.jsonl").read_text().splitlines()]
    timing_only = {k: v for k, v in line.items() if k not in ("emotion", "reference")}
    (bench / "manifest.jsonl").write_text(json.dumps({**timing_only, "task": "t"}) + "\n")
    run = eventloop.run(record_run(root / "runs" / "r", bench))
    with sqlite3.connect(run / "results.sqlite") as db:
        db.execute("UPDATE results SET language = ?, error = ?", (f"{ESC}en", FORMULA))
        [(model,)] = db.execute("SELECT value FROM run_meta WHERE key = 'model'")
        named = json.dumps({**json.loads(model), "name": f"{ESC}model"})
        db.execute("UPDATE run_meta SET value = ? WHERE key = 'model'", (named,))
    meta_path = run / "sessions" / "s0" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["outcome"]["status"] = f"{ESC}ok"
    meta_path.write_text(json.dumps(meta))
    return run


def test_report_shows_a_runs_text_escaped(
    crafted_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(crafted_run), "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    shown_not_sent(out)
    assert f"{SHOWN}model" in out


def test_replay_shows_a_runs_text_escaped(
    crafted_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["replay", str(crafted_run)])  # the edited status disagrees with the replay: exit 1
    out = capsys.readouterr().out
    shown_not_sent(out)
    assert f"{SHOWN}ok" in out


def test_csv_export_neutralises_formulas_and_escapes(
    crafted_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "samples", str(crafted_run), "--format", "csv"]) == 0
    out = capsys.readouterr().out
    shown_not_sent(out)
    [row] = list(csv.DictReader(io.StringIO(out)))
    assert row["error"] == "'" + FORMULA
    assert row["language"] == f"{SHOWN}en" and row["model"] == f"{SHOWN}model"
    for value in row.values():
        assert not value.startswith(("=", "+", "-", "@", "\t", "\r")), value


def test_jsonl_export_keeps_the_text_as_it_was(
    crafted_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """JSON escapes control characters itself, and a reader gets the text back whole."""
    assert main(["export", "samples", str(crafted_run)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    [record] = [json.loads(line) for line in out.splitlines()]
    assert record["language"] == f"{ESC}en" and record["error"] == FORMULA
