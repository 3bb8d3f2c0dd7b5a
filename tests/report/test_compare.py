"""Which run is better: ``duplexsim compare`` and the report's paired comparisons, rank bands,
repeated trials and minimum detectable difference, on real runs of the reference models."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.pcm_ws.server import start_server
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.turns import TurnSettings
from duplexsim.profiles.profile import ModelProfile
from duplexsim.report.data import build_report
from duplexsim.run.runner import RunOptions, execute_run
from duplexsim.scoring.power import detectable
from duplexsim.session import eventloop
from duplexsim.session.engine import SessionSettings
from tests.helpers.paths import DEMO, REPO
from tests.helpers.runs import SETTINGS, short_benchmark, short_demo

DEMO_MODELS = ("echo", "neutral", "silent")
# the echo model replays the last 3 s of the turn: a reply up to 4 s is kept whole, and one that
# starts late on a loaded machine is still a reply
DEMO_SETTINGS = dataclasses.replace(
    SETTINGS, turns=TurnSettings(hangover_s=0.5, max_reply_s=4.0, reply_timeout_s=2.0)
)


def duplexsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "duplexsim", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def run_models(
    bench_dir: Path,
    runs: Path,
    models: tuple[str, ...],
    *,
    trials: int = 1,
    settings: SessionSettings = SETTINGS,
) -> None:
    """The reference models on loopback servers, all runs at once, every session concurrent."""
    bench = load_benchmark(bench_dir)

    async def one(behaviour: str) -> None:
        server = await start_server(behaviour_factory(behaviour, hangover_s=0.25))
        try:
            profile = ModelProfile(name=f"fake-{behaviour}", protocol="pcm-ws", url=server.url)
            opts = RunOptions(
                run_id=behaviour,
                runs_dir=runs,
                settings=settings,
                quiet=True,
                concurrency=len(bench) * trials,
                admission=False,
                trials=trials,
            )
            await execute_run(bench, profile, opts)
        finally:
            await server.aclose()

    async def every() -> None:
        await asyncio.gather(*(one(m) for m in models))

    eventloop.run(every())
    scored = duplexsim("score", *(str(runs / m) for m in models), "--scorer", "prosody")
    # a reply cut under 50 ms has no score: out of N ("reply too short to score"), not a failure
    assert scored.returncode in (0, 1) and "Traceback" not in scored.stderr, scored.stderr


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The demo's 60 samples, each context cut to its last 3 s (what the echo model replays of
    the whole one), against echo, neutral and silent: every session at once, about 10 s of real
    time on a quiet machine."""
    root = tmp_path_factory.mktemp("demo")
    bench = short_demo(root / "bench", context_s=3.0)
    run_models(bench, root / "runs", DEMO_MODELS, settings=DEMO_SETTINGS)
    return [root / "runs" / m for m in DEMO_MODELS]


def test_demo_models_compared(demo_runs: list[Path], tmp_path: Path) -> None:
    """Echo mirrors the speaker (it replays the end of the turn), so it matches far above the
    others and heads band 1 alone; neutral answers every turn with one clip, at chance; silent
    never matches. Neutral and silent are banded below echo, silent never above neutral."""
    out = duplexsim("compare", *map(str, demo_runs), "--json", str(tmp_path / "c.json"))
    assert out.returncode == 0, out.stderr
    print(out.stdout)
    data = json.loads((tmp_path / "c.json").read_text())
    bands = data["bands"]
    assert bands["echo"] == 1 and bands["neutral"] == 2 and bands["silent"] >= bands["neutral"]
    pairs = {(p["a"], p["b"]): p for p in data["comparisons"]["pairs"]}
    echo_neutral = pairs[("echo", "neutral")]
    assert echo_neutral["match"]["difference"]["low"] > 0
    assert echo_neutral["p_holm"]["match"] <= 0.05
    assert echo_neutral["clusters"] == "unclustered (each source_id holds one sample)"
    assert echo_neutral["match"]["difference"]["test"] == "McNemar exact"
    assert pairs[("echo", "silent")]["match"]["c"] == 0  # silent never matches
    assert "band 1: echo, the best match rate" in out.stdout
    assert "band 2: neutral, below echo: echo - neutral" in out.stdout
    neutral = build_report(demo_runs[1], "prosody")
    lift = neutral.metrics.ci["lift_pp"]
    assert lift.low <= 0 <= lift.high  # neutral is at chance
    assert data["detectable"]["echo"]["n"] >= 55  # a reply or two may be too short to score


