"""Recorded runs and hand-edited results rows for the viewer and its readers."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.pcm_ws.server import start_server
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.emotions import EMOTION_NAMES, HEAD_NAMES
from duplexsim.profiles.profile import ModelProfile
from duplexsim.run.runner import RunOptions, execute_run
from duplexsim.run.store import ResultRow, RunStore, read_results
from duplexsim.runscores.cache import cache_path
from duplexsim.session import eventloop
from duplexsim.session.engine import SessionSettings
from tests.helpers.runs import SETTINGS, short_benchmark

EVIL = '</script><img src=x onerror="alert(1)">'


async def record_run(
    run_dir: Path,
    bench_dir: Path,
    sample_ids: tuple[str, ...] = (),
    *,
    behaviour: str = "echo",
    settings: SessionSettings = SETTINGS,
    server_hangover_s: float | None = 0.25,
) -> Path:
    """Stream a benchmark to a local fake model into ``run_dir``."""
    params = {} if server_hangover_s is None else {"hangover_s": server_hangover_s}
    server = await start_server(behaviour_factory(behaviour, **params))
    try:
        profile = ModelProfile(name=f"fake-{behaviour}", protocol="pcm-ws", url=server.url)
        opts = RunOptions(
            run_id=run_dir.name,
            runs_dir=run_dir.parent,
            settings=settings,
            quiet=True,
            concurrency=4,
            sample_ids=sample_ids,
        )
        await execute_run(load_benchmark(bench_dir), profile, opts)
    finally:
        await server.aclose()
    return run_dir


def put_row(run_dir: Path, sample_id: str, **values: object) -> None:
    """A result row: a failed session without a bundle unless ``values`` say otherwise."""
    fields: dict = {
        "sample_id": sample_id,
        "status": "failed",
        "end_reason": "connect",
        "error": None,
        "attempts": 3,
        "language": "en",
        "emotion": "Pride",
        **dict.fromkeys(
            ("latency_s", "onset_s", "reply_duration_s", "overlap_s", "speech_end_s"), None
        ),
        "send_p50_ms": None,
        "send_p99_ms": None,
        "send_max_ms": None,
        "bytes_sent": 0,
        "bytes_received": 0,
        "wall_s": 0.1,
        "bundle": None,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    store = RunStore(run_dir / "results.sqlite")
    try:
        store.put(ResultRow(**{**fields, **values}))
    finally:
        store.close()


def add_failed_row(run_dir: Path, sample_id: str, error: str) -> None:
    """A failed session whose bundle is gone, as after a crash or a manual clean-up."""
    put_row(run_dir, sample_id, error=error)


def write_scores(run_dir: Path, tops: dict[str, str], scorer: str = "prosody") -> None:
    """A score cache whose replies' top emotions are ``tops``; references peak at their label."""
    _, rows = read_results(run_dir)
    items = {}
    for row in rows:
        if row.status == "failed":
            continue
        ref = [0.1] * 12
        ref[EMOTION_NAMES.index(row.emotion)] = 0.9
        items[f"reference/{row.sample_id}"] = {"digest": "x", "values": ref}
        if row.sample_id in tops:
            reply = [0.2] * 12
            reply[EMOTION_NAMES.index(tops[row.sample_id])] = 0.7
            items[f"reply/{row.sample_id}"] = {"digest": "x", "values": reply}
    path = cache_path(run_dir, scorer)
    path.parent.mkdir(parents=True, exist_ok=True)
    # a version 1 cache (scorer name only): older caches still report
    data = {"version": 1, "scorer": scorer, "dimensions": HEAD_NAMES, "items": items}
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two replied sessions (s0 matches, s1 does not), a transcript with markup in it, and a
    failed session without a bundle whose id and error hold markup too."""
    root = tmp_path_factory.mktemp("view")
    run = eventloop.run(record_run(root / "runs" / "v1", short_benchmark(root / "b", 2)))
    with open(run / "sessions" / "s1" / "events.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"t": 1.5, "dir": "recv", "kind": "transcript", "text": EVIL}) + "\n")
        fh.write("not json\n")
    add_failed_row(run, 'bad"<id>', EVIL)
    write_scores(run, {"s0": "Anger", "s1": "Pride"})  # labels: s0 Anger, s1 Sadness
    return run
