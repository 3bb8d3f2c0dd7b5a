"""Names and paths from outside stay where they belong; one writer per run id."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from duplexsim.cli import main
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.errors import BenchmarkError, ConfigError
from duplexsim.core.names import check_name, is_name
from duplexsim.profiles.profile import load_profile
from duplexsim.run.runlock import run_lock
from duplexsim.run.runner import RunOptions
from tests.helpers.paths import REPO
from tests.helpers.waits import wait_until

GOOD = {
    "id": "s0",
    "language": "en",
    "emotion": "Amusement",
    "context": "audio/s0.context.wav",
    "reference": "audio/s0.reference.wav",
}


# --- case 10: names that become paths ----------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["../../x", "/tmp/x", "a/b", "x\n", ".hidden", "..", "", "a" * 129, "a\x00b", "é"]
)
def test_unsafe_names_are_refused(name: str, tmp_path: Path) -> None:
    assert not is_name(name)
    with pytest.raises(ConfigError, match="cannot be a folder name"):
        RunOptions(name, tmp_path)


@pytest.mark.parametrize("name", ["run-1", "gpt.realtime_2", "A" * 128])
def test_safe_names_pass(name: str, tmp_path: Path) -> None:
    assert check_name(name, "run id") == name
    assert RunOptions(name, tmp_path).run_dir == tmp_path / name


def test_run_id_escaping_the_runs_dir_is_one_line_and_non_zero(
    tmp_path: Path, make_benchmark: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_benchmark()
    runs = tmp_path / "runs"
    argv = ["run", "--model", "fake:echo", "--benchmark", str(root), "--runs-dir", str(runs)]
    assert main([*argv, "--run-id", "../../escaped"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "run id '../../escaped'" in err
    assert not (tmp_path / "escaped").exists() and not (runs.parent.parent / "escaped").exists()


def test_profile_name_must_be_a_safe_name(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('name = "../../x"\nprotocol = "pcm-ws"\nurl = "ws://h"\n')
    with pytest.raises(ConfigError, match="field 'name'"):
        load_profile(path)


def test_sample_id_with_a_trailing_newline_is_refused(
    make_benchmark: Callable[..., Path],
) -> None:
    root = make_benchmark([GOOD | {"id": "s0\n"}])
    with pytest.raises(BenchmarkError, match="field 'id': invalid value"):
        load_benchmark(root)


@pytest.mark.parametrize("kind", ["absolute", "parent", "symlink"])
def test_audio_outside_the_benchmark_needs_permission(
    kind: str, tmp_path: Path, make_benchmark: Callable[..., Path]
) -> None:
    root = make_benchmark()
    outside = tmp_path / "elsewhere.wav"
    outside.write_bytes((root / "audio" / "s1.context.wav").read_bytes())
    if kind == "absolute":
        context = str(outside)
    elif kind == "parent":
        context = "../elsewhere.wav"
    else:
        (root / "audio" / "link.wav").symlink_to(outside)
        context = "audio/link.wav"
    (root / "manifest.jsonl").write_text(json.dumps(GOOD | {"context": context}) + "\n")
    with pytest.raises(BenchmarkError, match="leads outside the benchmark folder"):
        load_benchmark(root)
    assert load_benchmark(root, allow_outside=True).samples[0].context == outside.resolve()


def test_check_takes_allow_outside_paths(
    tmp_path: Path, make_benchmark: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_benchmark()
    outside = tmp_path / "elsewhere.wav"
    outside.write_bytes((root / "audio" / "s1.context.wav").read_bytes())
    (root / "manifest.jsonl").write_text(json.dumps(GOOD | {"context": str(outside)}) + "\n")
    assert main(["benchmark", "check", str(root)]) == 2
    assert "--allow-outside-paths" in capsys.readouterr().err
    assert main(["benchmark", "check", "--allow-outside-paths", str(root)]) == 0


# --- case 13: one writer per run id ------------------------------------------------------------


def test_a_second_writer_of_a_run_is_refused(tmp_path: Path) -> None:
    with run_lock(tmp_path, "r", None):
        with (
            pytest.raises(ConfigError, match=f"written by another process \\(pid {os.getpid()}\\)"),
            run_lock(tmp_path, "r", None),
        ):
            pass
        with pytest.raises(ConfigError), run_lock(tmp_path, "r", (0, 2)):
            pass
    with run_lock(tmp_path, "r", None):  # released
        pass


def test_shards_of_one_run_run_side_by_side_but_not_twice(tmp_path: Path) -> None:
    with run_lock(tmp_path, "r", (0, 2)), run_lock(tmp_path, "r", (1, 2)):
        with pytest.raises(ConfigError, match="pid"), run_lock(tmp_path, "r", (1, 2)):
            pass
        with pytest.raises(ConfigError, match="shards"), run_lock(tmp_path, "r", None):
            pass


def lock_free(folder: Path) -> bool:
    try:
        with run_lock(folder, "r", None):
            return True
    except ConfigError:
        return False


def test_the_lock_dies_with_its_process(tmp_path: Path) -> None:
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from duplexsim.run.runlock import run_lock\n"
        "with run_lock(Path(sys.argv[1]), 'r', None):\n"
        "    print('locked', flush=True)\n"
        "    time.sleep(60)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, env=env
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"locked"
        with pytest.raises(ConfigError, match=f"pid {child.pid}"), run_lock(tmp_path, "r", None):
            pass
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        wait_until(lambda: lock_free(tmp_path), timeout_s=5, what="the dead process's lock")
    finally:
        child.kill()
        child.wait(10)


@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_a_second_run_on_the_same_run_id_is_refused_at_once(
    tmp_path: Path,
    make_benchmark: Callable[..., Path],
    capsys: pytest.CaptureFixture[str],
    sigint: str,
) -> None:
    # "ignored": the first run is a script's background job, which starts with SIGINT ignored;
    # the SIGTERM that ends it below must still end it
    bench = make_benchmark(n=4)
    argv = [
        "run", "--model", "fake:silent", "--benchmark", str(bench),
        "--runs-dir", str(tmp_path / "runs"), "--run-id", "same", "--quiet",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = subprocess.Popen(
        [sys.executable, "-m", "duplexsim", *argv, "--concurrency", "1"],
        env=env,
        stderr=subprocess.DEVNULL,
        preexec_fn=_ignore_sigint if sigint == "ignored" else None,
    )
    try:
        lock = tmp_path / "runs" / "same" / ".writer.lock"

        def locked() -> bool:
            assert first.poll() is None, "the first run ended before it was seen writing"
            return lock.exists() and bool(lock.read_text().strip())

        wait_until(locked, timeout_s=30, what="the first run's lock")
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"run 'same' is being written by another process (pid {first.pid})" in err
    finally:
        first.send_signal(signal.SIGTERM)
        try:
            first.wait(30)  # its 4 sessions would take longer: it stopped
        except subprocess.TimeoutExpired:
            first.kill()
            first.wait()
            raise


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
