"""Scoring a recorded run and writing the leaderboard, end to end on real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.pcm_ws.server import start_server
from duplexsim.core.benchmark import load_benchmark
from duplexsim.profiles.profile import ModelProfile
from duplexsim.report.data import build_report
from duplexsim.run.runner import RunOptions, execute_run
from duplexsim.runscores.score import ScoreCache, cache_path, collect_clips, cut_reply
from duplexsim.session import eventloop
from tests.helpers.paths import REPO
from tests.helpers.runs import short_benchmark
from tests.helpers.sessions import settings
from tests.helpers.timing import LENIENT

SETTINGS = settings(max_reply_s=3.0, deadline_margin_s=10.0, budget=LENIENT)


def duplexsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "duplexsim", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("scored")
    bench = load_benchmark(short_benchmark(root / "b", 3))

    async def run() -> None:
        for behaviour in ("echo", "silent"):
            server = await start_server(behaviour_factory(behaviour, hangover_s=0.25))
            try:
                profile = ModelProfile(name=f"fake-{behaviour}", protocol="pcm-ws", url=server.url)
                opts = RunOptions(
                    run_id=behaviour,
                    runs_dir=root / "runs",
                    settings=SETTINGS,
                    quiet=True,
                    concurrency=3,
                )
                await execute_run(bench, profile, opts)
            finally:
                await server.aclose()

    eventloop.run(run())
    return [root / "runs" / "echo", root / "runs" / "silent"]


def test_cut_reply_is_onset_to_offset_at_16k_and_at_most_30s():
    out = np.zeros(24000 * 40, dtype=np.float32)
    out[24000 : 24000 * 3] = 0.5  # sound from 1 s to 3 s, silence after
    clip = cut_reply(out, 24000, onset_s=1.0, duration_s=2.0)
    assert clip.size == 32000
    out[24000:] = 0.5
    assert cut_reply(out, 24000, onset_s=1.0, duration_s=35.0).size == 30 * 16000


@pytest.mark.parametrize("rate", [16000, 24000])
@pytest.mark.parametrize("name", ["ar-sadness-1", "it-confusion-1"])
def test_a_reply_is_cut_to_the_same_clip_wherever_it_falls_on_the_vad_grid(
    rate: int, name: str
) -> None:
    from duplexsim.core.audio import read_audio
    from duplexsim.core.timing import measure_reply
    from tests.helpers.paths import DEMO

    # a reply with a natural tail: where the VAD's last voiced frame falls moves with its phase
    speech = read_audio(DEMO / "audio" / f"{name}.reference.ogg", sample_rate=rate).samples
    clips = []
    for shift in range(0, rate // 100, 7):  # every phase of a 10 ms VAD frame
        out = np.zeros(speech.size + 3 * rate, dtype=np.float32)
        at = rate + shift
        out[at : at + speech.size] = speech
        t = measure_reply(out, rate, speech_end_s=0.5)
        assert t.onset_s is not None and t.duration_s is not None
        clips.append(cut_reply(out, rate, t.onset_s, t.duration_s))
    assert all(c.size == clips[0].size and np.array_equal(c, clips[0]) for c in clips)


def test_collect_clips_takes_replies_and_references(two_runs):
    echo, silent = two_runs
    jobs, problems = collect_clips(echo)
    assert sorted(j.key for j in jobs) == sorted(
        [f"reply/s{i}" for i in range(3)] + [f"reference/s{i}" for i in range(3)]
    )
    assert not problems
    jobs, _ = collect_clips(silent)
    assert sorted(j.key for j in jobs) == [f"reference/s{i}" for i in range(3)]


def test_score_is_cached_and_report_has_every_form(two_runs, tmp_path):
    first = duplexsim("score", *map(str, two_runs))
    assert first.returncode == 0, first.stderr
    assert "6 clips scored, 0 from cache" in first.stdout
    again = duplexsim("score", *map(str, two_runs))
    assert "0 clips scored, 6 from cache" in again.stdout
    cache = ScoreCache(cache_path(two_runs[0], "prosody"), "prosody")
    assert len(cache.items) == 6 and "Sadness" in cache.dimensions

    out = tmp_path / "report"
    result = duplexsim("report", *map(str, two_runs), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "NOT COMPARABLE WITH MIRRORING" in result.stdout
    names = {p.name for p in out.iterdir()}
    assert {
        "leaderboard.html",
        "leaderboard.md",
        "leaderboard.json",
        "match_by_emotion.png",
        "match_by_emotion_language.png",
    } <= names
    data = json.loads((out / "leaderboard.json").read_text())
    silent = next(r for r in data["runs"] if r["run_id"] == "silent")
    assert silent["metrics"]["match_rate"] == 0.0 and silent["metrics"]["reply_rate"] == 0.0
    assert silent["metrics"]["n"] == 3 and silent["comparable_with_mirroring"] is False
    echo = next(r for r in data["runs"] if r["run_id"] == "echo")
    assert echo["metrics"]["reply_rate"] == 1.0 and echo["timing"]["replied"] == 3
    html = (out / "leaderboard.html").read_text()
    assert "NOT COMPARABLE WITH MIRRORING" in html and "data:image/png;base64," in html
    assert "http://" not in html and "https://" not in html  # self-contained
    assert (out / "match_by_emotion.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_metrics_match_the_cached_scores(two_runs):
    subprocess.run(
        [sys.executable, "-m", "duplexsim", "score", str(two_runs[0])],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=300,
    )
    report = build_report(two_runs[0], "prosody")
    cache = ScoreCache(cache_path(two_runs[0], "prosody"), "prosody")
    assert report.metrics.n == 3 and report.metrics.n_replied == 3
    # the reference score the report uses is the reference's own emotion column of the cached
    # scores, the references taken together as one speaker (prosody judges a voice against its
    # own register)
    from duplexsim.core.emotions import emotion_index
    from duplexsim.scoring.models.base import emotion_matrix
    from duplexsim.scoring.models.prosody import ProsodyScorer

    labels = (("s0", "Anger"), ("s1", "Sadness"), ("s2", "Pride"))
    raw = np.asarray([cache.vector(f"reference/{i}") for i, _ in labels], np.float32)
    vecs = emotion_matrix(ProsodyScorer.speaker_normalise(raw, cache.dimensions), cache.dimensions)
    refs = [vecs[k, emotion_index(e)] for k, (_, e) in enumerate(labels)]
    assert report.metrics.ref_score == pytest.approx(np.mean(refs))
    unnormalised = emotion_matrix(raw, cache.dimensions)
    assert not np.allclose(vecs, unnormalised)  # the normalisation is not a no-op here


def test_report_errors_are_clear(tmp_path, two_runs):
    result = duplexsim("report", str(tmp_path))
    assert result.returncode == 2 and "not a run directory" in result.stderr
    result = duplexsim("report", str(two_runs[0]), "--scorer", "empathic-insight-voice-small")
    assert result.returncode == 2 and "no scores from" in result.stderr
    assert "Traceback" not in result.stderr


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_score_through_the_scoring_service_equals_in_process(two_runs, tmp_path):
    """`duplexsim scoring serve` + `scoring worker` processes, then `score --endpoint`."""
    import shutil

    run = tmp_path / "echo"
    shutil.copytree(two_runs[0], run)
    shutil.rmtree(run / "scores", ignore_errors=True)
    port = _free_port()
    broker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "duplexsim",
            "scoring",
            "serve",
            "--bind",
            f"tcp://127.0.0.1:{port}",
            "--worker-bind",
            f"tcp://127.0.0.1:{_free_port()}",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    worker = None
    try:
        lines = [broker.stdout.readline(), broker.stdout.readline()]
        workers_on = lines[1].rsplit(" ", 1)[1].strip()
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "duplexsim",
                "scoring",
                "worker",
                "--connect",
                workers_on,
                "--scorer",
                "prosody",
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        # it says so once its scorer is loaded, then registers with the broker, which queues the
        # requests that come before it
        assert worker.stdout.readline().startswith("scoring worker: serving prosody")
        result = duplexsim(
            "score", str(run), "--scorer", "prosody", "--endpoint", f"tcp://127.0.0.1:{port}"
        )
        assert result.returncode == 0, result.stderr
        assert "6 clips scored" in result.stdout
    finally:
        for proc in (worker, broker):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=10)
    remote = ScoreCache(cache_path(run, "prosody"), "prosody")
    # in process (from its cache if an earlier test scored it): this test runs alone too
    assert duplexsim("score", str(two_runs[0])).returncode == 0
    local = ScoreCache(cache_path(two_runs[0], "prosody"), "prosody")
    assert remote.items.keys() == local.items.keys()
    for key, item in local.items.items():
        assert np.allclose(remote.items[key]["values"], item["values"], atol=1e-5)


def test_a_sample_out_of_n_says_why(tmp_path) -> None:
    from duplexsim.report.data import out_of_n_reason
    from duplexsim.run.store import ResultRow

    def row(
        status: str, duration: float | None, valid: bool | None, faithful: bool | None = None
    ) -> ResultRow:
        return ResultRow(
            "s", status, "end-of-turn", None, 1, "en", "Anger", 0.4, 1.0, duration, 0.0, 0.5,
            0.1, 0.2, 0.3, 1, 1, 1.0, "sessions/s", "2026-01-01T00:00:00+00:00",
            timing_valid=valid, input_faithful=faithful,
        )  # fmt: skip

    assert out_of_n_reason(row("ok", 1.2, True, True)) is None
    # precision lost, fidelity kept: in N for every emotion metric (only its latency is out)
    assert out_of_n_reason(row("ok", 1.2, False, True)) is None
    assert out_of_n_reason(row("no-reply", None, False, True)) is None
    assert out_of_n_reason(row("ok", 1.2, False, False)) == "input fidelity lost"
    assert out_of_n_reason(row("no-reply", None, False, False)) == "input fidelity lost"
    # recorded before the split: an invalid session reads as it did, out of N
    assert out_of_n_reason(row("ok", 1.2, True)) is None
    assert out_of_n_reason(row("ok", 1.2, False)) == "timing invalid"
    assert out_of_n_reason(row("no-reply", None, False)) == "timing invalid"
    assert out_of_n_reason(row("ok", 0.029, True)) == "reply too short to score"
    assert out_of_n_reason(row("no-reply", None, None)) is None  # in N as a non-match
    assert out_of_n_reason(row("failed", None, None)) is None  # counted as failed
