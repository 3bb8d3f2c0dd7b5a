"""``duplexsim benchmark build`` and ``benchmark validate`` on synthetic two-speaker calls.

Every call is made here with known turns: speech-like harmonic signals whose fundamental encodes
the turn's emotion, and a test scorer (``tone``) that reads the emotion back from the dominant
frequency, so nothing depends on a real scorer's judgement of synthetic audio.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr

from duplexsim.cli import main
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.emotions import EMOTION_NAMES
from duplexsim.core.vad import Segment
from duplexsim.corpus import BuildOptions, ValidateOptions, build_benchmark, validate_calls
from duplexsim.corpus.balance import BalanceConfig, balance, rank_emotions
from duplexsim.corpus.turns import (
    Pair,
    TurnConfig,
    candidate_pairs,
    context_start,
    merge_turns,
)
from duplexsim.corpus.validate import mirroring_statistics
from duplexsim.run.store import read_results
from duplexsim.scoring.metrics import shuffled_match_counts
from duplexsim.scoring.service.local import LocalScoring
from tests.helpers.corpus import (
    FACTORY,
    RATE,
    UNSCORABLE_F0,
    alternating,
    call_audio,
    corpus,
    tone_factory,
    write_call,
    write_listing,
)
from tests.helpers.signals import voiced_signal

FAST_RUN = ["--hangover", "0.5", "--reply-timeout", "2", "--max-reply", "3", "--quiet"]


# ------------------------------------------------------------------------- the test scorer


# ------------------------------------------------------------------------- synthetic calls

# (speaker, start s, end s, emotion or an F0 in Hz)
CALL = [
    (0, 0.5, 2.0, "Anger"),
    (1, 1.0, 1.6, "Pride"),  # a backchannel inside speaker 0's turn: no turn, no split
    (1, 2.6, 4.0, "Anger"),  # reply to turn 0 after 0.6 s, same emotion: kept
    (0, 4.8, 6.0, "Sadness"),  # Anger -> Sadness: dropped, emotions differ
    (1, 6.5, 8.0, "Sadness"),  # kept
    (0, 14.0, 15.0, "Pride"),  # 6 s after the last turn: gap too long
    (1, 14.5, 16.0, "Pride"),  # starts inside the previous turn: overlap, not a candidate
    (0, 16.5, 17.5, "Pride"),  # kept: a reply to speaker 1's turn
]
CALL_S = 19.0


async def build(listing: Path, out: Path, **kw) -> object:
    opts = BuildOptions(
        turns=TurnConfig(context_s=kw.pop("context_s", 3.0)),
        balance=BalanceConfig(**kw),
        audio_format="wav",
    )
    async with LocalScoring(tone_factory) as scoring:
        return await build_benchmark([listing], out, scoring, "tone", opts)


def manifest(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# ------------------------------------------------------------------------- pure parts


def test_turns_merge_and_backchannels():
    seg = Segment
    turns, backchannels = merge_turns(
        (
            [seg(0.0, 2.0), seg(2.6, 3.0), seg(6.0, 7.0)],
            [seg(0.5, 1.0), seg(3.5, 5.0), seg(6.5, 8.0)],
        )
    )
    # 0.5-1.0 lies inside speaker 0's 0.0-2.0: a backchannel, so 0.0-2.0 and 2.6-3.0 are one turn
    assert backchannels == 1
    assert [(t.speaker, t.start_s, t.end_s) for t in turns] == [
        (0, 0.0, 3.0),
        (1, 3.5, 5.0),
        (0, 6.0, 7.0),
        (1, 6.5, 8.0),
    ]
    pairs, overlapping, too_far = candidate_pairs(turns, max_gap_s=0.5)
    assert [(p.a.index, p.b.index) for p in pairs] == [(0, 1)]  # gap 0.5: the limit is inclusive
    assert (overlapping, too_far) == (1, 1)  # 6.5 starts before 7.0 ends; 6.0 is 1 s after 5.0
    assert Pair(turns[0], turns[1]).gap_s == pytest.approx(0.5)


def test_context_start_is_the_pause_boundary_closest_to_the_target():
    points = (0.0, 0.3, 2.4, 4.6, 6.3)
    # A's turn 4.8-6.0: 3.6 s (from 2.4) beats 1.4 s (from 4.6)
    assert context_start(4.8, 6.0, points, TurnConfig(context_s=3.0)) == 2.4
    assert context_start(4.8, 6.0, points, TurnConfig(context_s=10.0)) == 0.0  # the longest, 6 s
    # equally far from the target: the shorter context wins
    assert context_start(8.0, 10.0, (6.5, 7.5), TurnConfig(context_s=3.0)) == 7.5
    # nothing further back than max_context_s (default 1.5 x context_s = 4.5 s)
    assert context_start(18.2, 20.0, (0.0, 18.0), TurnConfig(context_s=3.0)) == 18.0
    assert context_start(9.0, 10.0, (0.0,), TurnConfig(context_s=3.0)) is None
    cfg = TurnConfig(context_s=3.0, max_context_s=10.0)
    assert context_start(9.0, 10.0, (0.0,), cfg) == 0.0
    with pytest.raises(ValueError, match="lead_s"):
        TurnConfig(lead_s=0.5, boundary_pause_s=0.3)


def test_balancing_caps_exactly_and_is_seeded():
    emotions = ["Anger"] * 7 + ["Sadness"] * 5 + ["Pride"] * 5 + ["Amusement"] * 2 + ["Elation"]
    # Sadness and Pride tie at 5: the canonical order (Pride before Sadness) breaks it
    assert [e for e, _ in rank_emotions(emotions)][:3] == ["Anger", "Pride", "Sadness"]
    cfg = BalanceConfig(top=2, cap=3, seed=0)
    result = balance(emotions, cfg)
    kept = [emotions[i] for i in result.kept]
    assert {e: kept.count(e) for e in set(kept)} == {
        "Anger": 3,
        "Pride": 3,
        "Sadness": 5,
        "Amusement": 2,
        "Elation": 1,
    }
    assert result.capped == {"Anger": (7, 3), "Pride": (5, 3)}
    assert result.dropped == 6
    assert list(result.kept) == sorted(result.kept)
    assert balance(emotions, cfg) == result
    others = {balance(emotions, BalanceConfig(top=2, cap=3, seed=s)).kept for s in range(1, 6)}
    assert others - {result.kept}  # another seed draws another subset
    assert balance(emotions, BalanceConfig(top=4, cap=150)).kept == tuple(range(len(emotions)))


def test_mirroring_statistics_exact():
    first = ["Anger", "Sadness"] * 10
    second = ["Anger", "Sadness"] * 9 + ["Sadness", "Anger"]
    m = mirroring_statistics(first, second, ["en"] * 20, permutations=1000, seed=3)
    assert (m.n, m.same, m.observed) == (20, 18, 0.9)
    codes = lambda xs: np.array([EMOTION_NAMES.index(x) for x in xs])  # noqa: E731
    counts = shuffled_match_counts(codes(second), codes(first), 1000, np.random.default_rng(3))
    assert m.baseline == counts.mean() / 20
    assert m.p_value == (1 + np.count_nonzero(counts >= 18)) / 1001
    assert m.expected == 0.5 and abs(m.baseline - 0.5) < 0.01
    assert m == mirroring_statistics(first, second, ["en"] * 20, permutations=1000, seed=3)
    everything = mirroring_statistics(["Anger"] * 5, ["Anger"] * 5, ["en"] * 5)
    assert everything.p_value == 1.0  # every shuffle matches as well as the observed pairs


# ------------------------------------------------------------------------- building


@pytest.mark.parametrize("stereo", [True, False], ids=["stereo", "two-mono"])
def test_build_finds_the_pairs_and_cuts_contexts_at_pauses(tmp_path, stereo):
    row = {"id": "call1", "language": "en"} | write_call(
        tmp_path / "calls", "call1", call_audio(CALL, CALL_S), stereo=stereo
    )
    listing = write_listing(tmp_path / "calls" / ("calls.csv" if stereo else "calls.jsonl"), [row])
    result = asyncio.run(build(listing, tmp_path / "out"))
    out = tmp_path / "out"
    lines = manifest(out)
    assert [(s["id"], s["emotion"]) for s in lines] == [
        ("call1-0000", "Anger"),
        ("call1-0002", "Sadness"),
        ("call1-0005", "Pride"),
    ]
    # (A's turn, B's turn, context start): the start is `lead` (0.2 s) before speech resumes
    # after a pause, the boundary whose context is closest to 3 s and at most 4.5 s long
    expected = [
        ((0.5, 2.0), (2.6, 4.0), 0.0),
        ((4.8, 6.0), (6.5, 8.0), 2.4),
        ((14.5, 16.0), (16.5, 17.5), 13.8),
    ]
    bench = load_benchmark(out)
    for sample, line, (a, b, start) in zip(bench, lines, expected, strict=True):
        assert line["meta"]["a_turn_s"] == pytest.approx(a, abs=0.02)
        assert line["meta"]["b_turn_s"] == pytest.approx(b, abs=0.02)
        assert line["meta"]["context_start_s"] == pytest.approx(start, abs=0.02)
        assert sample.gap_s == pytest.approx(b[0] - a[1], abs=0.02)
        assert sample.context_turn_start_s == pytest.approx(a[0] - start, abs=0.02)
        assert sample.source_id == "call1"
        assert sample.context_duration_s == pytest.approx(a[1] - start, abs=0.02)
        assert sample.reference_duration_s == pytest.approx(b[1] - b[0], abs=0.02)
        scores = sample.reference_scores["tone"]
        assert list(scores) == list(EMOTION_NAMES) and scores[sample.emotion] == 1.0
        context, _ = sf.read(sample.context, dtype="float32")
        loud = np.flatnonzero(np.abs(context) > 0.01)
        # silence at the start boundary, speech up to the very end of A's turn
        assert np.abs(context[: round(0.2 * RATE)]).max() == 0.0
        assert loud[0] / RATE == pytest.approx(max(start + 0.2, 0.5) - start, abs=0.02)
        assert loud[-1] / RATE == pytest.approx(len(context) / RATE, abs=0.02)
    # each context is both channels summed, as a listener hears the call (the middle one holds
    # speaker 1's turn 2.6-4.0 too)
    audio = call_audio(CALL, CALL_S)
    for sample, line in zip(bench, lines, strict=True):
        context, _ = sf.read(sample.context, dtype="float32")
        lo = round(line["meta"]["context_start_s"] * RATE)
        mixed = audio[0, lo : lo + len(context)] + audio[1, lo : lo + len(context)]
        assert np.abs(context - mixed).max() < 1e-4
    assert result.report["steps"] == {
        "adjacent_pairs": 6,
        "dropped_overlapping": 1,
        "dropped_gap_too_long": 1,
        "candidate_pairs": 4,
        "dropped_no_pause_boundary": 0,
        "dropped_unscored": 0,
        "dropped_emotions_differ": 1,
        "same_emotion": 3,
        "dropped_balancing": 0,
        "kept": 3,
    }
    assert result.report["turns"]["backchannels_dropped"] == 1
    assert result.report["counts"] == {"Anger": {"en": 1}, "Sadness": {"en": 1}, "Pride": {"en": 1}}
    assert "| kept (samples) | 3 |" in (out / "build-report.md").read_text()


def test_stereo_and_two_mono_files_give_the_same_benchmark(tmp_path):
    audio = call_audio(CALL, CALL_S)
    outs = []
    for stereo in (True, False):
        folder = tmp_path / ("stereo" if stereo else "mono")
        row = {"id": "call1", "language": "en"} | write_call(folder, "call1", audio, stereo=stereo)
        asyncio.run(build(write_listing(folder / "calls.csv", [row]), folder / "out"))
        outs.append(folder / "out")
    assert (outs[0] / "manifest.jsonl").read_bytes() == (outs[1] / "manifest.jsonl").read_bytes()
    assert {k: v for k, v in digest(outs[0]).items() if k.startswith("audio")} == {
        k: v for k, v in digest(outs[1]).items() if k.startswith("audio")
    }
    # any sample rate: a 44.1 kHz recording gives the same pairs (resampled to 16 kHz)
    folder = tmp_path / "44k"
    folder.mkdir()
    sf.write(folder / "call1.wav", soxr.resample(audio.T, RATE, 44100), 44100, subtype="PCM_16")
    row = {"id": "call1", "language": "en", "audio": "call1.wav"}
    asyncio.run(build(write_listing(folder / "calls.csv", [row]), folder / "out"))
    times = [(x["id"], x["gap_s"], x["meta"]) for x in manifest(folder / "out")]
    assert times == [(x["id"], x["gap_s"], x["meta"]) for x in manifest(outs[0])]


def test_unscored_turns_drop_their_pairs(tmp_path):
    turns = [
        (0, 0.5, 1.5, "Anger"),
        (1, 2.0, 3.0, UNSCORABLE_F0),
        (0, 3.5, 4.5, "Anger"),
        (1, 5.0, 6.0, "Anger"),
    ]
    row = {"id": "c", "language": "it"} | write_call(
        tmp_path, "c", call_audio(turns, 6.5), stereo=True
    )
    result = asyncio.run(build(write_listing(tmp_path / "calls.csv", [row]), tmp_path / "out"))
    steps = result.report["steps"]
    assert (steps["candidate_pairs"], steps["dropped_unscored"], steps["kept"]) == (3, 2, 1)
    assert list(result.report["unscored_turns"]) == ["c/turn-0001"]


def test_same_seed_same_benchmark_and_it_runs(tmp_path, capsys):
    listing = corpus(tmp_path / "calls")
    args = ["--context", "2", "--cap-top", "1", "--cap", "4", "--audio-format", "wav", "--quiet"]
    outs = {}
    for name, seed in (("a", "0"), ("b", "0"), ("c", "1")):
        out = tmp_path / name
        code = main(
            ["benchmark", "build", str(listing), "--out", str(out), "--seed", seed, *args, *FACTORY]
        )
        assert code == 0
        outs[name] = out
    printed = capsys.readouterr().out
    assert "9 samples from 2 calls" in printed and "kept (samples)" in printed
    assert digest(outs["a"]) == digest(outs["b"])  # byte for byte: manifest, reports, audio
    ids = {name: [s["id"] for s in manifest(out)] for name, out in outs.items()}
    assert sum(i.startswith("en1") for i in ids["a"]) == 4  # Anger capped at 4 of 9
    assert sum(i.startswith("hi1") for i in ids["a"]) == 5  # Sadness is not among the top 1
    assert ids["a"] != ids["c"]  # another seed, another draw
    report = json.loads((outs["a"] / "build-report.json").read_text())
    assert report["balancing"]["capped"] == {"Anger": {"before": 9, "kept": 4}}
    assert report["counts"] == {"Anger": {"en": 4, "hi": 0}, "Sadness": {"en": 0, "hi": 5}}
    steps = report["steps"]
    assert (steps["candidate_pairs"], steps["dropped_emotions_differ"]) == (15, 1)
    assert (steps["same_emotion"], steps["dropped_balancing"], steps["kept"]) == (14, 5, 9)
    code = main(
        [
            "run",
            "--model",
            "fake:echo",
            "--benchmark",
            str(outs["a"]),
            "--run-id",
            "r1",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--concurrency",
            "9",
            *FAST_RUN,
        ]
    )
    assert code == 0, capsys.readouterr()
    _, rows = read_results(tmp_path / "runs" / "r1")
    assert len(rows) == 9 and all(r.status == "ok" for r in rows), rows
    assert all(r.latency_s is not None for r in rows)  # the echo model answered every context


def test_existing_output_is_not_overwritten_without_asking(tmp_path, capsys):
    listing = corpus(tmp_path / "calls")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code = main(["benchmark", "build", str(listing), "--out", str(out), "--quiet", *FACTORY])
    assert code == 2
    assert "not empty (use --overwrite" in capsys.readouterr().err
    assert (out / "keep.txt").read_text() == "mine"
    code = main(
        [
            "benchmark",
            "build",
            str(listing),
            "--out",
            str(out),
            "--quiet",
            "--overwrite",
            "--context",
            "2",
            *FACTORY,
        ]
    )
    assert code == 0
    assert not (out / "keep.txt").exists() and (out / "manifest.jsonl").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# ------------------------------------------------------------------------- validation


def test_validate_counts_adjacent_pairs_and_is_seeded(tmp_path, capsys):
    emotions_en = ["Anger", "Anger", "Sadness", "Sadness", "Pride", "Anger", "Anger", "Pride"]
    emotions_hi = ["Elation", "Elation", "Confusion", "Elation"]
    rows = []
    for call_id, lang, emotions in (("v1", "en", emotions_en), ("v2", "hi", emotions_hi)):
        turns, seconds = alternating(emotions)
        rows.append(
            {"id": call_id, "language": lang}
            | write_call(tmp_path, call_id, call_audio(turns, seconds), stereo=False)
        )
    listing = write_listing(tmp_path / "calls.jsonl", rows)
    first = emotions_en[:-1] + emotions_hi[:-1]
    second = emotions_en[1:] + emotions_hi[1:]
    same = sum(a == b for a, b in zip(first, second, strict=True))
    assert same == 4

    async def run(seed: int):
        async with LocalScoring(tone_factory) as scoring:
            return await validate_calls([listing], scoring, "tone", ValidateOptions(seed=seed))

    m = asyncio.run(run(7))
    assert (m.calls, m.pairs, m.n, m.same, m.excluded) == (2, 10, 10, 4, 0)
    assert m.observed == 0.4
    langs = ["en"] * 7 + ["hi"] * 3
    pure = mirroring_statistics(first, second, langs, permutations=1000, seed=7)
    assert (m.baseline, m.p_value, m.expected) == (pure.baseline, pure.p_value, pure.expected)
    assert m.per_language == pure.per_language
    assert m.per_language["en"]["same"] == 3 and m.per_language["hi"]["same"] == 1

    out = tmp_path / "v.json"
    code = main(
        [
            "benchmark",
            "validate",
            str(listing),
            "--seed",
            "7",
            "--json",
            str(out),
            "--quiet",
            *FACTORY,
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "same dominant emotion:  40.0% (4 of 10)" in text
    data = json.loads(out.read_text())
    assert data["observed"] == 0.4 and data["baseline"] == pure.baseline
    assert data["p_value"] == pure.p_value and data["permutations"] == 1000

    gap_limited = asyncio.run(_validate(listing, ValidateOptions(seed=7, max_gap_s=0.5)))
    assert gap_limited.pairs == 0  # every reply starts 0.6 s after the turn


async def _validate(listing: Path, opts: ValidateOptions):
    async with LocalScoring(tone_factory) as scoring:
        return await validate_calls([listing], scoring, "tone", opts)


# ------------------------------------------------------------------------- bad input


def _stereo(path: Path, seconds: float = 2.0) -> None:
    sf.write(path, np.zeros((round(seconds * RATE), 2), np.float32), RATE, subtype="PCM_16")


def _mono(path: Path, seconds: float = 2.0) -> None:
    sf.write(path, voiced_signal(seconds), RATE, subtype="PCM_16")


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        (
            "calls.csv",
            "id,language,audio\nc1,en,mono.wav\n",
            "calls.csv:2: field 'audio': mono.wav: expected 2 channels (one speaker each), "
            "got a mono file",
        ),
        (
            "calls.csv",
            "id,language,a,b\nc1,en,mono.wav,short.wav\n",
            "calls.csv:2: field 'b': short.wav is 1.500 s long but mono.wav is 2.000 s",
        ),
        (
            "calls.csv",
            "id,language,a,b\nc1,en,stereo.wav,mono.wav\n",
            "calls.csv:2: field 'a': stereo.wav: expected a mono file, got 2 channels",
        ),
        (
            "calls.csv",
            "id,language,audio\nc1,english,stereo.wav\n",
            "calls.csv:2: field 'language': invalid value 'english' (expected an ISO 639 code",
        ),
        (
            "calls.csv",
            "id,lang,audio\nc1,en,stereo.wav\n",
            "calls.csv:1: field 'lang': unknown column (did you mean 'language'?)",
        ),
        (
            "calls.csv",
            "id,audio\nc1,stereo.wav\n",
            "calls.csv:2: field 'language': missing required column",
        ),
        (
            "calls.jsonl",
            '{"id": "c1", "language": "en", "a": "mono.wav"}\n',
            "calls.jsonl:1: field 'b': missing: 'b' goes with 'a'",
        ),
        (
            "calls.jsonl",
            '{"id": "c1", "language": "en", "audio": "nope.wav"}\n',
            "calls.jsonl:1: field 'audio': file not found: nope.wav",
        ),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path, capsys, name, text, needle):
    _mono(tmp_path / "mono.wav")
    _mono(tmp_path / "short.wav", 1.5)
    _stereo(tmp_path / "stereo.wav")
    (tmp_path / name).write_text(text)
    for command in ("build", "validate"):
        extra = ["--out", str(tmp_path / "out")] if command == "build" else []
        code = main(["benchmark", command, str(tmp_path / name), *extra, "--quiet", *FACTORY])
        err = capsys.readouterr().err
        assert code == 2
        assert err.startswith("duplexsim: error: ") and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1, err
        assert needle in err
    assert not (tmp_path / "out").exists()


def test_several_problems_are_reported_together(tmp_path, capsys):
    _mono(tmp_path / "mono.wav")
    (tmp_path / "calls.csv").write_text(
        "id,language,audio\nc1,en,mono.wav\nc1,en,mono.wav\nc2,xx-yyyyyyyyyy,mono.wav\n"
    )
    assert main(["benchmark", "validate", str(tmp_path / "calls.csv"), *FACTORY]) == 2
    err = capsys.readouterr().err
    assert "3 problems in the call listings" in err
    assert "calls.csv:3: field 'id': duplicate call id 'c1'" in err
    assert "calls.csv:4: field 'language'" in err


def test_a_precision_the_scorer_cannot_take_is_one_clear_line(tmp_path, capsys):
    calls = str(tmp_path / "calls.csv")  # never read: the flags are checked first
    for extra, needle in (
        ([], "the prosody scorer has no precision option"),
        (FACTORY, "--precision applies to the registry's scorers, not to --factory"),
    ):
        for command in ("build", "validate"):
            out = ["--out", str(tmp_path / "out")] if command == "build" else []
            code = main(["benchmark", command, calls, *out, "--precision", "fp32", *extra])
            err = capsys.readouterr().err
            assert (code, err) == (2, f"duplexsim: error: {needle}\n")
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------- review fixes


def _one_line_error(capsys, argv: list[str], needle: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("duplexsim: error: ") and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert needle in err, err
    return err


@pytest.mark.parametrize("where", ["listing-folder", "above", "audio-folder"])
def test_out_holding_the_inputs_is_refused_even_with_overwrite(tmp_path, capsys, where):
    root = tmp_path / "corpus"
    audio = root / "wavs"
    row = {"id": "c1", "language": "en"} | write_call(
        audio, "c1", call_audio(CALL, CALL_S), stereo=True
    )
    row["audio"] = "wavs/" + row["audio"]
    listing = write_listing(root / "calls.csv", [row])
    out = {"listing-folder": root, "above": tmp_path, "audio-folder": audio}[where]
    before = digest(tmp_path)
    argv = ["benchmark", "build", str(listing), "--out", str(out), "--overwrite", "--quiet"]
    what = "the call audio" if where == "audio-folder" else "the call listing"
    _one_line_error(capsys, [*argv, *FACTORY], f"{out}: holds {what}")
    assert digest(tmp_path) == before  # the recordings survive
    # a folder inside the inputs' folder that holds none of them is fine
    assert main([*argv[:3], "--out", str(root / "bench"), "--overwrite", "--quiet", *FACTORY]) == 0
    assert (root / "bench" / "manifest.jsonl").exists() and (audio / "c1.wav").exists()


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"id": "c1", "language": "en", "audio": "a\\u0000.wav"}\n', "audio"),
        ('{"id": "c1", "language": "en", "a": "' + "x" * 300 + '.wav", "b": "b.wav"}\n', "a"),
    ],
    ids=["nul-byte", "name-too-long"],
)
def test_impossible_paths_are_problems(tmp_path, capsys, text, field):
    _mono(tmp_path / "b.wav")
    (tmp_path / "calls.jsonl").write_text(text)
    for command in ("build", "validate"):
        extra = ["--out", str(tmp_path / "out")] if command == "build" else []
        argv = ["benchmark", command, str(tmp_path / "calls.jsonl"), *extra, "--quiet", *FACTORY]
        _one_line_error(capsys, argv, f"calls.jsonl:1: field '{field}': invalid path")
    assert not (tmp_path / "out").exists()


def test_csv_errors_and_duplicate_columns_are_problems(tmp_path, capsys):
    _stereo(tmp_path / "stereo.wav")
    cases = [
        (
            "id,language,audio\nc1,en," + "x" * 200_000 + "\n",
            "big.csv:2: cannot parse CSV: field larger than field limit",
        ),
        (
            "id,language,audio,audio\nc1,en,stereo.wav,stereo.wav\n",
            "dup.csv:1: field 'audio': duplicate column",
        ),
        (
            '{"id": "c1", "language": "en", "audio": "stereo.wav", "audio": "x.wav"}\n',
            "dup.jsonl:1: field 'audio': duplicate key",
        ),
    ]
    for (text, needle), name in zip(cases, ("big.csv", "dup.csv", "dup.jsonl"), strict=True):
        (tmp_path / name).write_text(text)
        for command in ("build", "validate"):
            extra = ["--out", str(tmp_path / "out")] if command == "build" else []
            argv = ["benchmark", command, str(tmp_path / name), *extra, "--quiet", *FACTORY]
            _one_line_error(capsys, argv, needle)
    assert not (tmp_path / "out").exists()


def test_unwritable_outputs_are_one_clear_line(tmp_path, capsys):
    listing = corpus(tmp_path / "calls")
    (tmp_path / "a.wav").write_bytes(b"not a folder")
    out = tmp_path / "a.wav" / "y"
    argv = ["benchmark", "build", str(listing), "--out", str(out), "--quiet", *FACTORY]
    _one_line_error(capsys, argv, f"{tmp_path / 'a.wav'}: exists and is not a folder")
    folder = tmp_path / "somedir"
    folder.mkdir()
    for target, needle in (
        (folder, f"--json {folder}: is a folder"),
        (tmp_path / "a.wav" / "v.json", f"--json {tmp_path / 'a.wav'}: exists and is not a folder"),
    ):
        argv = ["benchmark", "validate", str(listing), "--json", str(target), "--quiet"]
        _one_line_error(capsys, [*argv, *FACTORY], needle)
    assert list(folder.iterdir()) == []
    # the JSON is written atomically: no temporary file is left beside it
    assert (
        main(
            [
                "benchmark",
                "validate",
                str(listing),
                "--json",
                str(folder / "v.json"),
                "--quiet",
                *FACTORY,
            ]
        )
        == 0
    )
    assert [p.name for p in folder.iterdir()] == ["v.json"]
    json.loads((folder / "v.json").read_text())


def test_a_write_failure_is_one_clear_line(tmp_path, capsys, monkeypatch):
    import duplexsim.corpus.builder as builder

    def full(*_args, **_kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(builder, "write_audio", full)
    listing = corpus(tmp_path / "calls")
    out = tmp_path / "out"
    argv = ["benchmark", "build", str(listing), "--out", str(out), "--context", "2", "--quiet"]
    _one_line_error(capsys, [*argv, *FACTORY], f"{out}: cannot write: No space left on device")
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["calls"]


def test_a_context_never_starts_inside_a_turns_pause():
    cfg = TurnConfig(context_s=3.0)  # at most 4.5 s
    # A speaks 0.5-5.0 with a 0.4 s pause that makes a boundary at 2.2 (inside A's turn): the
    # context must hold A's whole turn, so only boundaries at or before 0.5 count
    points = (0.0, 0.3, 2.2)
    assert context_start(0.5, 5.0, points, cfg) is None  # 4.7 s > 4.5 s: dropped
    assert context_start(0.5, 5.0, points, TurnConfig(context_s=3.0, max_context_s=6.0)) == 0.3
    # a turn longer than the target starts its context at its own start when that is a boundary
    assert context_start(2.2, 6.0, (0.0, 2.2, 3.0), cfg) == 2.2
    # ... else at the nearest earlier boundary within reach
    assert context_start(2.4, 6.0, (0.0, 2.2, 3.0), cfg) == 2.2
    assert context_start(2.4, 6.0, (0.0, 1.0, 3.0), cfg) is None  # 5 s > 4.5 s


def test_build_drops_a_pair_whose_context_would_cut_into_a_turn(tmp_path):
    turns = [
        (0, 0.5, 2.0, "Anger"),  # a pause of 0.4 s: a boundary at 2.2, but one turn 0.5-5.0
        (0, 2.4, 5.0, "Anger"),
        (1, 5.6, 7.0, "Anger"),
        (0, 7.6, 9.0, "Anger"),
    ]
    row = {"id": "c", "language": "en"} | write_call(
        tmp_path, "c", call_audio(turns, 9.5), stereo=True
    )
    result = asyncio.run(build(write_listing(tmp_path / "calls.csv", [row]), tmp_path / "out"))
    lines = manifest(tmp_path / "out")
    # pair (0.5-5.0, 5.6-7.0) needs a 4.7 s context (from 0.3): over 4.5 s, dropped; the reply
    # pair (5.6-7.0, 7.6-9.0) starts at 5.4, 0.2 s before B's turn
    assert result.report["steps"]["dropped_no_pause_boundary"] == 1
    assert [x["id"] for x in lines] == ["c-0001"]
    assert lines[0]["meta"]["context_start_s"] == pytest.approx(5.4, abs=0.02)
    assert lines[0]["context_turn_start_s"] == pytest.approx(0.2, abs=0.02)


def test_identical_segments_on_both_channels_keep_the_louder_one():
    seg = Segment
    same = ([seg(1.0, 3.0)], [seg(1.0, 3.0)])
    # no loudness known: channel 0 keeps the turn; one segment is dropped, not both
    turns, backchannels = merge_turns(same)
    assert [(t.speaker, t.start_s, t.end_s) for t in turns] == [(0, 1.0, 3.0)]
    assert backchannels == 1
    turns, backchannels = merge_turns(same, louder=lambda s: 1)
    assert [(t.speaker, t.start_s, t.end_s) for t in turns] == [(1, 1.0, 3.0)]
    assert backchannels == 1
    # strict containment is still a backchannel, whichever channel is louder
    turns, backchannels = merge_turns(([seg(1.0, 3.0)], [seg(1.0, 2.0)]), louder=lambda s: 1)
    assert [(t.speaker, t.start_s, t.end_s) for t in turns] == [(0, 1.0, 3.0)]
    assert backchannels == 1


def test_bleed_into_the_other_channel_keeps_the_speakers_turn(tmp_path):
    # speaker 1's turn bleeds into channel 0 at 30% of its level: the VAD finds the same
    # segment on both channels; the louder channel (1) keeps it
    audio = call_audio([(0, 0.5, 2.0, "Anger"), (1, 2.6, 4.0, "Anger")], 4.5)
    lo, hi = round(2.6 * RATE), round(4.0 * RATE)
    audio[0, lo:hi] = 0.3 * audio[1, lo:hi]
    row = {"id": "c", "language": "en"} | write_call(tmp_path, "c", audio, stereo=True)
    result = asyncio.run(build(write_listing(tmp_path / "calls.csv", [row]), tmp_path / "out"))
    lines = manifest(tmp_path / "out")
    assert [(x["meta"]["a_turn_s"], x["meta"]["b_turn_s"]) for x in lines] == [
        ([0.5, 2.0], [2.6, 4.0])
    ]
    assert lines[0]["meta"]["a_channel"] == 0
    assert result.report["turns"]["backchannels_dropped"] == 1
