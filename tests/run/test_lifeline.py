"""Children end with their run, whatever signal ends it (case: no orphans)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.paths import REPO as ROOT


def group_members(pgid: int) -> list[tuple[int, str]]:
    """Live processes of process group ``pgid`` (pid, command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdecimal():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z" and int(fields[2]) == pgid:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                found.append((int(entry.name), cmd))
        except (OSError, ValueError, IndexError):
            continue
    return found


def wait_for(condition: Callable[[], bool], timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_no_child_outlives_a_killed_run(
    sig: signal.Signals, tmp_path: Path, make_benchmark: Callable[..., Path]
) -> None:
    bench = make_benchmark(n=6)
    cmd = [
        sys.executable, "-m", "duplexsim", "run", "--model", "fake:silent",
        "--benchmark", str(bench), "--runs-dir", str(tmp_path / "runs"), "--run-id", "kill",
        "--concurrency", "2", "--quiet",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True, stderr=subprocess.PIPE)
    pgid = run.pid
    try:
        # the fake model, the forkserver, a pool worker and the resource tracker all started
        kinds = ("serve-model", "forkserver", "resource_tracker")
        started = wait_for(
            lambda: (
                all(any(k in c for _, c in group_members(pgid)) for k in kinds)
                and len(group_members(pgid)) >= 5
            ),
            30,
        )
        assert started, group_members(pgid)
        os.kill(run.pid, sig)
        run.wait(30)
        assert wait_for(lambda: not group_members(pgid), 10), group_members(pgid)
        if sig == signal.SIGTERM:  # handled as Ctrl-C: a clean stop, said in one line
            assert run.returncode == 130
            assert run.stderr is not None and b"interrupted" in run.stderr.read()
    finally:
        for pid, _ in group_members(pgid):
            os.kill(pid, signal.SIGKILL)
        if run.poll() is None:
            run.kill()
            run.wait(10)
