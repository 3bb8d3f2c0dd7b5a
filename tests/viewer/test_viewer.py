"""``duplexsim view`` without a browser: envelopes, gathering, escaping, pages and the command."""

from __future__ import annotations

import json
import math
import re
import shutil
import sqlite3
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from duplexsim.cli import main
from duplexsim.core.audio import write_audio
from duplexsim.core.errors import ConfigError, InputError
from duplexsim.run.store import read_results
from duplexsim.viewer import write as write_module
from duplexsim.viewer import write_view
from duplexsim.viewer.data import load_run, load_session
from duplexsim.viewer.embed import script_json, wav_bytes
from duplexsim.viewer.envelope import LEVELS, density, envelope
from duplexsim.viewer.layout import page_names
from tests.helpers.views import EVIL, add_failed_row, put_row


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


SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._~-]*\.html")


def test_page_names_are_safe_and_unique_even_without_case():
    ids = ["en-anger-1", 'bad"<id>', "../x", "..", ".", "", "a b", "a_b", "Ab", "ab", "AB", "con"]
    ids += ["con.x", "x" * 300, "é", "e"]
    names = page_names(ids)
    assert names["en-anger-1"] == "en-anger-1.html" and names["e"] == "e.html"  # plain ids stay
    assert all(SAFE_NAME.fullmatch(n) and len(n) < 100 for n in names.values()), names
    assert len({n.lower() for n in names.values()}) == len(ids)  # unique on any file system
    assert names["a b"].startswith("a_b~") and names["Ab"].startswith("Ab~")
    assert names["../x"].startswith("___x~") and names[".."].startswith("__~")
    assert not names["con"].lower().startswith("con.") and names["con.x"].startswith("_con.x~")
    assert page_names(reversed(ids)) == names  # a page's name does not depend on the others' order
    assert page_names(["a b"]) == {"a b": names["a b"]}
    # an id spelled like another's hashed name still gets a name of its own
    twin = names["a b"].removesuffix(".html")
    again = page_names(["a b", twin])
    assert again["a b"].lower() != again[twin].lower()


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
    assert len(s.notes) == 1
    assert re.fullmatch(
        r"events\.jsonl: 1 unreadable line left out \(line \d+: not JSON \(.*\)\)", s.notes[0]
    )


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
    failed = (view_dir / "sessions" / page_names(['bad"<id>'])['bad"<id>']).read_text("utf-8")
    assert EVIL not in failed and "Session failed:" in failed and "no recording bundle" in failed
    index = (view_dir / "index.html").read_text(encoding="utf-8")
    assert 'bad"<id>' not in index and "bad&quot;&lt;id&gt;" in index


def test_index_lists_every_session_with_its_match(view_dir):
    index = (view_dir / "index.html").read_text(encoding="utf-8")
    assert index.count("<tr data-emotion=") == 3
    failed = page_names(['bad"<id>'])['bad"<id>']
    assert 'href="sessions/s0.html"' in index and f'href="sessions/{failed}"' in index
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


def copy_run(run_dir: Path, tmp_path: Path) -> Path:
    """A copy of the module's run, for a test that changes it."""
    copy = tmp_path / "runs" / run_dir.name
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("view"))
    return copy


