"""``duplexsim models check``: the hosted profiles against our fakes (``--url``), and against the
real services when asked (``-m live``, with the user's keys)."""

from __future__ import annotations

import asyncio
import os

import pytest

from duplexsim.cli import main
from duplexsim.cli.models_cmd import _configured
from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.live.models_check import check_model
from duplexsim.profiles.profile import builtin_profiles, load_profile
from duplexsim.run.fakes import FakeModelProcess


def hosted(name: str):
    return load_profile(builtin_profiles()[name])


@pytest.mark.parametrize(
    ("name", "server"),
    [
        ("gpt-realtime", "duplexsim.clients.openai_realtime.server"),
        ("gemini-live", "duplexsim.clients.gemini_live.server"),
    ],
)
async def test_check_reports_every_stage_of_a_hosted_profile_against_its_fake(
    name: str, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    profile = hosted(name)
    monkeypatch.setenv(str(profile.api_key_env), "test-key")
    start_server = importlib.import_module(server).start_server
    async with await start_server(behaviour_factory("delayed-echo", latency_s=0.5)) as fake:
        result = await check_model(profile, fake.url)
    assert result.ok, result.problem
    assert result.handshake_s is not None and 0 < result.handshake_s < 5
    assert 2.0 < result.audio_out_s < 12
    assert result.audio_back_s > 1.0 and result.end_of_turn is True
    assert result.round_trip_s is not None and 0.3 < result.round_trip_s < 2.5


async def test_check_says_what_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    from duplexsim.clients.openai_realtime.server import start_server

    profile = hosted("gpt-realtime")
    monkeypatch.setenv(str(profile.api_key_env), "test-key")
    async with await start_server(behaviour_factory("echo"), api_key="another-key") as fake:
        refused = await check_model(profile, fake.url)
    assert not refused.ok and refused.handshake_s is None
    assert "401" in str(refused.problem) and "test-key" not in str(refused.problem)
    async with await start_server(behaviour_factory("silent")) as fake:
        silent = await check_model(profile, fake.url)
    assert silent.handshake_s is not None and silent.problem == "no audio back"
    faults = Faults(close_after_s=1.0)
    async with await start_server(behaviour_factory("echo"), faults=faults) as fake:
        closed = await check_model(profile, fake.url)
    assert not closed.ok and closed.audio_out_s < 2.0


async def test_cli_checks_named_profiles_at_a_url(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    async with FakeModelProcess("openai-realtime", "echo") as fake:
        code = await asyncio.to_thread(main, ["models", "check", "gpt-realtime", "--url", fake.url])
    out = capsys.readouterr().out
    assert code == 0, out
    [row] = [line for line in out.splitlines() if line.startswith("gpt-realtime")]
    assert row.split()[-1] == "ok" and "yes" in row
    assert "sk-test" not in out


def test_cli_refuses_to_guess(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    for name in builtin_profiles():
        env = load_profile(builtin_profiles()[name]).api_key_env
        if env:
            monkeypatch.delenv(env, raising=False)
    assert main(["models", "check"]) == 2
    assert "no hosted profile has its key set" in capsys.readouterr().err
    assert main(["models", "check", "gpt-realtime"]) == 2  # its key is not set
    assert "OPENAI_API_KEY is not set" in capsys.readouterr().err


@pytest.mark.live
def test_live_hosted_profiles_pass_the_check(capsys) -> None:
    """Against the real services, for every hosted profile whose key is set (opt-in)."""
    if not _configured():
        pytest.skip("no hosted profile has its key set")
    code = main(["models", "check"])
    out = capsys.readouterr().out
    assert code == 0, out
    for profile in _configured():
        assert os.environ[str(profile.api_key_env)] not in out


async def test_check_says_what_it_cost(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """xAI bills the connected minute at a recorded price: the check costs its connected time."""
    monkeypatch.setenv("XAI_API_KEY", "xai-test")
    async with FakeModelProcess("xai-realtime", "echo") as fake:
        result = await check_model(hosted("grok-realtime"), fake.url)
        code = await asyncio.to_thread(
            main, ["models", "check", "grok-realtime", "--url", fake.url]
        )
    assert result.ok, result.problem
    connected = result.usage.connected_s
    assert connected is not None and connected >= result.audio_out_s - 0.05  # streamed in real time
    assert result.cost is not None and result.cost.amount == pytest.approx(connected / 60 * 0.05)
    out = capsys.readouterr().out
    assert code == 0, out
    [row] = [line for line in out.splitlines() if line.startswith("grok-realtime")]
    assert "0.00" in row  # a few seconds at 0.05 a minute
    assert "grok-realtime: USD per minute: connected 0.05 (as of 2026-04" in out
