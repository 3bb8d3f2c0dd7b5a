"""``duplexsim view`` without a browser: envelopes, gathering, escaping, pages and the command."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from clients.behaviours import behaviour_factory
from clients.pcm_ws.server import start_server
from simulator.cli import main
from simulator.core.benchmark import load_benchmark
from simulator.core.emotions import EMOTION_NAMES, HEAD_NAMES
from simulator.core.errors import ConfigError, InputError
from simulator.profiles import ModelProfile
from simulator.runner import RunOptions, execute_run
from simulator.scoring_run import CACHE_VERSION, cache_path
from simulator.session import SessionSettings
from simulator.store import ResultRow, RunStore, read_results
from simulator.viewer import write_view
from simulator.viewer.data import load_run, load_session
from simulator.viewer.embed import script_json, wav_bytes
from simulator.viewer.envelope import LEVELS, density, envelope
from simulator.viewer.layout import page_name
from tests.test_runner import SETTINGS, short_benchmark

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


def add_failed_row(run_dir: Path, sample_id: str, error: str) -> None:
    """A failed session whose bundle is gone, as after a crash or a manual clean-up."""
    store = RunStore(run_dir / "results.sqlite")
    try:
        store.put(
            ResultRow(
                sample_id=sample_id,
                status="failed",
                end_reason="connect",
                error=error,
                attempts=3,
                language="en",
                emotion="Pride",
                **dict.fromkeys(
                    ("latency_s", "onset_s", "reply_duration_s", "overlap_s", "speech_end_s"), None
                ),
                send_p50_ms=None,
                send_p99_ms=None,
                send_max_ms=None,
                bytes_sent=0,
                bytes_received=0,
                wall_s=0.1,
                bundle=None,
                finished_at=datetime.now(UTC).isoformat(timespec="seconds"),
            )
        )
    finally:
        store.close()


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
    data = {"version": CACHE_VERSION, "scorer": scorer, "dimensions": HEAD_NAMES, "items": items}
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two replied sessions (s0 matches, s1 does not), a transcript with markup in it, and a
    failed session without a bundle whose id and error hold markup too."""
    root = tmp_path_factory.mktemp("view")
    run = asyncio.run(record_run(root / "runs" / "v1", short_benchmark(root / "b", 2)))
    with open(run / "sessions" / "s1" / "events.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"t": 1.5, "dir": "recv", "kind": "transcript", "text": EVIL}) + "\n")
        fh.write("not json\n")
    add_failed_row(run, 'bad"<id>', EVIL)
    write_scores(run, {"s0": "Anger", "s1": "Pride"})  # labels: s0 Anger, s1 Sadness
    return run


def test_envelope_of_a_known_signal_is_exact():
    x = np.array([0, 0.5, -0.5, 1, -1, 0.25, 0.001, 0], dtype=np.float32)
    env = envelope(x, 8, 4)
    assert env.duration_s == 1.0
    assert env.mins == [0, -64, -LEVELS, 0]
    assert env.maxs == [64, LEVELS, 32, 1]  # a quiet column never rounds to silence
    assert envelope(x[:3], 8, 10).maxs == [0, 64, -64]  # no more columns than samples
    assert envelope(np.zeros(0, np.float32), 16000, 10).mins == []
    clipped = envelope(np.array([2.0, -3.0], np.float32), 2, 1)
    assert (clipped.mins, clipped.maxs) == ([-LEVELS], [LEVELS])


def test_density_counts_events_per_bin():
    assert density([0, 0.05, 0.1, 0.99, 1.5, -1], 1.0, 10) == [3, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    assert density([], 1.0, 3) == [0, 0, 0]
    assert density([0.5], 0.0, 3) == []


def test_script_json_cannot_end_its_script_element():
    value = {"text": EVIL + "<!-- \u2028 & \u2029"}
    out = script_json(value)
    assert "<" not in out and ">" not in out and "&" not in out and "\u2028" not in out
    assert json.loads(out) == value
    with pytest.raises(ValueError):
        script_json({"x": float("nan")})


def test_wav_bytes_is_pcm16_mono():
    data = wav_bytes(np.array([0.0, 0.5, -1.0], np.float32), 16000)
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE" and len(data) == 44 + 6
    assert np.frombuffer(data[44:], "<i2").tolist() == [0, 16384, -32768]


def test_page_names_are_safe_file_names():
    assert page_name("en-anger-1") == "en-anger-1.html"
    assert page_name('bad"<id>') == "bad__id_.html"
    assert page_name("../x") == "_x.html"


def test_session_data_joins_row_bundle_and_scores(run_dir):
    run = load_run(run_dir)
    assert run.report is not None and run.report.scorer == "prosody"
    assert run.scores["s0"].match is True and run.scores["s0"].reply_top == "Anger"
    assert run.scores["s1"].match is False and run.scores["s1"].reply_top == "Pride"
    s = load_session(run, "s1")
    row = s.row
    assert row.status == "ok" and s.user is not None and s.model is not None
    assert s.speech_end_s == row.speech_end_s and not s.speech_end_measured
    assert s.user.vad and s.model.vad  # both sides spoke
    assert s.model.vad[0].start_s == pytest.approx(row.onset_s, abs=0.02)
    assert s.duration_s >= s.user.duration_s
    assert [m.kind for m in s.markers if m.kind in ("context_end", "reply_end")] == [
        "context_end",
        "reply_end",
    ]
    assert any(m.detail == EVIL for m in s.markers)
    assert s.traffic is not None and sum(s.traffic.sent) > 50 and sum(s.traffic.voiced) > 0
    assert s.notes == ["events.jsonl: 1 unreadable line left out"]


def test_failed_session_without_bundle_still_has_a_page(run_dir):
    run = load_run(run_dir)
    s = load_session(run, 'bad"<id>')
    assert s.user is None and s.model is None and s.markers == []
    assert s.notes == ["no recording bundle for this session"]
    assert run.scores['bad"<id>'].match is None  # failures are not counted


def test_unknown_sample_is_an_input_error_with_a_hint(run_dir):
    with pytest.raises(InputError, match="no session 's3' in this run"):
        load_run(run_dir).row("s3")
    with pytest.raises(InputError, match="did you mean 's1'"):
        load_run(run_dir).row("s01")


@pytest.fixture(scope="module")
def view_dir(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pages")
    assert write_view(run_dir, out) == out / "index.html"
    return out


def _embedded(page: str) -> dict:
    found = re.search(r'<script id="session-data" type="application/json">(.*?)</script>', page)
    assert found
    return json.loads(found.group(1))


def test_session_page_has_lanes_players_latency_and_scores(run_dir, view_dir):
    _, rows = read_results(run_dir)
    row = next(r for r in rows if r.sample_id == "s0")
    page = (view_dir / "sessions" / "s0.html").read_text(encoding="utf-8")
    for needle in ('id="lane-user"', 'id="lane-model"', 'id="playhead"', 'href="../index.html"'):
        assert needle in page
    assert page.count("<audio controls") == 3
    assert page.count('src="data:audio/wav;base64,') == 3
    assert f"{row.latency_s * 1000:.0f} ms" in page
    data = _embedded(page)
    assert data["timing"]["latency"] == row.latency_s
    assert data["timing"]["speech_end"] == row.speech_end_s
    assert data["timing"]["onset"] == row.onset_s
    assert len(data["tracks"]["user"]["env"]["min"]) > 100
    assert "NOT COMPARABLE WITH MIRRORING" in page and "prosody" in page
    assert ">match<" in page and 'class="tag top">reply top' in page
    assert "http://" not in page and "https://" not in page  # nothing fetched from anywhere


def test_markup_from_the_server_or_the_store_is_escaped(view_dir):
    s1 = (view_dir / "sessions" / "s1.html").read_text(encoding="utf-8")
    assert EVIL not in s1 and "<img" not in s1
    assert "&lt;/script&gt;&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in s1  # events table
    assert any(m[3] == EVIL for m in _embedded(s1)["markers"])  # intact inside the JSON
    failed = (view_dir / "sessions" / "bad__id_.html").read_text(encoding="utf-8")
    assert EVIL not in failed and "Session failed:" in failed and "no recording bundle" in failed
    index = (view_dir / "index.html").read_text(encoding="utf-8")
    assert 'bad"<id>' not in index and "bad&quot;&lt;id&gt;" in index


def test_index_lists_every_session_with_its_match(view_dir):
    index = (view_dir / "index.html").read_text(encoding="utf-8")
    assert index.count("<tr data-emotion=") == 3
    assert 'href="sessions/s0.html"' in index and 'href="sessions/bad__id_.html"' in index
    assert re.search(r'data-match="yes" data-status="ok"><td><a href="sessions/s0', index)
    assert re.search(r'data-match="no" data-status="ok"><td><a href="sessions/s1', index)
    assert 'data-match="–" data-status="failed"' in index
    assert "match rate" in index and "NOT COMPARABLE WITH MIRRORING" in index


def test_unscored_run_says_how_to_score_it(run_dir, tmp_path):
    unscored = tmp_path / "runs" / "v1"
    unscored.parent.mkdir()
    (unscored / "sessions").mkdir(parents=True)
    (unscored / "results.sqlite").write_bytes((run_dir / "results.sqlite").read_bytes())
    page = write_view(unscored, sample="s0")
    assert page == unscored / "view" / "sessions" / "s0.html"
    assert sorted(p.name for p in (unscored / "view" / "sessions").iterdir()) == ["s0.html"]
    text = page.read_text(encoding="utf-8")
    assert f"duplexsim score {unscored}" in text and "no recording bundle" in text


def test_command_prints_the_page_and_fails_in_one_line(run_dir, tmp_path, capsys):
    out = tmp_path / "one"
    assert main(["view", str(run_dir), "--sample", "s1", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out / "sessions" / "s1.html")
    assert (out / "index.html").is_file()
    assert main(["view", str(run_dir), "--sample", "nope", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("duplexsim: error:") and "no session 'nope'" in err
    assert err.count("\n") == 1
    assert main(["view", str(tmp_path / "missing")]) == 2
    assert "not a run directory" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="no scores from 'other'"):
        write_view(run_dir, tmp_path / "x", scorer="other")
