"""Served reference models run our installed code, whatever folder the user runs from."""

from __future__ import annotations

from pathlib import Path

import pytest

from duplexsim.run.fakes import FakeModelProcess


@pytest.mark.parametrize("shadow", ["duplexsim", "simulator", "clients"])
async def test_a_package_of_that_name_in_the_working_folder_is_not_run(
    shadow: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / shadow
    package.mkdir()
    (package / "__init__.py").write_text("raise SystemExit('the wrong package ran')\n")
    (package / "__main__.py").write_text("raise SystemExit('the wrong package ran')\n")
    monkeypatch.chdir(tmp_path)
    async with FakeModelProcess("pcm-ws", "silent") as fake:
        assert fake.url.startswith("ws://127.0.0.1:")


async def test_one_process_serves_several_behaviours_each_on_its_own_port(tmp_path: Path) -> None:
    from duplexsim.core.benchmark import load_benchmark
    from duplexsim.profiles.profile import ModelProfile
    from duplexsim.run.runner import Endpoint, RunOptions, execute_run
    from tests.helpers.runs import SETTINGS, short_benchmark

    bench = load_benchmark(short_benchmark(tmp_path / "b", 1))
    async with FakeModelProcess("pcm-ws", ["echo", "silent"], "--hangover", "0.25") as fake:
        assert set(fake.urls) == {"echo", "silent"} and fake.url == fake.urls["echo"]
        assert len(set(fake.urls.values())) == 2
        statuses = {}
        for behaviour, url in fake.urls.items():
            profile = ModelProfile(name=behaviour, protocol="pcm-ws", url=url)
            opts = RunOptions(run_id=behaviour, runs_dir=tmp_path / "runs", settings=SETTINGS)
            (row,) = await execute_run(bench, profile, opts, endpoint=Endpoint(url, fake.stalls))
            statuses[behaviour] = row.status
    assert statuses == {"echo": "ok", "silent": "no-reply"}
