from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from duplexsim.session import eventloop
from tests.helpers.signals import voiced_signal, write_wav


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """Async tests run on the loop every paced command runs on: its timers wake to the
    microsecond and it records its stalls (a session on another loop cannot vouch for its
    latency)."""
    return {"duplexsim": eventloop.new_event_loop}


@pytest.fixture
def make_benchmark(tmp_path: Path) -> Callable[..., Path]:
    """Writes a small valid benchmark; ``lines`` override or replace the manifest lines."""

    def make(lines: list[object] | None = None, *, n: int = 2) -> Path:
        root = tmp_path / "bench"
        for i in range(n):
            write_wav(root / "audio" / f"s{i}.context.wav", voiced_signal(1.0))
            write_wav(root / "audio" / f"s{i}.reference.wav", voiced_signal(0.5, f0=200.0))
        if lines is None:
            lines = [
                {
                    "id": f"s{i}",
                    "language": "en",
                    "emotion": "Amusement",
                    "context": f"audio/s{i}.context.wav",
                    "reference": f"audio/s{i}.reference.wav",
                }
                for i in range(n)
            ]
        text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
        (root / "manifest.jsonl").write_text(text + "\n", encoding="utf-8")
        return root

    return make


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Benchmark reference caches of the whole session (module fixtures) stay out of ~/.cache."""
    import os

    os.environ["DUPLEXSIM_CACHE"] = str(tmp_path_factory.mktemp("duplexsim-cache"))


@pytest.fixture(autouse=True)
def _test_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no benchmark reference cache of its own (counts do not depend on
    which tests ran before)."""
    monkeypatch.setenv("DUPLEXSIM_CACHE", str(tmp_path_factory.mktemp("cache")))
