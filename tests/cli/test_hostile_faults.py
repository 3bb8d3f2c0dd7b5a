"""Faults of the machine and of peers: a full or read-only disk, a scoring broker that is not
there, odd run names, killed builds. Each ends in one line, a non-zero exit, nothing lost."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from duplexsim.cli import main
from duplexsim.core.audio import write_audio
from duplexsim.core.errors import StorageError
from duplexsim.corpus import builder
from duplexsim.report.plots import emotion_bars
from tests.helpers.paths import REPO
from tests.helpers.runs import short_benchmark

FAST = ("--hangover", "0.4", "--reply-timeout", "2", "--max-reply", "4", "--quiet")


def duplexsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "duplexsim", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )


def one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("duplexsim: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tiny tmpfs at ``path``; the test is skipped where this machine cannot mount one."""
    path.mkdir(parents=True, exist_ok=True)
    if not _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)):
        pytest.skip("cannot mount a tmpfs here (needs root); the injected faults still run")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """``path`` bind-mounted read-only over itself."""
    if not (_mount("--bind", str(path), str(path)) and _mount("-o", "remount,bind,ro", str(path))):
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
        pytest.skip("cannot bind-mount read-only here (needs root); the injected faults still run")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def recorded_run(tmp_path: Path, run_id: str = "r", n: int = 2) -> Path:
    bench = short_benchmark(tmp_path / "bench", n)
    runs = tmp_path / "runs"
    result = duplexsim(
        "run", "--model", "fake:echo", "--benchmark", str(bench), "--runs-dir", str(runs),
        "--run-id", run_id, *FAST,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return runs / run_id


def rows(run: Path) -> list[tuple[str, str]]:
    with contextlib.closing(sqlite3.connect(run / "results.sqlite")) as db:
        return sorted(db.execute("SELECT sample_id, status FROM results"))


# --- case 6: a full disk during a run or a build ------------------------------------------------


def test_a_full_disk_ends_a_run_in_one_line_and_the_resume_completes(tmp_path: Path) -> None:
    bench = short_benchmark(tmp_path / "bench", 3)
    with tmpfs(tmp_path / "tiny", "400k") as tiny:
        args = ("run", "--model", "fake:echo", "--benchmark", str(bench), "--runs-dir", str(tiny))
        result = duplexsim(*args, "--run-id", "full", "--concurrency", "1", *FAST)
        one_line_error(result, str(tiny / "full"), "No space left on device")
        assert all(status == "ok" for _, status in rows(tiny / "full"))  # what is kept is whole
        subprocess.run(["mount", "-o", "remount,size=20m", str(tiny)], check=True)
        again = duplexsim(*args, "--run-id", "full", *FAST)
        assert again.returncode == 0, again.stderr
        assert [s for _, s in rows(tiny / "full")] == ["ok"] * 3


def test_a_full_disk_ends_a_build_in_one_line_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers.corpus import FACTORY, corpus

    listing = corpus(tmp_path / "calls")
    with tmpfs(tmp_path / "tiny", "120k") as tiny:
        out = tiny / "bench"
        argv = ["benchmark", "build", str(listing), "--out", str(out), "--quiet", *FACTORY]
        assert main([*argv, "--audio-format", "wav"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "No space left on device" in err and str(tiny) in err
        assert list(tiny.iterdir()) == []  # neither a half benchmark nor its temporary folder


def test_audio_on_a_full_disk_names_the_file_injected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every audio file (a run's bundles, a benchmark build's clips) is written through here
    def full(path: Path, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("pathlib.Path.write_bytes", full)
    with pytest.raises(StorageError, match=r"x\.wav: cannot write \(No space left on device\)"):
        write_audio(tmp_path / "x.wav", np.zeros(1600, np.float32), 16000)
    assert not list(tmp_path.iterdir())  # no temporary left behind


# --- case 7: a read-only run folder for score and view ----------------------------------------


@pytest.mark.parametrize("command", ["score", "view"])
def test_a_read_only_run_folder_is_one_line(tmp_path: Path, command: str) -> None:
    run = recorded_run(tmp_path)
    with read_only(run):
        one_line_error(duplexsim(command, str(run)), str(run), "Read-only file system")


@pytest.mark.parametrize("command", ["score", "view"])
def test_an_unwritable_run_folder_is_one_line_injected(
    tmp_path: Path,
    command: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = recorded_run(tmp_path)

    def refuse(target: Path) -> Path:
        raise StorageError(target, OSError(errno.EROFS, "Read-only file system"))

    monkeypatch.setattr("duplexsim.core.files.temp_beside", refuse)
    assert main([command, str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Read-only file system" in err and str(run) in err


# --- case 8: score --endpoint with no broker; a partly scored run --------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_score_with_no_broker_fails_fast_and_non_zero(tmp_path: Path) -> None:
    run = recorded_run(tmp_path)
    started = time.monotonic()
    result = duplexsim("score", str(run), "--endpoint", f"tcp://127.0.0.1:{free_port()}")
    one_line_error(result, "no scoring broker answers")
    assert time.monotonic() - started < 30
    assert not (run / "scores").exists() or not any((run / "scores").iterdir())


def test_a_partly_scored_run_exits_non_zero(tmp_path: Path) -> None:
    run = recorded_run(tmp_path)
    (run / "sessions" / "s1" / "output.wav").unlink()
    result = duplexsim("score", str(run))
    assert result.returncode == 1, result
    assert "1 clip(s) left unscored" in result.stderr and "1 unscored" in result.stdout


# --- case 11: a run id with $...$ ----------------------------------------------------------------


def test_a_run_id_with_dollars_plots_as_written(tmp_path: Path) -> None:
    from duplexsim.report.data import build_report

    run = recorded_run(tmp_path)
    assert main(["score", str(run)]) == 0
    # runs named before run ids were checked: not valid math text, matplotlib raised on it
    from duplexsim.report.groups import group_reports

    report = dataclasses.replace(build_report(run, None, seed=0), run_id="run$_$1", model="m$_$")
    (group,) = group_reports([report])
    assert emotion_bars(group, tmp_path / "bars.png").stat().st_size > 0


# --- case 12: leftovers of a killed build --------------------------------------------------------


def test_the_next_build_removes_what_killed_builds_left(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True
    )
    dead_pid = int(dead.stdout)
    leftovers = [
        tmp_path / f".bench.building-{dead_pid}-abcd1234",  # a killed build
        tmp_path / ".bench.building-k1ll3d_x",  # an older build's name, without a pid
        tmp_path / ".bench.old-1234abcd",  # replaced, not yet removed
    ]
    running = tmp_path / f".bench.building-{os.getpid()}-live0000"
    others = [tmp_path / ".other.building-1-x", tmp_path / "bench2"]
    for folder in [*leftovers, running, *others]:
        (folder / "audio").mkdir(parents=True)
    assert builder.remove_leftovers(out) == 3
    assert not any(p.exists() for p in leftovers)
    assert running.exists() and all(p.exists() for p in others)
    shutil.rmtree(running)


def test_a_finished_run_holds_no_lock(tmp_path: Path) -> None:
    run = recorded_run(tmp_path)
    assert (run / ".writer.lock").read_text() == ""  # the file stays; the lock went with the run
    again = duplexsim(
        "run", "--model", "fake:echo", "--benchmark", str(tmp_path / "bench"),
        "--runs-dir", str(tmp_path / "runs"), "--run-id", "r", *FAST,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
