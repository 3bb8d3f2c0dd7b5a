"""What runs cost, end to end against the fakes: the estimate and the confirmation before a run,
``--max-cost`` stopping at the right session and the run resuming."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from duplexsim.cli import main
from duplexsim.cli.spending import check_spending, estimate_for, todo_samples
from duplexsim.clients.pcm_ws.client import PcmWsClient
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.errors import ConfigError
from duplexsim.core.prices import PriceTable
from duplexsim.profiles.profile import ModelProfile, builtin_profiles, load_profile
from duplexsim.run.costs import row_cost, run_cost, run_price
from duplexsim.run.estimate import estimate_run, learn
from duplexsim.run.fakes import FakeModelProcess
from duplexsim.run.runner import RunOptions, execute_run
from duplexsim.run.store import ResultRow, read_results
from tests.helpers.paths import DEMO
from tests.helpers.runs import FAST_ARGS, SETTINGS, short_benchmark

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


# --- against each hosted protocol's fake ------------------------------------------------------

HOSTED = {  # built-in profile -> its protocol
    "gpt-realtime": "openai-realtime",
    "grok-realtime": "xai-realtime",
    "azure-realtime": "azure-realtime",
    "azure-realtime-preview": "azure-realtime-preview",
    "azure-voice-live": "azure-voice-live",
    "qwen-omni-realtime": "qwen-omni-realtime",
    "gemini-live": "gemini-live",
    "nova-sonic": "nova-sonic",
    "hume-evi": "hume-evi",
}
# made-up prices, so every cost is known: what the profile bills, at these figures
TEST_PRICES = {
    "per_million_tokens": {"input_audio": 32.0, "input_text": 4.0, "cached_audio": 0.4,
                           "cached_text": 0.4, "output_audio": 64.0, "output_text": 16.0},
    "per_minute": {"connected": 0.05, "audio_sent": 0.01, "audio_received": 0.02},
}  # fmt: skip


def at_test_prices(name: str, url: str) -> ModelProfile:
    """The built-in profile pointed at a fake (a dry run), its price table's units at test
    figures."""
    profile = load_profile(builtin_profiles()[name])
    assert profile.price is not None
    table = profile.price.describe()
    for unit in ("per_million_tokens", "per_minute"):
        if unit in table:
            table[unit] = {k: TEST_PRICES[unit][k] for k in table[unit]}
    price = PriceTable.from_dict({**table, "date": "2026-12-01", "source": "test figures"})
    return dataclasses.replace(profile, url=url, url_overridden=True, price=price)


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")


# the fakes' turn ends a second of silence after the user's speech: time to reply in
# (and a reply the fake makes is never cut: a cut reply's per-turn report may never come)
REPLYING = dataclasses.replace(
    SETTINGS, turns=dataclasses.replace(SETTINGS.turns, reply_timeout_s=4.0, max_reply_s=8.0)
)


def run_opts(runs: Path, run_id: str, ids: tuple[str, ...] = ()) -> RunOptions:
    return RunOptions(run_id, runs, settings=REPLYING, quiet=True, sample_ids=ids, concurrency=2)


async def test_usage_is_recorded_per_protocol(tmp_path: Path, keys: None) -> None:
    bench = load_benchmark(short_benchmark(tmp_path / "b", 1))

    async def one(name: str, protocol: str) -> tuple[str, ResultRow, list[dict]]:
        async with FakeModelProcess(protocol, "echo") as fake:
            profile = at_test_prices(name, fake.url)
            (row,) = await execute_run(bench, profile, run_opts(tmp_path / "runs", name))
        events = (tmp_path / "runs" / name / "sessions" / "s0" / "events.jsonl").read_text()
        return name, row, [e for e in map(json.loads, events.splitlines()) if e["kind"] == "usage"]

    results = await asyncio.gather(*(one(n, p) for n, p in HOSTED.items()))
    for name, row, reports in results:
        assert row.status == "ok", (name, row.error)
        # measured for every session, whatever its provider says
        assert row.audio_sent_s and row.audio_sent_s >= 1.4, name
        # connected while the audio streamed in real time (the last frame is sent as it starts)
        assert row.connected_s and row.connected_s >= row.audio_sent_s - 0.05, name
        assert row.audio_received_s and row.audio_received_s > 0.3, name
        if name == "hume-evi":  # billed by the connected minute: no usage on the wire
            assert reports == [] and row.input_audio_tokens is None
            continue
        assert reports, name
        assert row.input_audio_tokens and row.output_audio_tokens, (name, row)
        # the reply is billed for what the model generated: out at the provider's rate
        rate = {"gemini-live": 32, "nova-sonic": 25}.get(name, 20)
        assert row.output_audio_tokens == pytest.approx(rate * row.audio_received_s, rel=0.25)


async def test_a_provider_at_its_rate_limit_slows_the_run_down_and_every_sample_completes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = short_benchmark(tmp_path / "b", 6)
    limit = ("--rate-limit", "2", "--rate-window", "4")
    async with FakeModelProcess("openai-realtime", "echo", *limit) as fake:
        code = await cli(
            "run", "--model", "gpt-realtime", "--url", fake.url, "--benchmark", str(bench),
            "--runs-dir", str(tmp_path / "runs"), "--run-id", "r", "--concurrency", "6",
            *FAST_ARGS,
        )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    _, rows = read_results(tmp_path / "runs" / "r")
    assert len(rows) == 6 and all(r.status == "ok" for r in rows), out
    assert all(r.attempts == 1 for r in rows)  # a refusal is not an attempt
    # 6 sessions at 2 per 4 s: the run waited at least two windows on the provider
    assert sum(r.provider_wait_s or 0.0 for r in rows) >= 4.0
    assert "waited on the provider's limits" in out
    limits = [
        e
        for r in rows
        for e in map(
            json.loads,
            (tmp_path / "runs" / "r" / r.bundle / "events.jsonl").read_text().splitlines(),
        )
        if e["kind"] == "rate_limits"
    ]
    assert {lim["source"] for lim in limits} == {"x-ratelimit headers", "rate_limits.updated"}


async def estimate_then_record(runs: Path, name: str) -> tuple[float, float]:
    """A first run of the model on two demo samples, then the estimate of a second run on two
    others (learnt from the first) and what the second recorded."""
    bench = load_benchmark(DEMO)
    async with FakeModelProcess(HOSTED[name], "echo") as fake:
        profile = at_test_prices(name, fake.url)
        await execute_run(bench, profile, run_opts(runs, f"{name}-a", FIRST_IDS))
        second = run_opts(runs, f"{name}-b", SECOND_IDS)
        estimate = estimate_for(todo_samples(bench, second), profile, second, runs)
        rows = await execute_run(bench, profile, second)
    assert estimate.cost is not None and estimate.cost.amount is not None, estimate.cost
    recorded = run_cost(rows, profile.price).total.amount
    assert recorded is not None
    return estimate.cost.amount, recorded


FIRST_IDS = ("tl-anger-1", "it-pride-1")  # the demo's shortest contexts
SECOND_IDS = ("ar-disappointment-1", "hi-elation-1")


async def test_the_estimate_is_within_10_percent_of_the_recorded_cost(
    tmp_path: Path, keys: None
) -> None:
    expected, recorded = await estimate_then_record(tmp_path / "runs", "gpt-realtime")
    assert expected == pytest.approx(recorded, rel=0.10)


@pytest.mark.slow
async def test_the_estimate_is_within_10_percent_against_every_hosted_fake(
    tmp_path: Path, keys: None
) -> None:
    runs = tmp_path / "runs"
    figures = await asyncio.gather(*(estimate_then_record(runs, n) for n in HOSTED))
    for name, (expected, recorded) in zip(HOSTED, figures, strict=True):
        assert expected == pytest.approx(recorded, rel=0.10), name
