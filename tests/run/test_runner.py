"""Runs: concurrency, retries, resume after SIGKILL, recordings, replay, secrets never written."""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import soundfile as sf

from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.pcm_ws.server import start_server
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.errors import ConfigError
from duplexsim.core.retry import RetryPolicy
from duplexsim.core.timing import TimingBudget
from duplexsim.profiles.profile import ModelProfile
from duplexsim.replay.sessions import replay_run
from duplexsim.run.runner import RunOptions, execute_run, realtime_tuning, worker_pool
from duplexsim.run.store import read_results
from tests.helpers.paths import REPO
from tests.helpers.runs import FAST_ARGS, SETTINGS, short_benchmark
from tests.helpers.timing import assert_latency


def options(tmp_path: Path, run_id: str = "r1", **kw) -> RunOptions:
    kw.setdefault("settings", SETTINGS)
    return RunOptions(run_id=run_id, runs_dir=tmp_path / "runs", quiet=True, **kw)


async def test_run_records_every_session_and_resumes_without_rework(tmp_path):
    bench = load_benchmark(short_benchmark(tmp_path / "b", 4))
    server = await start_server(behaviour_factory("delayed-echo", latency_s=0.4, hangover_s=0.25))
    profile = ModelProfile(name="local", protocol="pcm-ws", url=server.url)
    leftover = tmp_path / "runs" / "r1" / "sessions" / ".s2.k1ll3d_x"  # of a killed run
    leftover.mkdir(parents=True)
    (leftover / "input.wav").write_bytes(b"RIFF")
    try:
        rows = await execute_run(bench, profile, options(tmp_path, concurrency=4))
        again = await execute_run(bench, profile, options(tmp_path, concurrency=4))
    finally:
        await server.aclose()
    assert [r.sample_id for r in rows] == ["s0", "s1", "s2", "s3"]
    assert all(r.status == "ok" and r.attempts == 1 for r in rows)
    for r in rows:
        assert_latency(r, 0.4, 0.08)
    assert [r.finished_at for r in again] == [r.finished_at for r in rows]  # nothing redone
    pace = read_results(tmp_path / "runs" / "r1")[0]["pace"]  # how its sessions were paced
    assert pace["window"] >= 4 and pace["capacity"] >= 1 and 0.0 < pace["mean_in_flight"] <= 4
    sessions = tmp_path / "runs" / "r1" / "sessions"
    assert sorted(p.name for p in sessions.iterdir()) == ["s0", "s1", "s2", "s3"]
    bundle = sessions / "s0"
    names = {p.name for p in bundle.iterdir()}
    assert names == {"input.wav", "output.wav", "stereo.wav", "events.jsonl", "meta.json"}
    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["bundle_version"] == 2 and meta["kind"] == "benchmark"
    assert meta["settings"]["frame_ms"] is None
    start = json.loads((bundle / "events.jsonl").read_text().splitlines()[0])
    assert start["kind"] == "start" and start["frame_ms"] == 20
    assert meta["settings"]["vad"]["kind"] == "webrtc" and "numpy" in meta["packages"]
    inp, out, stereo = (sf.info(bundle / f) for f in ("input.wav", "output.wav", "stereo.wav"))
    assert out.frames >= inp.frames and stereo.channels == 2
    results = await replay_run(tmp_path / "runs" / "r1", [], concurrency=4)
    assert len(results) == 4
    assert all(r.agrees(5.0) for r in results), [(r.recorded, r.replayed) for r in results]


async def test_rate_limit_is_retried_after_the_servers_delay(tmp_path):
    bench = load_benchmark(short_benchmark(tmp_path / "b", 1))
    faults = Faults(rate_limit_first=1, retry_after_s=0.3)
    server = await start_server(behaviour_factory("echo", hangover_s=0.25), faults=faults)
    profile = ModelProfile(name="local", protocol="pcm-ws", url=server.url)
    try:
        (row,) = await execute_run(bench, profile, options(tmp_path, retry=RetryPolicy(3)))
    finally:
        await server.aclose()
    # a refusal for the rate limits is not an attempt: the run waits the server's delay
    assert row.status == "ok" and row.attempts == 1 and row.rate_limited == 1
    assert row.provider_wait_s >= 0.3


