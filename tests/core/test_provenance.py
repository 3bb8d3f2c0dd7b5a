"""Scores you can compare: run identity and its labels, references scored once per benchmark and
scorer identity, and a report that never ranks runs of different benchmarks or scorers together."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.pcm_ws.server import start_server
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.errors import ConfigError
from duplexsim.core.provenance import ScorerIdentity, endpoint_kind, model_label
from duplexsim.profiles.profile import ModelProfile
from duplexsim.report.data import build_report
from duplexsim.report.tables import terminal_report
from duplexsim.report.write import write_report
from duplexsim.run.runner import RunOptions, execute_run
from duplexsim.run.store import read_results
from duplexsim.runscores.cache import ScoreCache, cache_path, manifest_key
from duplexsim.runscores.score import ScoreOutcome, identify, score_run
from duplexsim.scoring.service.api import open_scoring
from duplexsim.session import eventloop
from tests.helpers.runs import SETTINGS, short_benchmark


async def _run(bench_dir: Path, runs: Path, run_id: str, behaviour: str, **profile: Any) -> Path:
    server = await start_server(behaviour_factory(behaviour, hangover_s=0.25))
    try:
        fields: dict[str, Any] = {"name": f"fake-{behaviour}", "protocol": "pcm-ws"}
        model = ModelProfile(**(fields | profile), url=server.url)
        opts = RunOptions(run_id=run_id, runs_dir=runs, settings=SETTINGS, quiet=True)
        await execute_run(load_benchmark(bench_dir), model, opts)
    finally:
        await server.aclose()
    return runs / run_id


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """On benchmark A (2 samples): a fake-backed echo run and a silent run whose profile's URL
    was overridden; on benchmark B (3 samples): an echo run at a local URL."""
    root = tmp_path_factory.mktemp("prov")
    a, b = short_benchmark(root / "a", 2), short_benchmark(root / "b", 3)

    async def make() -> dict[str, Path]:
        return {
            "echo": await _run(a, root / "runs", "echo", "echo", fake_behaviour="echo"),
            "silent": await _run(
                a, root / "runs", "silent", "silent", name="gpt-realtime", url_overridden=True
            ),
            "echo-b": await _run(b, root / "runs", "echo-b", "echo"),
        }

    return eventloop.run(make())


async def _score(
    run_dirs: Sequence[Path], scorer: str = "prosody", **kw: Any
) -> list[ScoreOutcome]:
    scoring = open_scoring(None)
    try:
        return [
            await score_run(d, scorer, lambda c: scoring.score(c, "prosody", 60), **kw)
            for d in run_dirs
        ]
    finally:
        await scoring.aclose()


def fresh(runs: dict[str, Path], tmp_path: Path, *names: str) -> list[Path]:
    """Copies of the runs without their scores."""
    out = []
    for name in names:
        shutil.copytree(runs[name], tmp_path / name)
        shutil.rmtree(tmp_path / name / "scores", ignore_errors=True)
        out.append(tmp_path / name)
    return out


def test_a_run_records_its_identity_once(runs: dict[str, Path]) -> None:
    meta, _ = read_results(runs["echo"])
    assert meta["model"]["endpoint"] == "fake"
    assert meta["benchmark"]["digest"].startswith("sha256:") and meta["benchmark"]["samples"] == 2
    assert meta["settings"]["turns"]["hangover_s"] == 0.5 and "numpy" in meta["packages"]
    other, _ = read_results(runs["echo-b"])
    assert other["benchmark"]["digest"] != meta["benchmark"]["digest"]


def test_fake_and_overridden_runs_are_labelled_in_every_output(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    dirs = fresh(runs, tmp_path, "echo", "silent")
    eventloop.run(_score(dirs))
    reports = [build_report(d, None) for d in dirs]
    assert reports[0].model == "fake-echo [fake]"
    assert reports[1].model.startswith("gpt-realtime [URL override: ws://127.0.0.1:")
    text = terminal_report(reports)
    assert "fake-echo [fake]" in text and "gpt-realtime [URL override: ws://" in text
    paths = write_report(reports, tmp_path / "report")
    for form in ("markdown", "html", "json"):
        assert "fake-echo [fake]" in paths[form].read_text()
    data = json.loads(paths["json"].read_text())
    assert data["runs"][0]["provenance"]["model"]["endpoint"] in ("fake", "override")


def test_endpoint_kinds() -> None:
    assert (
        endpoint_kind("wss://api.openai.com/v1/realtime", fake=False, overridden=False) == "hosted"
    )
    assert endpoint_kind("ws://127.0.0.1:8998", fake=False, overridden=False) == "local"
    assert endpoint_kind("ws://10.1.2.3:8998", fake=False, overridden=False) == "local"
    assert endpoint_kind("ws://127.0.0.1:1", fake=False, overridden=True) == "override"
    assert endpoint_kind(None, fake=True, overridden=False) == "fake"
    # runs from before endpoints were recorded: a fake is still flagged from fake_behaviour
    assert model_label({"name": "fake-echo", "fake_behaviour": "echo"}) == "fake-echo [fake]"
    assert model_label({"name": "moshi", "endpoint": "local"}) == "moshi"


def test_a_resumed_run_on_another_benchmark_is_refused(runs: dict[str, Path]) -> None:
    meta, _ = read_results(runs["echo-b"])
    other = Path(meta["benchmark"]["path"]).parents[1] / "a"

    with pytest.raises(ConfigError, match=r"was run on benchmark b \(sha256:"):
        eventloop.run(_run(other, runs["echo-b"].parent, "echo-b", "echo"))


def test_a_second_run_on_a_benchmark_scores_no_reference_again(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    echo, silent = fresh(runs, tmp_path, "echo", "silent")
    first, second = eventloop.run(_score([echo, silent]))
    assert (first.scored, first.references_scored, first.shared) == (4, 2, 0)
    assert (second.scored, second.references_scored, second.shared) == (0, 0, 2)
    a = ScoreCache(cache_path(echo, "prosody"), "prosody")
    b = ScoreCache(cache_path(silent, "prosody"), "prosody")
    for key in ("reference/s0", "reference/s1"):  # the run folder holds them, as scored
        assert b.emotions(key) is not None
        assert list(b.emotions(key)) == list(a.emotions(key))
    assert (
        build_report(silent, None).metrics.ref_score == build_report(echo, None).metrics.ref_score
    )
    # --rescore scores the references too
    (again,) = eventloop.run(_score([silent], rescore=True))
    assert (again.references_scored, again.shared) == (2, 0)


def test_the_manifests_reference_scores_are_used_when_their_identity_matches(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    (run,) = fresh(runs, tmp_path, "echo")
    bench = tmp_path / "bench"
    meta, _ = read_results(run)
    shutil.copytree(Path(meta["benchmark"]["path"]).parent, bench)
    identity: ScorerIdentity = eventloop.run(_identity())
    scores = {e: 1.0 + i / 10 for i, e in enumerate(_emotion_names())}
    lines = [json.loads(x) for x in (bench / "manifest.jsonl").read_text().splitlines()]
    for line in lines:  # a plain name does not say which weights or code made them
        line["reference_scores"] = {"prosody": scores, manifest_key(identity): scores}
    manifest = bench / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(x) + "\n" for x in lines))
    run = eventloop.run(_run(bench, tmp_path / "runs", "m", "echo"))
    (outcome,) = eventloop.run(_score([run]))
    assert (outcome.references_scored, outcome.shared) == (0, 2)
    assert build_report(run, None).metrics.ref_score == pytest.approx(
        (1.1 + 2.1) / 2
    )  # s0 Anger, s1 Sadness


async def _identity() -> ScorerIdentity:
    scoring = open_scoring(None)
    try:
        return await identify("prosody", lambda c: scoring.score(c, "prosody", 60))
    finally:
        await scoring.aclose()


def _emotion_names() -> list[str]:
    from duplexsim.core.emotions import EMOTION_NAMES

    return list(EMOTION_NAMES)


def test_two_benchmarks_or_two_scorers_are_never_ranked_in_one_table(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    dirs = fresh(runs, tmp_path, "echo", "silent", "echo-b")
    eventloop.run(_score(dirs))
    reports = [build_report(d, None) for d in dirs]
    text = terminal_report(reports)
    assert text.startswith("2 separate tables: these runs span 2 benchmarks,")
    assert "[1/2] benchmark a (sha256:" in text and "[2/2] benchmark b (sha256:" in text
    assert "scorer prosody (v2)" in text and len(re.findall(r"^#\s+band\s+model", text, re.M)) == 2
    assert "cosine: mean cosine similarity" in text
    paths = write_report(reports, tmp_path / "r")
    md = paths["markdown"].read_text()
    assert md.count("## benchmark ") == 2 and md.count("| # | band | model |") == 2
    assert paths["html"].read_text().count('id="leaderboard-') == 2
    data = json.loads(paths["json"].read_text())
    assert [g["runs"] for g in data["groups"]] == [["echo", "silent"], ["echo-b"]]
    assert {g["scorer"]["name"] for g in data["groups"]} == {"prosody"}
    assert all(r["benchmark"]["digest"] and r["provenance"]["packages"] for r in data["runs"])
    assert (tmp_path / "r" / "match_by_emotion-2.png").is_file()

    # the same benchmark scored by another scorer identity: a table of its own
    other = tmp_path / "other"
    shutil.copytree(dirs[1], other)
    cache = ScoreCache(cache_path(other, "prosody"), "prosody")
    cache.identity = ScorerIdentity("prosody", "rule:f0_reference_hz=120", None, "2")
    cache.save()
    text = terminal_report([build_report(dirs[0], None), build_report(other, None)])
    assert text.startswith("2 separate tables: these runs span 2 scorer identities")
    assert "scorer prosody (weights rule:f0_reference_hz=120, v2)" in text