def _edit_meta(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def edit(bundle: Path) -> None:
        meta = json.loads((bundle / "meta.json").read_text(encoding="utf-8"))
        change(meta)
        (bundle / "meta.json").write_text(json.dumps(meta), encoding="utf-8")  # NaN as NaN

    return edit


def _append_event(event: dict) -> Callable[[Path], None]:
    def edit(bundle: Path) -> None:
        with open(bundle / "events.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(event) + "\n")

    return edit


CORRUPT = {  # one damaged bundle: what is done to it, and the note its page shows
    "due-not-a-number": (
        _append_event({"t": 1.0, "dir": "send", "kind": "audio", "n": 50, "due": "x"}),
        "events.jsonl: 2 unreadable lines left out",  # with the fixture's "not json"
    ),
    "due-nan": (
        _append_event({"t": 1.0, "dir": "send", "kind": "audio", "n": 50, "due": math.nan}),
        "events.jsonl: 2 unreadable lines left out",
    ),
    "t-infinite": (
        _append_event({"t": math.inf, "dir": "recv", "kind": "transcript", "text": "x"}),
        "events.jsonl: 2 unreadable lines left out",  # with the fixture's "not json"
    ),
    "event-not-an-object": (_append_event([1, 2]), "events.jsonl: 2 unreadable lines"),
    "window-nan": (  # NaN is no JSON: the strict reader refuses the whole file
        _edit_meta(lambda m: m["sample"].update(context_turn_start_s=math.nan)),
        "meta.json: unreadable",
    ),
    "window-text": (
        _edit_meta(lambda m: m["sample"].update(context_turn_start_s="4 s")),
        "sample.context_turn_start_s is not a finite number",
    ),
    "sample-null": (
        _edit_meta(lambda m: m.update(sample=None)),
        "meta.json: &#x27;sample&#x27; is not an object",
    ),
    "settings-list": (
        _edit_meta(lambda m: m.update(settings=[1])),
        "meta.json: &#x27;settings&#x27; is not an object",
    ),
    "vad-text": (
        _edit_meta(lambda m: m["settings"]["vad"].update(energy_dbfs="loud")),
        "unusable VAD settings",
    ),
    "vad-flag-not-bool": (
        _edit_meta(lambda m: m["settings"]["vad"].update(edge_above_floor=1)),
        "unusable VAD settings",
    ),
    "capabilities-null": (
        _edit_meta(lambda m: m.update(capabilities=None, model=7)),
        "meta.json: &#x27;model&#x27; is not an object",
    ),
    "meta-not-an-object": (
        lambda bundle: (bundle / "meta.json").write_text("[]", encoding="utf-8"),
        "meta.json: not a JSON object",
    ),
}


@pytest.mark.parametrize("damage", sorted(CORRUPT))
def test_a_corrupt_bundle_is_noted_on_its_page_and_spoils_nothing(run_dir, tmp_path, damage):
    run = copy_run(run_dir, tmp_path)
    edit, note = CORRUPT[damage]
    edit(run / "sessions" / "s1")
    out = tmp_path / "pages"
    assert main(["view", str(run), "--out", str(out)]) == 0
    page = (out / "sessions" / "s1.html").read_text(encoding="utf-8")
    assert note in page and "Problems with the recording" in page
    assert 'id="lane-model"' in page and page.count("<audio controls") == 3  # the rest is there
    data = _embedded(page)
    assert data["timing"]["latency"] is not None and data["duration"] > 1.0
    assert (out / "sessions" / "s0.html").is_file()
    assert (out / "index.html").read_text(encoding="utf-8").count("<tr data-emotion=") == 3


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the report's percentiles
def test_numbers_in_the_results_that_are_not_finite_are_missing(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path)
    db = sqlite3.connect(run / "results.sqlite")
    with db:
        db.execute(
            "UPDATE results SET latency_s = ?, speech_end_s = 'soon', wall_s = ? "
            "WHERE sample_id = 's1'",
            (math.inf, -math.inf),
        )
    db.close()
    out = tmp_path / "pages"
    assert main(["view", str(run), "--out", str(out)]) == 0
    page = (out / "sessions" / "s1.html").read_text(encoding="utf-8")
    for field, value in (("latency_s", "inf"), ("wall_s", "-inf")):
        note = f"field &#x27;{field}&#x27;: {value} is not a finite number (treated as missing)"
        assert f"results.sqlite: {note}" in page
    assert "field &#x27;speech_end_s&#x27;: &#x27;soon&#x27; is not a number" in page
    data = _embedded(page)
    assert (
        data["timing"]["latency"] is None and data["timing"]["speech_end"] is not None
    )  # measured
    assert "(measured by the viewer)" in page


def test_a_session_that_cannot_be_drawn_still_gets_a_page(run_dir, tmp_path, monkeypatch, caplog):
    real = write_module.session_page

    def session_page(run, session, *args, **kwargs):
        if session.row.sample_id == "s1":
            raise RuntimeError("boom <b>")
        return real(run, session, *args, **kwargs)

    monkeypatch.setattr(write_module, "session_page", session_page)
    out = tmp_path / "pages"
    assert write_view(run_dir, out) == out / "index.html"
    page = (out / "sessions" / "s1.html").read_text(encoding="utf-8")
    assert "could not be read" in page and "RuntimeError: boom &lt;b&gt;" in page
    assert "<b>boom" not in page and 'href="../index.html"' in page
    assert "s1" in caplog.text and "boom" in caplog.text
    assert 'id="lane-user"' in (out / "sessions" / "s0.html").read_text(encoding="utf-8")
    assert 'href="sessions/s1.html"' in (out / "index.html").read_text(encoding="utf-8")


def test_ids_that_differ_only_in_case_get_pages_of_their_own(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path)
    for sid in ("S0", "x y", "x_y", ".."):
        add_failed_row(run, sid, f"error of {sid}")
    out = tmp_path / "pages"
    write_view(run, out)
    pages = {p.name: p.read_text(encoding="utf-8") for p in (out / "sessions").iterdir()}
    assert len(pages) == 7 and len({name.lower() for name in pages}) == 7
    assert not any(name.startswith(".") for name in pages)
    for sid in ("S0", "x y", "x_y", ".."):  # each page is its own session's
        name = page_names([r.sample_id for r in read_results(run)[1]])[sid]
        assert f"error of {sid}" in pages[name]
        assert f'href="sessions/{urllib.parse.quote(name)}"' in (out / "index.html").read_text(
            encoding="utf-8"
        )
    s0 = next(name for name in pages if name.startswith("s0~"))
    assert 'id="lane-user"' in pages[s0]


def _links(index: Path) -> list[str]:
    return re.findall(r'<a href="sessions/([^"]+)"', index.read_text(encoding="utf-8"))


def test_one_sample_writes_its_page_and_links_only_pages_that_exist(run_dir, tmp_path):
    out = tmp_path / "pages"
    assert write_view(run_dir, out, sample="s1") == out / "sessions" / "s1.html"
    assert [p.name for p in (out / "sessions").iterdir()] == ["s1.html"]
    index = out / "index.html"
    assert _links(index) == ["s1.html"] and 'id="partial"' in index.read_text(encoding="utf-8")
    assert index.read_text(encoding="utf-8").count("<tr data-emotion=") == 3  # all listed
    page = (out / "sessions" / "s1.html").read_text(encoding="utf-8")
    assert 'class="step"' not in page  # s0's page does not exist: no link to it
    write_view(run_dir, out, sample="s0")  # a partial index is brought up to date
    assert _links(index) == ["s0.html", "s1.html"]
    assert 'title="s1">next' in (out / "sessions" / "s0.html").read_text(encoding="utf-8")

    write_view(run_dir, out)
    full = index.read_bytes()
    assert len(_links(index)) == 3 and b'id="partial"' not in full
    write_view(run_dir, out, sample="s1")  # a full index is left as it is
    assert index.read_bytes() == full


def test_a_full_view_removes_only_its_own_stale_pages(run_dir, tmp_path):
    out = tmp_path / "pages"
    write_view(run_dir, out)
    sessions = out / "sessions"
    old = (sessions / "s0.html").read_text(encoding="utf-8")
    (sessions / "gone.html").write_text(old, encoding="utf-8")  # a session no longer in the run
    legacy = "<!doctype html><html><head><title>gone · v1 · duplexsim</title></head></html>"
    (sessions / "legacy.html").write_text(legacy, encoding="utf-8")  # an earlier viewer's
    (sessions / "mine.html").write_text("<!doctype html><p>my notes</p>", encoding="utf-8")
    (sessions / "notes.txt").write_text(old, encoding="utf-8")
    write_view(run_dir, out, sample="s0")  # one page: nothing removed
    assert (sessions / "gone.html").is_file()
    write_view(run_dir, out)
    left = sorted(p.name for p in sessions.iterdir())
    assert "gone.html" not in left and "legacy.html" not in left
    assert {"mine.html", "notes.txt", "s0.html", "s1.html"} <= set(left)


def tone(seconds: float, f0: float, rate: int = 16000, channels: int = 1) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    x = (0.3 * np.sin(2 * np.pi * f0 * t) * (np.sin(2 * np.pi * 0.2 * t) > 0)).astype(np.float32)
    return x if channels == 1 else np.stack([x, x[::-1]], axis=1)


def write_long_session(run: Path, sample_id: str, seconds: float) -> Path:
    """A bundle written by hand (as ``duplexsim.run.recording`` lays it out) of a ``seconds`` long
    session, and its row."""
    bundle = run / "sessions" / sample_id
    bundle.mkdir(parents=True)
    write_audio(bundle / "input.wav", tone(seconds, 150.0), 16000)
    write_audio(bundle / "output.wav", tone(seconds, 220.0, 24000), 24000)
    write_audio(bundle / "stereo.wav", tone(seconds, 180.0, 24000, channels=2), 24000)
    meta = {
        "bundle_version": 1,
        "sample": {"id": sample_id, "language": "en", "emotion": "", "context_turn_start_s": 1.0},
        "model": {"name": "fake-echo", "protocol": "pcm-ws"},
        "capabilities": {"input_rate": 16000, "output_rate": 24000},
        "settings": {"vad": {"kind": "energy"}},
    }
    (bundle / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    events = [{"t": 0.0, "dir": "local", "kind": "start"}]
    events += [
        {"t": i * 0.02, "dir": "send", "kind": "audio", "n": i, "due": i * 0.02}
        for i in range(int(seconds / 0.02))
    ]
    events.append({"t": seconds - 1, "dir": "local", "kind": "reply_end"})
    (bundle / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), "utf-8")
    put_row(
        run,
        sample_id,
        status="ok",
        end_reason="end-of-turn",
        emotion="",
        latency_s=0.5,
        onset_s=2.0,
        speech_end_s=1.5,
        reply_duration_s=seconds - 3,
        bundle=f"sessions/{sample_id}",
    )
    return bundle


def _sources(page: str) -> dict[str, str]:
    return dict(re.findall(r'data-track="(\w+)" src="([^"]+)"', page))


@pytest.mark.parametrize("out_name", [None, "elsewhere/pages"])
def test_a_long_session_links_the_bundles_audio_instead_of_embedding_it(tmp_path, out_name):
    run = tmp_path / "runs" / "long"
    bundle = write_long_session(run, "talk 1", 40.0)  # 120 s of audio in its three players
    out = None if out_name is None else tmp_path / out_name
    page_path = write_view(run, out, sample="talk 1", max_embed_s=100)
    page = page_path.read_text(encoding="utf-8")
    assert page_path.parent == (out or run / "view") / "sessions"
    assert "data:audio" not in page and len(page) < 300_000
    sources = _sources(page)
    assert sorted(sources) == ["both", "model", "user"]
    for track, name in (("user", "input.wav"), ("model", "output.wav"), ("both", "stereo.wav")):
        src = sources[track]
        assert not src.startswith(("/", "file:")) and "%20" in src  # relative, and a URL
        assert (page_path.parent / urllib.parse.unquote(src)).resolve() == bundle / name
    assert 'id="audio-linked"' in page and "keep the page and the run folder together" in page
    data = _embedded(page)
    assert data["tracks"]["user"]["env"]["duration"] == pytest.approx(40.0)
    assert data["tracks"]["model"]["env"]["duration"] == pytest.approx(40.0)
    assert data["tracks"]["user"]["vad"] and data["duration"] == pytest.approx(40.0, abs=0.1)

    embedded = write_view(run, out, sample="talk 1", max_embed_s=130).read_text("utf-8")
    assert embedded.count('src="data:audio/wav;base64,') == 3
    assert 'id="audio-linked"' not in embedded and len(embedded) > 3_000_000


def test_a_long_session_does_not_keep_its_samples(tmp_path):
    run = tmp_path / "runs" / "long"
    write_long_session(run, "t1", 20.0)
    s = load_session(load_run(run), "t1", max_embed_s=10.0)
    assert not s.embedded and s.audio_s == pytest.approx(60.0)
    assert s.user is not None and s.user.samples is None and s.user.duration_s == 20.0
    assert s.model is not None and s.model.samples is None
    kept = load_session(load_run(run), "t1")
    assert kept.embedded and kept.user is not None and kept.user.samples is not None


def test_max_embed_s_must_be_a_number_of_seconds(tmp_path, capsys):
    for bad in ("-1", "nan", "lots"):
        with pytest.raises(SystemExit) as exit_:
            main(["view", str(tmp_path), "--max-embed-s", bad])
        assert exit_.value.code == 2
        assert "not a number of seconds" in capsys.readouterr().err