async def test_non_retryable_failure_is_recorded_once_and_run_goes_on(tmp_path):
    bench = load_benchmark(short_benchmark(tmp_path / "b", 2))
    server = await start_server(behaviour_factory("echo"), faults=Faults(refuse_status=401))
    profile = ModelProfile(name="local", protocol="pcm-ws", url=server.url)
    try:
        rows = await execute_run(bench, profile, options(tmp_path))
    finally:
        await server.aclose()
    assert [(r.status, r.end_reason, r.attempts) for r in rows] == [("failed", "auth", 1)] * 2
    assert "401" in rows[0].error


async def test_run_id_of_another_model_is_refused(tmp_path):
    bench = load_benchmark(short_benchmark(tmp_path / "b", 1))
    server = await start_server(behaviour_factory("silent"))
    try:
        a = ModelProfile(name="a", protocol="pcm-ws", url=server.url)
        await execute_run(bench, a, options(tmp_path))
        b = ModelProfile(name="b", protocol="pcm-ws", url=server.url)
        with pytest.raises(ConfigError, match="already holds results of model 'a'"):
            await execute_run(bench, b, options(tmp_path))
    finally:
        await server.aclose()


def _count_rows(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db) as con:
            return int(con.execute("SELECT count(*) FROM results").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_run_killed_with_sigkill_resumes_with_every_sample_once(tmp_path):
    bench = short_benchmark(tmp_path / "b", 6)
    runs = tmp_path / "runs"
    cmd = [
        sys.executable,
        "-m",
        "duplexsim",
        "run",
        "--model",
        "fake:echo",
        "--benchmark",
        str(bench),
        "--run-id",
        "k",
        "--runs-dir",
        str(runs),
        "--concurrency",
        "2",
        *FAST_ARGS,
    ]
    proc = subprocess.Popen(
        cmd, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    db = runs / "k" / "results.sqlite"
    deadline = time.monotonic() + 90
    while _count_rows(db) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the run and its fake server, mid-way
    proc.wait()
    done_before = _count_rows(db)
    assert 2 <= done_before < 6
    result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    _, rows = read_results(runs / "k")
    assert sorted(r.sample_id for r in rows) == [f"s{i}" for i in range(6)]
    assert all(r.status == "ok" for r in rows)
    sessions = sorted(p.name for p in (runs / "k" / "sessions").iterdir())
    assert sessions == [f"s{i}" for i in range(6)]  # nothing half-written left behind
    for i in range(6):
        assert (runs / "k" / "sessions" / f"s{i}" / "meta.json").is_file()


def test_unwritable_run_directory_is_a_clear_error(tmp_path):
    bench = short_benchmark(tmp_path / "b", 1)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "duplexsim",
            "run",
            "--model",
            "fake:silent",
            "--benchmark",
            str(bench),
            "--runs-dir",
            str(blocker),
            "--run-id",
            "x",
            "--quiet",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("duplexsim: error: ") and "not writable" in result.stderr


def test_api_key_never_written(tmp_path):
    secret = "sk-test-RECOGNISABLE-9f8e7d6c"
    bench = short_benchmark(tmp_path / "b", 2)
    (tmp_path / "m.toml").write_text(
        'name = "keyed"\nprotocol = "pcm-ws"\nurl = "ws://127.0.0.1:9"\n'
        'api_key_env = "DUPLEXSIM_TEST_KEY"\n'
    )
    env = os.environ | {"DUPLEXSIM_TEST_KEY": secret}
    # nothing listens on port 9: every session fails to connect, and the error is recorded
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "duplexsim",
            "--debug",
            "run",
            "--model",
            str(tmp_path / "m.toml"),
            "--benchmark",
            str(bench),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--run-id",
            "s",
            "--retries",
            "0",
            *FAST_ARGS,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 1, result.stderr
    assert secret not in result.stdout + result.stderr
    files = [p for p in (tmp_path / "runs").rglob("*") if p.is_file()]
    assert any(p.name == "meta.json" for p in files)
    for path in files:
        assert secret.encode() not in path.read_bytes(), path
    # a hosted address (not loopback, where a dry run needs no key) without its key is refused
    (tmp_path / "hosted.toml").write_text(
        'name = "keyed"\nprotocol = "pcm-ws"\nurl = "wss://models.example.invalid/v1"\n'
        'api_key_env = "DUPLEXSIM_TEST_KEY"\n'
    )
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "duplexsim",
            "run",
            "--model",
            str(tmp_path / "hosted.toml"),
            "--benchmark",
            str(bench),
            "--runs-dir",
            str(tmp_path / "runs2"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in env.items() if k != "DUPLEXSIM_TEST_KEY"},
    )
    assert missing.returncode == 2
    assert "DUPLEXSIM_TEST_KEY is not set" in missing.stderr
    assert not (tmp_path / "runs2").exists()


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux scheduling policy")
def test_worker_pool_runs_only_on_idle_cpu_time():
    # bundles and decoding competing with the pacing process for a core made every session
    # of a 200-session run late by 5-20 ms at some point (bench/run_pacing.py)
    with worker_pool() as pool:
        policies = set(pool.map(os.sched_getscheduler, [0] * 4))
    assert policies == {os.SCHED_IDLE}
    assert os.sched_getscheduler(0) != os.SCHED_IDLE  # the pacing process itself is untouched


def test_realtime_tuning_is_undone_after_the_run():
    before = sys.getswitchinterval()
    with realtime_tuning():
        # the loop drops the GIL in every send: a helper thread must hand it back within 0.1 ms
        assert sys.getswitchinterval() <= 0.0001 + 1e-9
        assert gc.get_freeze_count() > 0
    assert sys.getswitchinterval() == before and gc.get_freeze_count() == 0


def test_runs_that_overlap_share_the_tuning_until_the_last_one_ends():
    before = sys.getswitchinterval()
    first, second = realtime_tuning(), realtime_tuning()
    first.__enter__()
    frozen = gc.get_freeze_count()
    second.__enter__()  # the second run to start collects nothing: the first one is pacing
    assert gc.get_freeze_count() == frozen
    first.__exit__(None, None, None)  # the first run ends; the second still paces
    assert sys.getswitchinterval() <= 0.0001 + 1e-9 and gc.get_freeze_count() == frozen
    second.__exit__(None, None, None)
    assert sys.getswitchinterval() == before and gc.get_freeze_count() == 0


# a send is never on time to the microsecond: under these budgets every session loses either
# measurement precision alone (its latency window) or input fidelity too (a frame later than 1 us)
IMPRECISE = TimingBudget(send_p99_ms=5000.0, send_max_ms=5000.0, loop_lag_max_ms=5000.0,
                         recv_lag_max_ms=5000.0, latency_ms=0.001)  # fmt: skip
UNFAITHFUL = TimingBudget(send_p99_ms=0.001, send_max_ms=0.001, loop_lag_max_ms=5000.0,
                          recv_lag_max_ms=5000.0, latency_ms=5000.0, input_late_ms=0.001)  # fmt: skip


@pytest.mark.parametrize(
    ("budget", "retry_imprecise", "attempts"),
    [(IMPRECISE, False, 1), (IMPRECISE, True, 3), (UNFAITHFUL, False, 3)],
    ids=["imprecise-kept", "imprecise-retried-when-asked", "unfaithful-retried"],
)
async def test_only_a_session_the_model_did_not_hear_as_sent_is_run_again_by_default(
    tmp_path, budget, retry_imprecise, attempts
):
    bench = load_benchmark(short_benchmark(tmp_path / "b", 1))
    server = await start_server(behaviour_factory("echo", hangover_s=0.25))
    profile = ModelProfile(name="local", protocol="pcm-ws", url=server.url)
    settings = dataclasses.replace(SETTINGS, budget=budget)
    retry = RetryPolicy(3, base_s=0.01)
    try:
        (row,) = await execute_run(
            bench,
            profile,
            options(tmp_path, settings=settings, retry=retry, retry_imprecise=retry_imprecise),
        )
    finally:
        await server.aclose()
    assert row.status == "ok" and row.attempts == attempts
    assert row.timing_valid is False and row.input_faithful is (budget is IMPRECISE)
    assert row.faithful is (budget is IMPRECISE) and not row.precise
