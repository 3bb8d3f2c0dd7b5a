"""What runs cost, end to end against the fakes: the estimate and the confirmation before a run,
``--max-cost`` stopping at the right session and the run resuming."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import pytest

from duplexsim.cli import main
from duplexsim.cli.spending import check_spending
from duplexsim.clients.pcm_ws.client import PcmWsClient
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.errors import ConfigError
from duplexsim.profiles.profile import builtin_profiles, load_profile
from duplexsim.run.costs import row_cost, run_price
from duplexsim.run.estimate import estimate_run, learn
from duplexsim.run.fakes import FakeModelProcess
from duplexsim.run.runner import RunOptions
from duplexsim.run.store import read_results
from tests.helpers.paths import DEMO
from tests.helpers.runs import FAST_ARGS, short_benchmark

# one unit per second connected: each session's cost is its connected time, known at once
PER_SECOND = 'per_minute = { connected = 60.0 }\ncurrency = "TOK"\ndate = "2026-11-01"\n'


def priced_profile(path: Path, url: str) -> Path:
    path.write_text(f'name = "priced"\nprotocol = "pcm-ws"\nurl = "{url}"\n[price]\n{PER_SECOND}')
    return path


async def cli(*args: str) -> int:
    return await asyncio.to_thread(main, list(args))


async def test_max_cost_stops_at_the_right_session_and_the_run_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench_dir = short_benchmark(tmp_path / "b", 4)
    runs = tmp_path / "runs"
    cap = 13.0
    async with FakeModelProcess("pcm-ws", "echo") as fake:
        model = str(priced_profile(tmp_path / "priced.toml", fake.url))
        base = ["run", "--model", model, "--benchmark", str(bench_dir), "--run-id", "r",
                "--runs-dir", str(runs), "--concurrency", "1", *FAST_ARGS]  # fmt: skip
        code = await cli(*base, "--max-cost", f"{cap}")
        out = capsys.readouterr().out
        assert code == 3, out
        assert "stopped: --max-cost 13.00 TOK reached" in out
        meta, rows = read_results(runs / "r")
        price = run_price(meta)
        assert price is not None and price.date == "2026-11-01"
        # the rule, replayed on what was recorded: in order, a sample starts while what was
        # spent and what it is expected to cost stay within the cap (nothing else in flight)
        bench = load_benchmark(bench_dir)
        expected = estimate_run(bench, learn([], PcmWsClient.metering), price).per_sample
        spent, started = 0.0, []
        costs = {r.sample_id: row_cost(r, price).amount for r in rows}
        for s in bench:
            if spent + (expected[s.id].amount or 0.0) > cap:
                break
            started.append(s.id)
            spent += costs[s.id] or 0.0
        assert [r.sample_id for r in rows] == started
        assert 0 < len(started) < 4
        assert all(c is not None and c > 0 for c in costs.values())
        first = {r.sample_id: r.finished_at for r in rows}
        # resumed without a cap: the rest, once each; what was recorded stays as it was
        code = await cli(*base)
        assert code == 0, capsys.readouterr().out
    _, rows = read_results(runs / "r")
    assert [r.sample_id for r in rows] == ["s0", "s1", "s2", "s3"]
    assert all(r.status == "ok" for r in rows)
    assert {r.sample_id: r.finished_at for r in rows if r.sample_id in first} == first


async def test_max_cost_needs_known_prices(tmp_path: Path, capsys) -> None:
    bench = short_benchmark(tmp_path / "b", 1)
    code = await asyncio.to_thread(
        main,
        ["run", "--model", "ws://127.0.0.1:9/x", "--benchmark", str(bench),
         "--runs-dir", str(tmp_path / "runs"), "--max-cost", "1", *FAST_ARGS],
    )  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "--max-cost needs a known cost per session; the profile has no price table" in err
    assert len(err.strip().splitlines()) == 1


def spending_args(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**({"max_cost": None, "confirm_above": 5.0, "yes": False} | kw))


def opts(tmp_path: Path) -> RunOptions:
    return RunOptions(run_id="r", runs_dir=tmp_path / "runs")


def test_a_hosted_run_over_the_threshold_asks_and_refuses_without_a_terminal(
    tmp_path: Path, capsys
) -> None:
    grok = load_profile(builtin_profiles()["grok-realtime"])
    bench = load_benchmark(DEMO)
    with pytest.raises(ConfigError, match=r"expected to cost .* over --confirm-above .* --yes"):
        check_spending(spending_args(confirm_above=0.01), bench, grok, opts(tmp_path),
                       interactive=False)  # fmt: skip
    printed = capsys.readouterr().out
    assert "estimate for grok-realtime: 60 session(s)" in printed
    assert "prices: USD per minute: connected 0.05 (as of 2026-04" in printed
    est = check_spending(spending_args(confirm_above=0.01, yes=True), bench, grok, opts(tmp_path))
    assert est is not None and est.cost is not None and est.cost.amount is not None
    asked: list[str] = []
    yes = check_spending(spending_args(confirm_above=0.01), bench, grok, opts(tmp_path),
                         ask=lambda q: asked.append(q) or "y", interactive=True)  # fmt: skip
    assert yes is not None and asked and asked[0].startswith("spend about")
    with pytest.raises(ConfigError, match="not confirmed"):
        check_spending(spending_args(confirm_above=0.01), bench, grok, opts(tmp_path),
                       ask=lambda q: "", interactive=True)  # fmt: skip
    # under the threshold, or a local model: nothing to ask
    assert check_spending(spending_args(), bench, grok, opts(tmp_path), interactive=False)
    local = load_profile(builtin_profiles()["moshi-local"])
    assert check_spending(spending_args(confirm_above=0.0), bench, local, opts(tmp_path)) is None


async def test_cli_refuses_a_costly_hosted_run_in_one_line_and_starts_nothing(
    tmp_path: Path, capsys
) -> None:
    code = await asyncio.to_thread(
        main,
        ["run", "--model", "grok-realtime", "--benchmark", str(DEMO), "--runs-dir",
         str(tmp_path / "runs"), "--confirm-above", "0.01", *FAST_ARGS],
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.count("\n") == 1 and "pass --yes to go ahead" in captured.err
    assert not list((tmp_path / "runs").glob("*/results*.sqlite"))
