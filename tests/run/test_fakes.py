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
