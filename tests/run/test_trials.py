"""``run --trials K``: each sample run K times, each trial its own session and row; resumable
trial by trial, and a finished run grows with a larger K."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.pcm_ws.server import start_server
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.errors import ConfigError
from duplexsim.profiles.profile import ModelProfile
from duplexsim.run.runner import RunOptions, execute_run
from duplexsim.run.store import read_results, sample_of, session_key
from duplexsim.runscores.score import collect_clips
from tests.helpers.paths import REPO
from tests.helpers.runs import FAST_ARGS, SETTINGS, short_benchmark


def options(tmp_path: Path, **kw) -> RunOptions:
    return RunOptions(run_id="t", runs_dir=tmp_path / "runs", settings=SETTINGS, quiet=True, **kw)


def keys(samples: int, trials: int) -> list[str]:
    return sorted(session_key(f"s{i}", t) for i in range(samples) for t in range(1, trials + 1))


def test_session_keys() -> None:
    assert session_key("en-anger-1", 1) == "en-anger-1"
    assert session_key("en-anger-1", 3) == "en-anger-1.trial3"
    assert sample_of("en-anger-1.trial3", 3) == "en-anger-1"
    assert sample_of("en-anger-1", None) == "en-anger-1"
    assert sample_of("x.trial2", 1) == "x.trial2"  # a sample id that merely looks like a trial


async def test_more_trials_extend_a_finished_run(tmp_path: Path) -> None:
    bench = load_benchmark(short_benchmark(tmp_path / "b", 2))
    server = await start_server(behaviour_factory("echo", hangover_s=0.25))
    profile = ModelProfile(name="local", protocol="pcm-ws", url=server.url)
    try:
        once = await execute_run(bench, profile, options(tmp_path, concurrency=4))
        thrice = await execute_run(bench, profile, options(tmp_path, concurrency=6, trials=3))
    finally:
        await server.aclose()
    assert [r.sample_id for r in once] == ["s0", "s1"] and all(r.trial is None for r in once)
    assert [r.sample_id for r in thrice] == keys(2, 3)
    first = {r.sample_id: r.finished_at for r in once}
    assert all(r.finished_at == first[r.sample_id] for r in thrice if r.sample_id in first)
    assert {(r.sample, r.trial or 1) for r in thrice} == {
        (f"s{i}", t) for i in range(2) for t in (1, 2, 3)
    }
    bundle = tmp_path / "runs" / "t" / "sessions" / "s1.trial3"
    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["trial"] == 3 and meta["sample"]["id"] == "s1"
    jobs, problems = collect_clips(tmp_path / "runs" / "t")
    assert not problems
    assert sorted(j.key for j in jobs) == sorted(
        [f"reply/{k}" for k in keys(2, 3)] + ["reference/s0", "reference/s1"]
    )  # the trials share one reference


async def test_trial_key_that_is_a_sample_id_is_refused(tmp_path: Path) -> None:
    root = short_benchmark(tmp_path / "b", 2)
    manifest = root / "manifest.jsonl"
    lines = [json.loads(x) for x in manifest.read_text().splitlines()]
    lines[1]["id"] = "s0.trial2"
    manifest.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    profile = ModelProfile(name="local", protocol="pcm-ws", url="ws://127.0.0.1:9")
    with pytest.raises(ConfigError, match=r"'s0\.trial2' is also a sample id"):
        await execute_run(load_benchmark(root), profile, options(tmp_path, trials=2))
    with pytest.raises(ConfigError, match="--trials"):
        options(tmp_path, trials=0)


def _count_rows(db: Path) -> int:
    try:
        with sqlite3.connect(db) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_trials_run_killed_resumes_with_every_trial_once(tmp_path: Path) -> None:
    bench = short_benchmark(tmp_path / "b", 3)
    runs = tmp_path / "runs"
    cmd = [
        sys.executable, "-m", "duplexsim", "run", "--model", "fake:echo", "--benchmark",
        str(bench), "--run-id", "k", "--runs-dir", str(runs), "--concurrency", "2",
        "--trials", "3", *FAST_ARGS,
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    db = runs / "k" / "results.sqlite"
    deadline = time.monotonic() + 90
    while _count_rows(db) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the run and its fake server, mid-way
    proc.wait()
    done_before = _count_rows(db)
    assert 3 <= done_before < 9
    result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    meta, rows = read_results(runs / "k")
    assert [r.sample_id for r in rows] == keys(3, 3)
    assert all(r.status == "ok" and r.trial is not None for r in rows)
    assert meta["run"]["trials"] == 3
    sessions = sorted(p.name for p in (runs / "k" / "sessions").iterdir())
    assert sessions == keys(3, 3)  # nothing half-written left behind
