"""The one reader of run folders, piece by piece: paths kept inside, regular files only, sizes and
lines bounded, strict JSON, typed results rows and score caches, and a run's benchmark claims
checked against the benchmark's files. (Every command on crafted run folders:
test_runfolder_hostile.py.)"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duplexsim.core import runfolder
from duplexsim.core.bundle import MAX_SESSION_S, event_problem, number_problem
from duplexsim.core.emotions import HEAD_NAMES
from duplexsim.core.errors import ConfigError, DuplexsimError, RunFolderError
from duplexsim.core.provenance import ScorerIdentity
from duplexsim.core.runbench import RunBenchmark
from duplexsim.core.runfolder import RunFolder, open_regular, read_regular
from duplexsim.run.store import COLUMNS, ResultRow, RunStore, load_results
from duplexsim.runscores.cache import ScoreCache, reference_cache_path
from duplexsim.viewer.envelope import EnvelopeBuilder, envelope
from tests.helpers.signals import voiced_signal, write_wav

DEEP = "[" * 100_000 + "]" * 100_000


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and text
    return text


# ---- files ----------------------------------------------------------------------------------------


def test_a_fifo_a_device_and_a_folder_are_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "events.jsonl"
    os.mkfifo(fifo)  # no writer: a plain open() would wait for one for ever
    with pytest.raises(RunFolderError, match="not a regular file \\(a FIFO\\)"):
        open_regular(fifo, 1 << 20)
    with pytest.raises(RunFolderError, match="a character device"):
        open_regular(Path("/dev/zero"), 1 << 20)
    with pytest.raises(RunFolderError, match="a folder"):
        read_regular(tmp_path, 1 << 20)


def test_a_sparse_file_of_gigabytes_is_refused_by_its_size_before_a_byte_is_read(
    tmp_path: Path,
) -> None:
    big = tmp_path / "meta.json"
    with open(big, "wb") as fh:
        fh.truncate(3 << 30)  # sparse: no disk cost
    with pytest.raises(RunFolderError) as caught:
        read_regular(big, 64 << 20)
    assert one_line(caught.value).endswith("3.0 GiB, more than such a file can be (64.0 MiB)")


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "r"
    (run / "sessions" / "s0").mkdir(parents=True)
    (run / "sessions" / "s0" / "meta.json").write_text("{}")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "meta.json").write_text("{}")
    return run


@pytest.mark.parametrize(
    "path", ["../../outside", "sessions/../../../outside", "/etc", "sessions/link"]
)
def test_a_path_that_leads_out_of_the_run_folder_is_refused(tmp_path: Path, path: str) -> None:
    run = _run(tmp_path)
    (run / "sessions" / "link").symlink_to(tmp_path / "outside")
    folder = RunFolder(run)
    with pytest.raises(RunFolderError, match="leads outside the run folder") as caught:
        folder.bundle(path, "results.sqlite: session 's0'")
    assert "--allow-outside-paths permits this" in one_line(caught.value)
    assert RunFolder(run, allow_outside=True).bundle(path, "x") is not None


def test_a_file_symlinked_out_of_a_bundle_inside_is_refused_and_one_inside_is_fine(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path)
    bundle = run / "sessions" / "s0"
    (bundle / "events.jsonl").symlink_to(tmp_path / "outside" / "meta.json")
    (bundle / "input.wav").symlink_to(bundle / "meta.json")
    folder = RunFolder(run)
    with pytest.raises(RunFolderError, match="leads outside"):
        folder.file(bundle, "events.jsonl")
    assert folder.file(bundle, "input.wav") == bundle / "input.wav"
    assert folder.file(bundle, "output.wav") is None  # not there: not recorded
    with pytest.raises(RunFolderError, match="NUL"):
        folder.bundle("sessions/s0\x00", "x")


def test_sample_ids_that_are_not_names_never_name_a_session_folder(tmp_path: Path) -> None:
    folder = RunFolder(_run(tmp_path))
    for bad in ("../x", "/etc", "a/b", ".hidden", "x\n"):
        with pytest.raises(RunFolderError, match="cannot name a session folder"):
            folder.session(bad)
    assert folder.session("s0") == folder.path / "sessions" / "s0"


def test_sessions_lists_bundles_and_refuses_one_symlinked_out(tmp_path: Path) -> None:
    run = _run(tmp_path)
    folder = RunFolder(run)
    assert [p.name for p in folder.sessions()] == ["s0"]
    (run / "sessions" / "s1").symlink_to(tmp_path / "outside")
    with pytest.raises(RunFolderError, match="leads outside"):
        folder.sessions()


def test_a_results_file_that_is_a_fifo_or_symlinked_out_is_refused(tmp_path: Path) -> None:
    run = _run(tmp_path)
    os.mkfifo(run / "results.sqlite")
    with pytest.raises(RunFolderError, match="a FIFO"):
        load_results(run)
    (run / "results.sqlite").unlink()
    (run / "results.sqlite").symlink_to(tmp_path / "outside" / "meta.json")
    with pytest.raises(RunFolderError, match="leads outside"):
        load_results(run)


# ---- meta.json and events.jsonl --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"model": ' + DEEP + "}", "nested more than 64 levels deep"),
        ('{"sample": {"id": "s0", "context_turn_start_s": NaN}}', "NaN is not valid JSON"),
        ("\udcff", "not UTF-8"),
    ],
)
def test_meta_json_that_is_no_json_we_accept_is_one_line(tmp_path: Path, text: str, why) -> None:
    run = _run(tmp_path)
    data = b"\xff" if text == "\udcff" else text.encode()
    (run / "sessions" / "s0" / "meta.json").write_bytes(data)
    with pytest.raises(RunFolderError) as caught:
        RunFolder(run).meta(run / "sessions" / "s0")
    assert why in one_line(caught.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"attempts": 10**12}, "attempts"),
        ({"input_rate": -1}, "input_rate"),
        ({"sample": {"id": "s", "context": "c", "context_turn_start_s": 1e13}}, "start_s"),
        ({"sample": {"id": "s", "context": "c", "context_turn_start_s": True}}, "start_s"),
    ],
)
def test_numbers_of_meta_json_out_of_a_session_range_name_their_field(
    tmp_path: Path, change: dict, field: str
) -> None:
    run = _run(tmp_path)
    meta = {"bundle_version": 2, "kind": "benchmark", "sample": {"id": "s", "context": "c"}}
    (run / "sessions" / "s0" / "meta.json").write_text(json.dumps(meta | change))
    with pytest.raises(RunFolderError, match=field):
        RunFolder(run).meta(run / "sessions" / "s0")


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        ({"t": 1e13}, "field 't': 10000000000000.0 is out of range"),
        ({"t": -1e13}, "field 't': -10000000000000.0 is out of range"),
        ({"t": "soon"}, "field 't': 'soon' is not a number"),
        ({"t": True}, "field 't': True is not a number"),
        ({"kind": "x"}, "field 't' is missing"),
        ({"t": 1, "n": 2.5}, "field 'n': 2.5 is not a whole number"),
        ({"t": 1, "samples": 10**12}, "field 'samples'"),
        ({"t": 1, "frame_ms": 0}, "field 'frame_ms'"),
        ({"t": 1, "frame_ms": 20}, None),
        ({"t": 1, "silent": "no"}, "field 'silent'"),
        ({"t": 1, "text": 5}, "field 'text'"),
        ({"t": 1, "scores": {"a": "b"}}, "field 'scores'"),
        ({"t": 1, "offset_s": None, "due": 0.5}, None),
        ([1, 2], "not a JSON object"),
    ],
)
def test_an_event_holds_only_what_a_session_can_record(event: object, problem) -> None:
    found = event_problem(event)
    assert found == problem or (problem is not None and found and found.startswith(problem))


def _events(run: Path, lines: list[str]) -> Path:
    bundle = run / "sessions" / "s0"
    (bundle / "events.jsonl").write_text("".join(line + "\n" for line in lines))
    return bundle


def test_events_stream_with_each_bad_line_named(tmp_path: Path) -> None:
    run = _run(tmp_path)
    bundle = _events(
        run,
        [
            '{"t": 0.0, "kind": "start"}',
            '{"t": 0.5, "x": ' + DEEP + "}",
            '{"t": 1e13, "kind": "transcript"}',
            "not json",
            '{"t": Infinity}',
        ],
    )
    lines = list(RunFolder(run).events(bundle))
    assert [ln.event is not None for ln in lines] == [True, False, False, False, False]
    assert "nested more than 64 levels deep" in (lines[1].problem or "")
    assert "out of range" in (lines[2].problem or "")
    assert "Infinity is not valid JSON" in (lines[4].problem or "")
    with pytest.raises(RunFolderError, match=r"events\.jsonl:2: not JSON \(nested"):
        list(RunFolder(run).strict_events(bundle))


def test_events_are_capped_in_lines_and_in_line_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _run(tmp_path)
    bundle = _events(run, ['{"t": 0.0}'] * 20)
    monkeypatch.setattr(runfolder, "MAX_EVENT_LINES", 10)
    with pytest.raises(RunFolderError, match="more than 10 lines"):
        list(RunFolder(run).events(bundle))
    monkeypatch.setattr(runfolder, "MAX_EVENT_LINE_BYTES", 100)
    _events(run, ['{"t": 0.0, "text": "' + "x" * 1000 + '"}'])
    with pytest.raises(RunFolderError, match=r"events\.jsonl:1: a line longer than 100 bytes"):
        list(RunFolder(run).events(bundle))


# ---- results.sqlite -------------------------------------------------------------------------------


def _row(**values: object) -> ResultRow:
    base = dict.fromkeys(COLUMNS)
    base.update(sample_id="s0", status="ok", end_reason="vad", attempts=1, language="en")
    base.update(emotion="Anger", finished_at="now", bundle="sessions/s0")
    return ResultRow(**{**base, **values})


def _store(run: Path, row: ResultRow, meta: dict[str, str] | None = None) -> None:
    store = RunStore(run / "results.sqlite")
    try:
        store.put(row)
        for key, text in (meta or {}).items():
            store.db.execute("INSERT OR REPLACE INTO run_meta VALUES (?, ?)", (key, text))
    finally:
        store.close()


def _set(run: Path, column: str, value: object) -> None:
    db = sqlite3.connect(run / "results.sqlite")
    with db:
        db.execute(f"UPDATE results SET {column} = ?", (value,))
    db.close()


@pytest.mark.parametrize(
    ("column", "value", "why"),
    [
        ("latency_s", "soon", "'soon' is not a number"),
        ("onset_s", math.inf, "inf is not a finite number"),
        ("onset_s", math.nan, None),  # SQLite keeps NaN as NULL: missing, nothing to say
        ("reply_duration_s", 1e13, "is out of range"),
        ("attempts", -3, "is out of range"),
        ("bytes_sent", b"\x00" * 10, "is not a number"),
        ("timing_valid", 7, "7 is not 0 or 1"),
        ("status", b"ok", "a bytes, not text"),
        ("error", b"x", "a bytes, not text"),
    ],
)
def test_each_results_value_is_of_its_column_type_and_range(
    tmp_path: Path, column: str, value: object, why: str | None
) -> None:
    run = _run(tmp_path)
    _store(run, _row(latency_s=0.3, onset_s=1.0, reply_duration_s=1.0))
    _set(run, column, value)
    results = load_results(run)
    (row,) = results.rows
    missing = {"attempts": 0, "status": "failed"}  # a row always has these
    assert getattr(row, column) == missing.get(column)
    if why is None:
        assert results.problems == {}
    else:
        note = results.problems["s0"][0]
        assert note == f"results.sqlite: field '{column}': {note.split(': ', 2)[2]}"
        assert why in note and note.endswith("(treated as missing)")


def test_a_status_or_emotion_no_run_writes_is_said_and_read_as_safe(tmp_path: Path) -> None:
    run = _run(tmp_path)
    _store(run, _row(status="maybe", emotion="Joy"))
    results = load_results(run)
    (row,) = results.rows
    assert (row.status, row.emotion) == ("failed", "")
    assert results.problems["s0"] == [
        "results.sqlite: field 'status': 'maybe' is not one of ok, no-reply, failed "
        "(treated as failed)",
        "results.sqlite: field 'emotion': 'Joy' is not one of the 12 emotions "
        "(treated as no reference)",
    ]


@pytest.mark.parametrize(
    ("record", "why"),
    [
        (DEEP, "nested more than 64 levels deep"),
        ('{"turns": [{"turn": 0}]}', "TypeError"),
        ('{"turns": [{"turn": 0, "step": 0, "emotion": "Joy", "onset_s": 1, "duration_s": 1}]}',
         "an unknown emotion"),
        ('{"turns": [{"turn": 0, "step": 0, "emotion": null, "onset_s": 1e13, "duration_s": 1}]}',
         "out of range"),
        ('{"steps": [{"step": Infinity}]}', "Infinity is not valid JSON"),
    ],
)  # fmt: skip
def test_a_partner_record_no_session_writes_is_treated_as_missing(
    tmp_path: Path, record: str, why: str
) -> None:
    run = _run(tmp_path)
    _store(run, _row())
    _set(run, "partner", record)
    results = load_results(run)
    assert results.rows[0].partner is None
    (note,) = results.problems["s0"]
    assert (
        note.startswith("results.sqlite: field 'partner': not a partner record (") and why in note
    )


def test_run_meta_that_is_deep_or_of_the_wrong_type_is_left_out(tmp_path: Path) -> None:
    run = _run(tmp_path)
    meta = {"run_id": '"r"', "model": "[1]", "benchmark": DEEP, "settings": "{}"}
    _store(run, _row(), meta)
    results = load_results(run)
    assert results.meta == {"run_id": "r", "settings": {}}
    assert any("'benchmark': nested more than 64" in p for p in results.problems[""])
    assert any("'model': not a JSON object (left out)" in p for p in results.problems[""])


_SQL_VALUES = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.binary(max_size=30),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.dictionaries(st.sampled_from(COLUMNS[1:]), _SQL_VALUES, max_size=6))
def test_any_results_row_reads_typed_or_says_what_it_left_out(tmp_path: Path, values) -> None:
    run = tmp_path / "hyp"
    run.mkdir(exist_ok=True)
    for stale in run.iterdir():
        stale.unlink()
    _store(run, _row())
    for column, value in values.items():
        with contextlib.suppress(sqlite3.IntegrityError):  # NULL where the table refuses one
            _set(run, column, value)
    results = load_results(run)
    (row,) = results.rows
    for name in COLUMNS:
        value = getattr(row, name)
        assert value is None or isinstance(value, str | int | float | bool), name
        if isinstance(value, float):
            assert math.isfinite(value) and abs(value) <= MAX_SESSION_S * 1000 * 1000
    assert all("\n" not in p for p in results.problems.get("s0", []))


# ---- score caches ---------------------------------------------------------------------------------


def _cache(path: Path, items: dict, dimensions: object = HEAD_NAMES) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    identity = {"name": "fake", "weights": "sha256:1", "precision": "fp32", "version": "1"}
    data = {"version": 2, "scorer": "fake", "identity": identity, "dimensions": dimensions}
    path.write_text(json.dumps(data | {"items": items}))
    return path


@pytest.mark.parametrize(
    ("item", "why"),
    [
        ({"digest": "d", "values": [[1.0, 2.0], [3.0]]}, "not a list of finite numbers"),
        ({"digest": "d", "values": [0.1] * 11}, "11 values for 12 dimensions"),
        ({"digest": "d", "values": [1e300] * 12}, "not a list of finite numbers"),
        ({"digest": 5, "values": [0.1] * 12}, "field 'digest'"),
        ({"digest": "d", "values": [0.1] * 2, "dimensions": ["a", 3]}, "not a list of"),
        ("x", "not a JSON object"),
    ],
)
def test_a_cached_score_of_the_wrong_shape_is_left_out_and_said(
    tmp_path: Path, item: object, why: str
) -> None:
    good = {"digest": "d", "values": [0.1] * 12}
    path = _cache(tmp_path / "scores" / "fake.json", {"reply/s0": item, "reply/s1": good})
    cache = ScoreCache(path, "fake")
    assert list(cache.items) == ["reply/s1"] and why in cache.problems["reply/s0"]
    assert cache.emotions("reply/s0") is None and cache.emotions("reply/s1") is not None


def test_scores_without_the_twelve_emotions_read_as_unscored_not_as_an_error(
    tmp_path: Path,
) -> None:
    path = _cache(tmp_path / "c.json", {"reply/s0": {"digest": "d", "values": [1.0]}}, ["n"])
    cache = ScoreCache(path, "fake")
    assert cache.speaker_emotions(["reply/s0"], None) == {}
    assert cache.problems == {"reply/s0": "its dimensions lack the 12 emotions"}


@pytest.mark.parametrize("text", [DEEP, '{"version": 2, "items": NaN}', "[]"])
def test_a_cache_that_is_no_cache_is_one_line_naming_it(tmp_path: Path, text: str) -> None:
    path = tmp_path / "scores" / "fake.json"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(ConfigError, match="unreadable score cache") as caught:
        ScoreCache(path, "fake")
    assert str(path) in one_line(caught.value)


_JSON = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(items=st.dictionaries(st.sampled_from(["reply/s0", "reference/s0"]), _JSON), dims=_JSON)
def test_any_score_file_loads_or_is_one_documented_error(tmp_path: Path, items, dims) -> None:
    path = _cache(tmp_path / "hyp" / "fake.json", items, dims)
    try:
        cache = ScoreCache(path, "fake")
    except ConfigError as exc:
        one_line(exc)
        return
    for key in ("reply/s0", "reference/s0"):
        cache.emotions(key)
    cache.speaker_emotions(["reply/s0", "reference/s0"], None)


@pytest.mark.parametrize("digest", ["../..", "/tmp/x", "sha256:../../x", "sha256:1234"])
def test_the_shared_cache_is_never_built_from_what_is_not_a_digest(digest: str) -> None:
    identity = ScorerIdentity("fake", "sha256:1", "fp32", "1")
    with pytest.raises(ConfigError, match="is not a digest"):
        reference_cache_path(digest, identity)
    assert reference_cache_path("sha256:0123456789abcdef", identity).parent.name == (
        "sha256-0123456789abcdef"
    )


# ---- the run's benchmark ----------------------------------------------------------------------------


def _benchmark(root: Path) -> Path:
    for i in range(2):
        write_wav(root / "audio" / f"c{i}.wav", voiced_signal(0.5))
        write_wav(root / "audio" / f"r{i}.wav", voiced_signal(0.5, f0=200.0))
    lines = [
        {"id": f"s{i}", "language": "en", "emotion": "Anger"}
        | {"context": f"audio/c{i}.wav", "reference": f"audio/r{i}.wav"}
        for i in range(2)
    ]
    (root / "manifest.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return root / "manifest.jsonl"


def _claim(tmp_path: Path, manifest: Path) -> dict[str, object]:
    from duplexsim.core.benchmark import load_benchmark
    from duplexsim.core.provenance import benchmark_id

    bench = load_benchmark(manifest, audio_check="none")
    audio = [p for s in bench for p in (s.context, s.reference) if p is not None]
    return {"benchmark": benchmark_id(bench.manifest, audio, len(bench)).to_dict()}


def test_session_audio_must_be_a_file_of_the_runs_benchmark(tmp_path: Path) -> None:
    manifest = _benchmark(tmp_path / "bench")
    run = RunBenchmark(RunFolder(_run(tmp_path)), _claim(tmp_path, manifest))
    reference = str((tmp_path / "bench" / "audio" / "r1.wav").resolve())
    assert run.audio(reference, "meta.json") == Path(reference)
    (tmp_path / "bench" / "audio" / "other.wav").write_bytes(b"")
    for outside in ("/etc/passwd", str(tmp_path / "bench" / "audio" / "other.wav"), "r1.wav"):
        with pytest.raises(RunFolderError, match="not a file of the run's benchmark") as caught:
            run.audio(outside, "sessions/s1/meta.json: field 'sample.context'")
        assert "--allow-outside-paths permits this" in one_line(caught.value)
    lax = RunBenchmark(RunFolder(tmp_path, allow_outside=True), {})
    assert lax.audio("/etc/passwd", "x") == Path("/etc/passwd")


def test_a_claimed_digest_is_believed_only_when_the_benchmark_files_digest_to_it(
    tmp_path: Path,
) -> None:
    manifest = _benchmark(tmp_path / "bench")
    claim = _claim(tmp_path, manifest)
    folder = RunFolder(_run(tmp_path))
    digest = claim["benchmark"]["digest"]  # type: ignore[index]
    assert RunBenchmark(folder, claim).verified_digest == digest
    for crafted in ("../..", "/abs", "sha256:0000000000000000"):
        bent = {"benchmark": {**claim["benchmark"], "digest": crafted}}  # type: ignore[dict-item]
        assert RunBenchmark(folder, bent).verified_digest is None
    write_wav(tmp_path / "bench" / "audio" / "r0.wav", voiced_signal(0.6))  # changed since
    assert RunBenchmark(folder, claim).verified_digest is None


def test_a_fifo_in_the_claimed_benchmark_is_not_hashed(tmp_path: Path) -> None:
    manifest = _benchmark(tmp_path / "bench")
    claim = _claim(tmp_path, manifest)
    (tmp_path / "bench" / "audio" / "r0.wav").unlink()
    os.mkfifo(tmp_path / "bench" / "audio" / "r0.wav")  # hashing it would block for ever
    assert RunBenchmark(RunFolder(_run(tmp_path)), claim).verified_digest is None


def test_a_claimed_manifest_that_is_no_file_is_not_read(tmp_path: Path) -> None:
    claim = {"benchmark": {"path": "/dev/zero", "digest": "sha256:0000000000000000"}}
    bench = RunBenchmark(RunFolder(_run(tmp_path)), claim)
    assert bench.benchmark is None and bench.verified_digest is None


# ---- drawing ----------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 20_000),
    columns=st.integers(1, 2000),
    cuts=st.lists(st.integers(1, 5000), max_size=20),
)
def test_an_envelope_built_block_by_block_is_the_whole_tracks(n, columns, cuts) -> None:
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    built = EnvelopeBuilder(n, 16000, columns)
    i = 0
    for k in [*cuts, n]:
        built.push(x[i : i + k])
        i += k
    assert built.finish() == envelope(x, 16000, columns)


def test_number_problem_says_why_in_words() -> None:
    assert number_problem(3, 0, 5, integer=True) is None
    assert number_problem(float("nan"), 0, 5) == "nan is not a finite number"
    assert number_problem("x" * 100, 0, 5) == f"'{'x' * 36}... is not a number"
    assert isinstance(RunFolderError("x"), DuplexsimError)


def test_a_run_folder_named_relatively_reads_the_paths_it_gave_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `./dev demo` writes to runs/ and scores runs/<id>: a bundle folder this reader gives out
    # is already joined to that relative name and must not be joined to it again
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "r" / "sessions" / "s0").mkdir(parents=True)
    (tmp_path / "runs" / "r" / "sessions" / "s0" / "meta.json").write_text("{}")
    run = RunFolder(Path("runs/r"))
    folder = run.bundle("sessions/s0", "results")
    assert folder == Path("runs/r/sessions/s0")
    assert run.file(folder, "meta.json") == Path("runs/r/sessions/s0/meta.json")
    assert run.sessions() == [Path("runs/r/sessions/s0")]
    with pytest.raises(RunFolderError, match="leads outside"):
        run.file(folder, "../../../../x")