def test_compare_numbers_agree_with_the_report(demo_runs: list[Path], tmp_path: Path) -> None:
    report = duplexsim("report", *map(str, demo_runs), "--out", str(tmp_path / "r"))
    assert report.returncode == 0, report.stderr
    data = json.loads((tmp_path / "r" / "leaderboard.json").read_text())
    group = data["groups"][0]
    assert group["bands"]["echo"] == 1 and len(group["comparisons"]["pairs"]) == 3
    runs = {r["run_id"]: r["metrics"] for r in data["runs"]}
    for pair in group["comparisons"]["pairs"]:
        m = pair["match"]
        if runs[pair["a"]]["n"] == pair["n"] == runs[pair["b"]]["n"]:
            assert m["rate_a"] == pytest.approx(runs[pair["a"]]["match_rate"])
            assert m["rate_b"] == pytest.approx(runs[pair["b"]]["match_rate"])
    assert set(group["detectable"]) == set(DEMO_MODELS)
    head = report.stdout.splitlines()
    assert any(line.startswith("#  band") for line in head)
    assert "paired match rate, A minus B:" in report.stdout
    markdown = (tmp_path / "r" / "leaderboard.md").read_text()
    assert "| # | band | model |" in markdown and "### Paired match rate" in markdown
    html = (tmp_path / "r" / "leaderboard.html").read_text()
    assert "runs in one band cannot be told apart" in html and "<th>band</th>" in html
    assert "minimum detectable difference" in html


def test_compare_refuses_runs_it_cannot_pair(demo_runs: list[Path], tmp_path: Path) -> None:
    one = duplexsim("compare", str(demo_runs[0]))
    assert one.returncode == 2 and "two or more runs" in one.stderr
    bad = duplexsim("compare", str(demo_runs[0]), str(tmp_path))
    assert bad.returncode == 2 and "not a run directory" in bad.stderr
    assert "Traceback" not in one.stderr + bad.stderr


@pytest.fixture(scope="module")
def trial_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Echo and neutral, each sample three times, on a benchmark of recordings of two samples."""
    root = tmp_path_factory.mktemp("trials")
    bench = short_benchmark(root / "bench", 4)
    manifest = bench / "manifest.jsonl"
    lines = [json.loads(x) for x in manifest.read_text().splitlines()]
    for i, line in enumerate(lines):
        line["source_id"] = f"call{i // 2}"
    manifest.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    run_models(bench, root / "runs", ("echo", "neutral"), trials=3)  # 24 sessions at once
    return [root / "runs" / "echo", root / "runs" / "neutral"]


def test_trials_in_the_report_and_the_comparison(trial_runs: list[Path], tmp_path: Path) -> None:
    echo = build_report(trial_runs[0], "prosody")
    assert echo.metrics.trials == 3 and echo.metrics.n == 4
    assert echo.agreement is not None and echo.agreement.trials == 3 and echo.agreement.items == 4
    assert len(echo.agreement.trial_rates) == 3
    assert echo.items is not None and echo.items.tops.shape == (4, 3)
    out = duplexsim("compare", *map(str, trial_runs), "--json", str(tmp_path / "c.json"))
    assert out.returncode == 0, out.stderr
    assert "repeated trials: how much a rerun moves the run:" in out.stdout
    (pair,) = json.loads((tmp_path / "c.json").read_text())["comparisons"]["pairs"]
    assert pair["trials"] == [3, 3]
    assert pair["clusters"] == "clustered by source_id (2 clusters)"
    assert pair["match"]["difference"]["test"].startswith("cluster exact sign-flip")
    per_item = echo.items.tops == echo.items.refs[:, None]
    assert pair["match"]["rate_a"] == pytest.approx(per_item.mean())


def test_benchmark_check_prints_the_detectable_difference(tmp_path: Path) -> None:
    out = duplexsim("benchmark", "check", str(DEMO), "--quick", "--models", "3")
    assert out.returncode == 0, out.stderr
    expected = detectable(np.ones(60, dtype=int), 0.25, 0.0, models=3)
    assert f"minimum detectable difference in match rate: {expected.delta_pp:.1f} pp" in out.stdout
    assert "alpha 0.0167 (3 models, 3 pairs, Holm)" in out.stdout
    bench = short_benchmark(tmp_path / "b", 6)
    manifest = bench / "manifest.jsonl"
    lines = [json.loads(x) for x in manifest.read_text().splitlines()]
    for i, line in enumerate(lines):
        line["source_id"] = f"call{i // 3}"
    manifest.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    out = duplexsim("benchmark", "check", str(bench), "--assume-icc", "0.5", "--assume-rate", "0.4")
    assert out.returncode == 0, out.stderr
    clustered = detectable(np.array([3, 3]), 0.4, 0.5)
    assert f"design effect {clustered.design_effect:.2f}" in out.stdout
    assert "clustered by source_id (2 clusters)" in out.stdout
    bad = duplexsim("benchmark", "check", str(bench), "--assume-rate", "1.5")
    assert bad.returncode == 2 and "--assume-rate must be between 0 and 1" in bad.stderr
