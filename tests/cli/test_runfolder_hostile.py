"""Every command that reads a run folder, on run folders edited by hand as a hostile sender would:
nothing outside the run folder (and its benchmark) is opened, nothing blocks, memory stays
bounded, only documented one-line errors escape, and the shared reference cache is untouched.

A real two-session run is recorded once and scored with a fake scorer; each test damages a copy.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import sqlite3
import struct
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duplexsim.cli import main
from duplexsim.core.emotions import HEAD_NAMES
from duplexsim.core.errors import DuplexsimError
from duplexsim.core.runfolder import RunFolder
from duplexsim.export.fdb import export_fdb
from duplexsim.export.samples import sample_records
from duplexsim.replay.audit import audit_bundle
from duplexsim.replay.sessions import prepare_replay
from duplexsim.report.data import build_report
from duplexsim.runscores.cache import cache_root
from duplexsim.runscores.score import collect_clips, score_run
from duplexsim.session import eventloop
from duplexsim.viewer.data import load_run, load_session
from tests.helpers.runs import short_benchmark
from tests.helpers.views import record_run

MARKER = "OUTSIDE-MARKER-7f3a"
DEEP = "[" * 100_000 + "]" * 100_000


def fake_scorer() -> Callable[[list[np.ndarray]], Any]:
    """The 12 emotions of a clip from its length and level: the same clip, the same scores."""

    async def score(clips: list[np.ndarray]) -> list[SimpleNamespace]:
        out = []
        for clip in clips:
            seed = clip.size + int(1000 * float(np.abs(clip).mean() if clip.size else 0.0))
            values = np.random.default_rng(seed).random(len(HEAD_NAMES)).astype(np.float32)
            out.append(
                SimpleNamespace(dimensions=HEAD_NAMES, values=values, error=None,
                                precision="fp32", weights="sha256:fake", version="1")
            )  # fmt: skip
        return out

    return score


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile-runs")
    run = eventloop.run(record_run(root / "runs" / "r1", short_benchmark(root / "bench", 2)))
    eventloop.run(score_run(run, "fake", fake_scorer()))
    outside = root / "outside"
    shutil.copytree(run / "sessions" / "s1", outside / "s1")
    with open(outside / "s1" / "events.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"t": 0.5, "dir": "recv", "kind": "transcript", "text": MARKER}) + "\n")
    (outside / "secret.txt").write_text(MARKER + "\n")
    return run


@pytest.fixture
def run(recorded: Path, tmp_path: Path) -> Path:
    """A copy of the recorded run to damage, its outside folder beside it as in the original."""
    copy = tmp_path / "runs" / "r1"
    shutil.copytree(recorded, copy, symlinks=True)
    shutil.copytree(recorded.parent.parent / "outside", tmp_path / "outside")
    return copy


# ---- what the commands opened --------------------------------------------------------------------

_OPENED: list[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    wanted = _OPENED is not None and event in ("open", "sqlite3.connect") and args
    if wanted and isinstance(args[0], str | bytes | os.PathLike):
        _OPENED.append(os.fsdecode(args[0]))  # type: ignore[union-attr]


sys.addaudithook(_audit)  # audit hooks cannot be removed: it records only inside ``opened``


@contextlib.contextmanager
def opened(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every file opened meanwhile: by Python (the audit hook), by SQLite, by libsndfile."""
    global _OPENED
    seen: list[str] = []
    real = sf.SoundFile.__init__

    def sound_file(self: Any, file: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(file, str | os.PathLike):
            seen.append(os.fspath(file))
        real(self, file, *args, **kwargs)

    monkeypatch.setattr(sf.SoundFile, "__init__", sound_file)
    _OPENED = seen
    try:
        yield seen
    finally:
        _OPENED = None
        monkeypatch.setattr(sf.SoundFile, "__init__", real)


def _under(path: str, folder: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(folder.resolve())


# ---- the commands ----------------------------------------------------------------------------------


def _score(run: Path, out: Path) -> int:
    try:
        outcome = eventloop.run(score_run(RunFolder(run), "fake", fake_scorer()))
    except DuplexsimError as exc:
        print(f"duplexsim: error: {exc}", file=sys.stderr)
        return 2
    for key, why in outcome.errors.items():
        print(f"  {key}: {why}")
    return 1 if outcome.errors else 0


COMMANDS: dict[str, Callable[[Path, Path], int]] = {
    "view": lambda run, out: main(["view", str(run), "--out", str(out / "view")]),
    "report": lambda run, out: main(["report", str(run), "--out", str(out / "report")]),
    "score": _score,
    "export": lambda run, out: main(["export", "samples", str(run), "--out", str(out / "x.jsonl")]),
    "export-fdb": lambda run, out: main(["export", "fdb", str(run), str(out / "fdb")]),
    "replay": lambda run, out: main(["replay", str(run)]),
}


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """A command that blocks fails the test instead of hanging it."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"blocked for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_command(
    name: str, run: Path, capsys: pytest.CaptureFixture[str], seconds: int = 60
) -> tuple[int, str]:
    """(exit status, what it printed) of a command; never an internal error or a traceback."""
    out = run.parent.parent / "out"
    out.mkdir(exist_ok=True)
    with deadline(seconds):
        code = COMMANDS[name](run, out)
    printed = capsys.readouterr()
    text = printed.out + printed.err
    assert "internal error" not in text and "Traceback" not in text, text
    assert code in (0, 1, 2), text
    if code == 2:
        assert printed.err.startswith("duplexsim: error:") and printed.err.count("\n") == 1
    return code, text


def _sql(run: Path, statement: str, *params: object) -> None:
    db = sqlite3.connect(run / "results.sqlite")
    with db:
        db.execute(statement, params)
    db.close()


def _published(folder: Path) -> bool:
    return any(MARKER.encode() in p.read_bytes() for p in folder.rglob("*") if p.is_file())


# ---- paths that lead out -------------------------------------------------------------------------

ESCAPES = {
    "dotdot": lambda run: _sql(
        run, "UPDATE results SET bundle = ? WHERE sample_id = 's1'", "../../outside/s1"
    ),
    "absolute": lambda run: _sql(
        run,
        "UPDATE results SET bundle = ? WHERE sample_id = 's1'",
        str(run.parent.parent / "outside" / "s1"),
    ),
    "symlink": lambda run: (
        shutil.rmtree(run / "sessions" / "s1"),
        (run / "sessions" / "s1").symlink_to(run.parent.parent / "outside" / "s1"),
    ),
    "file-symlink": lambda run: [
        (run / "sessions" / "s1" / name).unlink()
        or (run / "sessions" / "s1" / name).symlink_to(run.parent.parent / "outside" / "s1" / name)
        for name in ("events.jsonl", "output.wav", "input.wav", "meta.json")
    ],
    "context": lambda run: _edit_meta(
        run, lambda m: m["sample"].update(context=str(run.parent.parent / "outside" / "secret.txt"))
    ),
    "reference": lambda run: _edit_meta(
        run,
        lambda m: m["sample"].update(reference=str(run.parent.parent / "outside" / "secret.txt")),
    ),
    "scores-symlink": lambda run: (
        (run / "scores" / "fake.json").unlink(),
        (run / "scores" / "fake.json").symlink_to(run.parent.parent / "outside" / "secret.txt"),
    ),
}


def _edit_meta(run: Path, change: Callable[[dict], None], sample: str = "s1") -> None:
    path = run / "sessions" / sample / "meta.json"
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("escape", sorted(ESCAPES))
def test_no_command_opens_a_file_outside_the_run_folder(
    run: Path, command: str, escape: str, capsys, monkeypatch
) -> None:
    if command == "replay" and escape in ("dotdot", "absolute", "scores-symlink", "reference"):
        pytest.skip("replay reads neither results rows' bundles nor references nor scores")
    ESCAPES[escape](run)
    outside = run.parent.parent / "outside"
    with opened(monkeypatch) as files:
        code, text = run_command(command, run, capsys)
    assert not [f for f in files if _under(f, outside)], (escape, command)
    assert MARKER not in text and not _published(run.parent.parent / "out")
    assert (
        "leads outside the run folder" in text
        or "not a file of the run's benchmark" in text
        or code == 0
    )  # view and export say so on the page, in the record
    if command in ("view", "export"):
        shown = "".join(p.read_text() for p in (run.parent.parent / "out").rglob("*.*")
                        if p.suffix in (".html", ".jsonl"))  # fmt: skip
        unread = {"context", "reference", "scores-symlink"}  # the page or record reads none
        unread |= {"dotdot", "absolute"} if command == "export" else set()  # sessions/<id>
        assert escape in unread or "leads outside" in shown


def test_allow_outside_paths_reads_them_when_asked(run: Path, capsys) -> None:
    ESCAPES["absolute"](run)
    out = run.parent.parent / "out"
    assert main(["view", str(run), "--out", str(out), "--allow-outside-paths"]) == 0
    assert _published(out)  # the user trusts this run: its pages show what it names


# ---- files that are not what they seem -----------------------------------------------------------


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("name", ["events.jsonl", "meta.json", "output.wav"])
def test_a_fifo_in_a_bundle_blocks_no_command(run: Path, command: str, name: str, capsys) -> None:
    _fifo(run / "sessions" / "s1" / name)
    code, text = run_command(command, run, capsys, seconds=60)
    if command == "replay":
        assert code == 2 and "not a regular file (a FIFO)" in text


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_fifo_for_the_results_is_one_line(run: Path, command: str, capsys) -> None:
    _fifo(run / "results.sqlite")
    code, text = run_command(command, run, capsys, seconds=30)
    assert code == 2 and "results.sqlite: not a regular file (a FIFO)" in text


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_sparse_events_file_of_gigabytes_costs_no_memory(run: Path, command: str, capsys) -> None:
    with open(run / "sessions" / "s1" / "events.jsonl", "ab") as fh:
        fh.truncate(3 << 30)  # sparse: no disk cost
    tracemalloc.start()
    try:
        code, text = run_command(command, run, capsys)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200 << 20, f"{command}: {peak >> 20} MiB"
    if command == "replay":
        assert code == 2 and "3.0 GiB, more than such a file can be" in text


def test_view_notes_a_sparse_events_file_on_its_page(run: Path, capsys) -> None:
    with open(run / "sessions" / "s1" / "events.jsonl", "ab") as fh:
        fh.truncate(3 << 30)
    run_command("view", run, capsys)
    page = (run.parent.parent / "out" / "view" / "sessions" / "s1.html").read_text()
    assert "3.0 GiB, more than such a file can be" in page
    assert (run.parent.parent / "out" / "view" / "sessions" / "s0.html").is_file()


# ---- values no session can hold ----------------------------------------------------------------------


def _event(run: Path, text: str) -> None:
    with open(run / "sessions" / "s1" / "events.jsonl", "a", encoding="utf-8") as fh:
        fh.write(text + "\n")


def _scores(run: Path, change: Callable[[dict], None]) -> None:
    path = run / "scores" / "fake.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


DAMAGE: dict[str, tuple[Callable[[Path], Any], str]] = {
    # what is done, and what replay (which cannot go on) says in its one line
    "t-1e13": (
        lambda run: _event(run, '{"t": 1e13, "dir": "recv", "kind": "transcript", "text": "x"}'),
        "field 't': 10000000000000.0 is out of range",
    ),
    "n-infinity": (
        lambda run: _event(run, '{"t": 0.5, "dir": "send", "kind": "audio", "n": Infinity}'),
        "Infinity is not valid JSON",
    ),
    "samples-huge": (
        lambda run: _event(run, '{"t": 0.5, "dir": "recv", "kind": "audio", "samples": 1e12}'),
        "field 'samples'",
    ),
    "events-deep": (lambda run: _event(run, '{"t": 0.5, "x": ' + DEEP + "}"), "nested more than"),
    "meta-deep": (
        lambda run: (run / "sessions" / "s1" / "meta.json").write_text('{"model": ' + DEEP + "}"),
        "nested more than 64 levels deep",
    ),
    "meta-nan": (
        lambda run: _edit_meta(run, lambda m: m["sample"].update(context_turn_start_s=math.nan)),
        "NaN is not valid JSON",
    ),
    "settings-huge": (
        lambda run: _edit_meta(run, lambda m: m["settings"]["turns"].update(max_reply_s=1e9)),
        "field 'settings.turns.max_reply_s'",
    ),
    "settings-long": (
        lambda run: _edit_meta(run, lambda m: m["settings"]["turns"].update(reply_timeout_s=3599)),
        "longer than any session",
    ),
    "outcome-text": (
        lambda run: _edit_meta(run, lambda m: m["outcome"]["timing"].update(speech_end_s="x")),
        "field 'outcome.timing.speech_end_s'",
    ),
    "results-string": (
        lambda run: _sql(run, "UPDATE results SET latency_s = 'soon', onset_s = 'x'"),
        "",
    ),
    "results-inf": (lambda run: _sql(run, "UPDATE results SET onset_s = ?", math.inf), ""),
    "results-deep-meta": (
        lambda run: _sql(run, "UPDATE run_meta SET value = ? WHERE key = 'model'", DEEP),
        "",
    ),
    "scores-shape": (
        lambda run: _scores(run, lambda d: d["items"]["reply/s1"].update(values=[[1.0], [2.0]])),
        "",
    ),
    "partner-clip-outside": (
        lambda run: _edit_meta(
            run,
            lambda m: m.update(
                partner=[{"kind": "interrupt", "clip": "/etc/passwd", "after_onset_s": 1.0}]
            ),
        ),
        "field 'partner[0].clip': /etc/passwd: not a file of the run's benchmark",
    ),
    "partner-step-1e13": (
        lambda run: _edit_meta(
            run,
            lambda m: m.update(
                partner=[
                    {"kind": "interrupt", "clip": m["sample"]["context"], "after_onset_s": 1e13}
                ]
            ),
        ),
        "field 'partner[0].after_onset_s': 10000000000000.0 is out of range",
    ),
    "results-partner": (
        lambda run: _sql(
            run,
            "UPDATE results SET partner = ?",
            '{"steps": [], "turns": [{"turn": 0, "step": 0, "emotion": "Anger", '
            '"onset_s": 1e13, "duration_s": 1.0}]}',
        ),
        "",
    ),
    "scores-deep": (
        lambda run: (run / "scores" / "fake.json").write_text(DEEP),
        "",
    ),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_values_no_session_can_hold_are_one_line_or_a_note(
    run: Path, command: str, damage: str, capsys
) -> None:
    edit, replay_says = DAMAGE[damage]
    if command == "replay" and not replay_says:
        pytest.skip("replay reads neither results nor scores")
    edit(run)
    tracemalloc.start()
    try:
        code, text = run_command(command, run, capsys)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 300 << 20
    if command == "replay":
        assert code == 2 and replay_says in text
    if command == "view" and damage not in ("scores-deep",):
        out = run.parent.parent / "out" / "view"
        assert (out / "sessions" / "s0.html").is_file() and (out / "sessions" / "s1.html").is_file()


def test_view_draws_a_timestamp_of_1e13_in_bounded_work(run: Path, capsys) -> None:
    DAMAGE["t-1e13"][0](run)
    _event(run, '{"t": 3599.0, "dir": "recv", "kind": "transcript", "text": "late"}')
    run_command("view", run, capsys, seconds=30)
    page = (run.parent.parent / "out" / "view" / "sessions" / "s1.html").read_text()
    assert "unreadable line left out (line " in page and "out of range" in page
    data = json.loads(page.split('type="application/json">')[1].split("</script>")[0])
    assert data["duration"] == pytest.approx(3599.0)
    assert 35990 <= len(data["traffic"]["sent"]) <= 35991


def sparse_wav(path: Path, seconds: float, rate: int) -> None:
    """A PCM16 mono WAV of ``seconds`` of silence that costs no disk (its data is a hole)."""
    frames = int(seconds * rate)
    fmt = struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
    head = b"RIFF" + struct.pack("<I", 36 + 2 * frames) + b"WAVEfmt " + fmt
    head += b"data" + struct.pack("<I", 2 * frames)
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(len(head) + 2 * frames)


def test_view_draws_a_long_session_in_bounded_memory(run: Path, capsys) -> None:
    bundle = run / "sessions" / "s1"
    sparse_wav(bundle / "input.wav", 1200.0, 16000)
    sparse_wav(bundle / "output.wav", 1200.0, 24000)  # held whole: 350 MB at least
    tracemalloc.start()
    try:
        run_command("view", run, capsys)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100 << 20, f"{peak >> 20} MiB"
    page = (run.parent.parent / "out" / "view" / "sessions" / "s1.html").read_text()
    data = json.loads(page.split('type="application/json">')[1].split("</script>")[0])
    assert 'id="audio-linked"' in page and data["duration"] == pytest.approx(1200.0)
    assert len(data["tracks"]["model"]["env"]["min"]) == 1600


def test_view_draws_at_most_its_cap_of_events_and_says_so(run: Path, capsys, monkeypatch) -> None:
    from duplexsim.viewer import data

    monkeypatch.setattr(data, "MAX_MARKERS", 5)
    for i in range(50):
        _event(run, json.dumps({"t": 0.5 - i * 0.001, "dir": "recv", "kind": "transcript",
                                "text": "x" * 10_000}))  # fmt: skip
    run_command("view", run, capsys)
    page = (run.parent.parent / "out" / "view" / "sessions" / "s1.html").read_text()
    assert "protocol events; the first 5 are shown" in page
    # each shown event twice (the table and the page's data), its detail clipped
    assert 0 < page.count("x" * 300) <= 2 * 5 and "x" * 1000 not in page


def test_replay_stops_at_the_recorded_sessions_length(run: Path, capsys, monkeypatch) -> None:
    """A recording whose model never answered, with an hour-long wait for the answer recorded
    in its settings (an hour fits a session): its replay stops where the recording ends."""
    from duplexsim.replay import sessions as replay

    monkeypatch.setattr(replay, "SLACK_S", 1.0)
    events = run / "sessions" / "s1" / "events.jsonl"
    kept = [ln for ln in events.read_text().splitlines() if '"dir":"recv"' not in ln]
    events.write_text("".join(ln + "\n" for ln in kept))

    def wait(m: dict) -> None:
        m["settings"]["turns"]["reply_timeout_s"] = m["settings"]["stall_timeout_s"] = 3000.0

    _edit_meta(run, wait)
    code, text = run_command("replay", run, capsys, seconds=30)
    assert code == 2 and "past the recorded session's length" in text


def test_score_lists_a_session_whose_row_is_unusable_and_scores_the_rest(run: Path, capsys) -> None:
    _sql(run, "UPDATE results SET onset_s = ? WHERE sample_id = 's1'", math.inf)
    code, text = run_command("score", run, capsys)
    assert code == 1 and "reply/s1: results.sqlite: field 'onset_s': inf is not a finite" in text


def test_report_and_export_say_what_was_unusable(run: Path, capsys) -> None:
    DAMAGE["scores-shape"][0](run)
    _sql(run, "UPDATE results SET latency_s = 'soon' WHERE sample_id = 's0'")
    report = build_report(run, "fake")
    assert "unusable cached score" in report.unscored["reply/s1"]
    assert report.problems["s0"] == [
        "results.sqlite: field 'latency_s': 'soon' is not a number (treated as missing)"
    ]
    records = {r["sample_id"]: r for r in sample_records(run)}
    assert records["s1"]["scores"]["fake"]["reply"] is None
    assert any("values" in p for p in records["s1"]["problems"])
    assert records["s0"]["latency_s"] is None and records["s0"]["problems"]


# ---- the shared reference cache ----------------------------------------------------------------------


def _cache_files() -> dict[Path, bytes]:
    root = cache_root()
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} if root.is_dir() else {}


def _claim(run: Path, **change: object) -> None:
    db = sqlite3.connect(run / "results.sqlite")
    (text,) = db.execute("SELECT value FROM run_meta WHERE key = 'benchmark'").fetchone()
    db.close()
    _sql(run, "UPDATE run_meta SET value = ? WHERE key = 'benchmark'",
         json.dumps({**json.loads(text), **change}))  # fmt: skip
    shutil.rmtree(run / "scores")  # its references are scored anew


@pytest.mark.parametrize(
    "digest", ["../..", "../../../poison", "/ABS/poison", "sha256:0123456789abcdef"]
)
def test_a_crafted_digest_never_reaches_the_shared_cache(
    run: Path, digest: str, tmp_path: Path
) -> None:
    digest = digest.replace("/ABS", str(tmp_path))
    _claim(run, digest=digest)
    before = _cache_files()
    eventloop.run(score_run(RunFolder(run), "fake", fake_scorer()))
    assert _cache_files() == before
    assert not (tmp_path / "poison").exists() and not (cache_root().parent / "poison").exists()
    assert (run / "scores" / "fake.json").is_file()  # scored into its own cache


def test_a_crafted_reference_never_lands_in_the_shared_cache_of_its_benchmark(
    run: Path,
) -> None:
    # the real benchmark, the real digest, but s1 claims s0's reference: a file of the benchmark
    _edit_meta(run, lambda m: m["sample"].update(reference=m["sample"]["reference"].replace(
        "s1.ref", "s0.ref")))  # fmt: skip
    shutil.rmtree(run / "scores")
    eventloop.run(score_run(RunFolder(run), "fake", fake_scorer()))
    (shared,) = [p for p in cache_root().rglob("*.json")]
    assert set(json.loads(shared.read_text())["items"]) == {"reference/s0"}


def test_a_sound_run_shares_its_references(run: Path) -> None:
    shutil.rmtree(run / "scores")
    first = eventloop.run(score_run(RunFolder(run), "fake", fake_scorer()))
    assert first.references_scored == 2
    shutil.rmtree(run / "scores")
    again = eventloop.run(score_run(RunFolder(run), "fake", fake_scorer()))
    assert again.shared == 2 and again.references_scored == 0


# ---- any crafted file: only documented errors ------------------------------------------------------


def _view(folder: RunFolder) -> None:
    view = load_run(folder)
    for row in view.rows:
        load_session(view, row.sample_id, max_embed_s=0.0)  # drawn block by block
        load_session(view, row.sample_id)


def _replay(folder: RunFolder) -> None:
    for bundle in folder.sessions():
        ready = prepare_replay(folder, bundle)
        audit_bundle(bundle, ready.meta, folder)


READERS: dict[str, Callable[[RunFolder], Any]] = {
    # what every reading command reads, short of replaying in real time and writing pages
    "view": _view,
    "report": lambda folder: build_report(folder, "fake"),
    "export": lambda folder: list(sample_records(folder)),
    "export-fdb": lambda folder: export_fdb(folder, folder.path.parent.parent / "fdb"),
    "score": collect_clips,
    "replay": _replay,
}


def documented_only(run: Path) -> None:
    for reader in READERS.values():
        try:
            reader(RunFolder(run))
        except DuplexsimError as exc:
            assert "\n" not in str(exc), str(exc)


_LEAF = st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=8)
_JSON = st.recursive(
    _LEAF,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
_EVENT_KEYS = st.sampled_from(["t", "dir", "kind", "n", "due", "woke", "samples", "placed_s",
                               "offset_s", "silent", "frame_ms", "end_s", "text", "scores",
                               "retryable"])  # fmt: skip
HYPOTHESIS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def scratch(recorded: Path, tmp_path: Path) -> Callable[[], Path]:
    """A fresh copy of the run for each example."""

    def fresh() -> Path:
        shutil.rmtree(tmp_path / "h", ignore_errors=True)
        copy = tmp_path / "h" / "runs" / "r1"
        shutil.copytree(recorded, copy)
        return copy

    return fresh


@HYPOTHESIS
@given(events=st.lists(st.dictionaries(_EVENT_KEYS, _JSON, max_size=6), max_size=5))
def test_any_events_read_or_are_a_documented_error(scratch, events) -> None:
    run = scratch()
    for event in events:
        _event(run, json.dumps(event))
    documented_only(run)


@HYPOTHESIS
@given(
    section=st.sampled_from(["sample", "settings", "outcome", "capabilities", "attempts",
                             "input_rate", "output_rate", "kind", "bundle_version"]),
    value=_JSON,
)  # fmt: skip
def test_any_meta_json_reads_or_is_a_documented_error(scratch, section, value) -> None:
    run = scratch()
    _edit_meta(run, lambda m: m.update({section: value}))
    documented_only(run)


@HYPOTHESIS
@given(
    field=st.sampled_from(["turns", "vad", "budget", "frame_ms", "stall_timeout_s", "timing",
                           "check", "context_turn_start_s", "status"]),
    value=_JSON,
)  # fmt: skip
def test_any_nested_setting_reads_or_is_a_documented_error(scratch, field, value) -> None:
    run = scratch()

    def change(m: dict) -> None:
        for part in ("settings", "outcome", "sample"):
            if field in m[part]:
                m[part][field] = value

    _edit_meta(run, change)
    documented_only(run)


_SQL = st.none() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=8) \
    | st.binary(max_size=8)  # fmt: skip


@HYPOTHESIS
@given(
    values=st.dictionaries(st.sampled_from(["status", "latency_s", "onset_s", "reply_duration_s",
                                            "speech_end_s", "bundle", "emotion", "attempts",
                                            "timing_valid", "sample_id"]), _SQL, max_size=4),
)  # fmt: skip
def test_any_results_row_reads_or_is_a_documented_error(scratch, values) -> None:
    run = scratch()
    for column, value in values.items():
        with contextlib.suppress(sqlite3.IntegrityError):
            _sql(run, f"UPDATE results SET {column} = ? WHERE sample_id = 's1'", value)
    documented_only(run)


@HYPOTHESIS
@given(item=_JSON, dims=st.one_of(st.just(list(HEAD_NAMES)), _JSON))
def test_any_score_file_reads_or_is_a_documented_error(scratch, item, dims) -> None:
    run = scratch()
    _scores(run, lambda d: (d["items"].update({"reply/s1": item}), d.update(dimensions=dims)))
    documented_only(run)
