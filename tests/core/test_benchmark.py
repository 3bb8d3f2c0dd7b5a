from __future__ import annotations

import json
from pathlib import Path

import pytest

from duplexsim.cli.benchmark_cmd import summarise
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.errors import BenchmarkError

GOOD = {
    "id": "s0",
    "language": "en",
    "emotion": "Amusement",
    "context": "audio/s0.context.wav",
    "reference": "audio/s0.reference.wav",
}


def test_valid_benchmark_loads_with_durations(make_benchmark):
    bench = load_benchmark(make_benchmark(n=3))
    assert [s.id for s in bench] == ["s0", "s1", "s2"]
    s0 = bench.samples[0]
    assert s0.context.is_absolute() and s0.context.exists()
    assert s0.context_duration_s == pytest.approx(1.0)
    assert s0.reference_duration_s == pytest.approx(0.5)
    assert s0.line == 1


def test_manifest_path_or_directory(make_benchmark):
    root = make_benchmark()
    assert len(load_benchmark(root / "manifest.jsonl")) == len(load_benchmark(root)) == 2


def test_optional_fields_parsed(make_benchmark):
    line = GOOD | {
        "context_turn_start_s": 0.25,
        "gap_s": 0.4,
        "source_id": "call-7",
        "reference_scores": {"prosody": {"Amusement": 0.9, "Anger": 0}},
        "meta": {"speaker": "x"},
    }
    sample = load_benchmark(make_benchmark([line], n=1)).samples[0]
    assert sample.context_turn_start_s == 0.25
    assert sample.gap_s == 0.4
    assert sample.source_id == "call-7"
    assert sample.reference_scores == {"prosody": {"Amusement": 0.9, "Anger": 0.0}}


def _problems(root: Path) -> list[str]:
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(root)
    return [str(p) for p in info.value.problems]


@pytest.mark.parametrize(
    ("line", "field", "needle"),
    [
        ('{"id": "s0", ', None, "not valid JSON"),
        ("[1, 2]", None, "expected a JSON object"),
        (
            {k: v for k, v in GOOD.items() if k != "emotion"},
            "emotion",
            "missing: 'reference' needs 'emotion'",
        ),
        (GOOD | {"emotion": "happy"}, "emotion", "unknown emotion 'happy'"),
        (GOOD | {"emotion": "Astonishment_Surprise"}, "emotion", "did you mean 'Surprise'"),
        (GOOD | {"emotion": 3}, "emotion", "expected a string, got a number"),
        (GOOD | {"language": "English"}, "language", "invalid value 'English'"),
        (GOOD | {"id": "a b/c"}, "id", "invalid value 'a b/c'"),
        (GOOD | {"context": "audio/nope.wav"}, "context", "file not found: audio/nope.wav"),
        (GOOD | {"reference": None}, "reference", "expected a relative audio path, got null"),
        (GOOD | {"gap_s": "0.3"}, "gap_s", "expected a number, got a string"),
        (GOOD | {"gap_s": -1}, "gap_s", "expected a finite number >= 0"),
        (GOOD | {"gap_s": True}, "gap_s", "expected a number, got a boolean"),
        (GOOD | {"emotoin": "Anger"}, "emotoin", "did you mean 'emotion'"),
        (GOOD | {"context_turn_start_s": 5.0}, "context_turn_start_s", "past the context's end"),
        (
            GOOD | {"reference_scores": {"prosody": {"Anger": "high"}}},
            "reference_scores.prosody",
            "non-numeric",
        ),
        (GOOD | {"reference_scores": [1]}, "reference_scores", "expected an object"),
    ],
)
def test_malformed_line_names_file_line_and_field(make_benchmark, line, field, needle):
    root = make_benchmark([GOOD | {"id": "ok"}, line], n=1)
    problems = _problems(root)
    assert len(problems) == 1, problems
    text = problems[0]
    assert f"{root / 'manifest.jsonl'}:2:" in text
    if field:
        assert f"field '{field}'" in text
    assert needle in text


def test_every_problem_reported_at_once(make_benchmark):
    lines = [
        GOOD,
        GOOD,
        GOOD | {"id": "x", "emotion": "Joy"},
        "oops",
        GOOD | {"id": "y", "gap_s": []},
    ]
    problems = _problems(make_benchmark(lines, n=1))
    assert len(problems) == 4
    assert "duplicate id 's0' (first on line 1)" in problems[0]
    assert ":3: field 'emotion'" in problems[1]
    assert ":4: not valid JSON" in problems[2]
    assert ":5: field 'gap_s'" in problems[3]


def test_bad_audio_file_is_named(make_benchmark):
    root = make_benchmark(n=1)
    (root / "audio" / "s0.context.wav").write_bytes(b"RIFF\x00\x00garbage")
    (problem,) = _problems(root)
    assert "field 'context'" in problem and "s0.context.wav" in problem


def test_empty_manifest_and_missing_paths(tmp_path, make_benchmark):
    root = make_benchmark(n=1)
    (root / "manifest.jsonl").write_text("\n\n")
    assert "holds no samples" in _problems(root)[0]
    assert "no manifest.jsonl in directory" in _problems(tmp_path)[0]
    assert "no such file or directory" in _problems(tmp_path / "missing")[0]


def test_manifest_not_utf8(make_benchmark):
    root = make_benchmark(n=1)
    (root / "manifest.jsonl").write_bytes(b"\xff\xfe\x00bad")
    assert "cannot read" in _problems(root)[0]


def test_summary_table(make_benchmark):
    lines = [
        GOOD | {"id": f"s{i}", "emotion": e, "language": lang}
        for i, (e, lang) in enumerate([("Anger", "en"), ("Anger", "hi"), ("Sadness", "hi")])
    ]
    root = make_benchmark(lines, n=1)
    text = summarise(load_benchmark(root))
    assert "3 samples, 2 languages, 2 emotions" in text
    anger = next(line for line in text.splitlines() if line.startswith("Anger"))
    assert anger.split() == ["Anger", "1", "1", "2"]
    total = next(line for line in text.splitlines() if line.startswith("total"))
    assert total.split() == ["total", "1", "2", "3"]
    assert "no samples for: Amusement" in text
    json.dumps(text)  # plain text only
