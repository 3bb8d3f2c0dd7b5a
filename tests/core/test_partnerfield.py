from __future__ import annotations

from pathlib import Path

import pytest

from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.errors import BenchmarkError
from duplexsim.core.partner import Backchannel, Distractor, Interrupt, NextTurn
from duplexsim.core.partnerfield import partner_script
from tests.helpers.cli import duplexsim
from tests.helpers.signals import voiced_signal, write_wav

BASE = {"id": "p0", "language": "en", "context": "audio/s0.context.wav"}
STEPS = [
    {"kind": "backchannel", "clip": "audio/mhm.wav", "at_pause_ms": 400},
    {"kind": "interrupt", "clip": "audio/wait.wav", "after_onset_ms": 1500},
    {
        "kind": "next_turn",
        "clip": "audio/t2.wav",
        "gap_ms": 300,
        "timeout_ms": 15000,
        "emotion": "Anger",
        "reference": "audio/s0.reference.wav",
    },
    {"kind": "backchannel", "clip": "audio/mhm.wav", "after_onset_ms": 800},
    {"kind": "distractor", "clip": "audio/tv.wav", "at_s": 4.0},
]


@pytest.fixture
def bench(make_benchmark):
    def make(partner: object, **extra: object) -> Path:
        root = make_benchmark([BASE | {"partner": partner} | extra], n=1)
        for name, seconds in (("mhm", 0.3), ("wait", 1.0), ("t2", 2.0), ("tv", 1.5)):
            write_wav(root / "audio" / f"{name}.wav", voiced_signal(seconds))
        return root

    return make


def test_a_script_of_every_kind_loads_in_seconds(bench):
    (sample,) = load_benchmark(bench(STEPS)).samples
    kinds = [e.kind for e in sample.partner]
    assert kinds == ["backchannel", "interrupt", "next_turn", "backchannel", "distractor"]
    bc, interrupt, turn, bc2, distractor = sample.partner
    assert bc2.after_onset_s == 0.8 and bc2.at_pause_s is None
    assert bc.at_pause_s == 0.4 and bc.after_onset_s is None
    assert interrupt.after_onset_s == 1.5 and interrupt.clip_s == pytest.approx(1.0)
    assert interrupt.clip.is_absolute() and interrupt.clip.name == "wait.wav"
    assert (turn.gap_s, turn.timeout_s, turn.emotion) == (0.3, 15.0, "Anger")
    assert turn.reference is not None and turn.reference.name == "s0.reference.wav"
    assert distractor.at_s == 4.0
    assert {p.name for p in sample.audio} >= {"mhm.wav", "wait.wav", "t2.wav", "tv.wav"}
    script = partner_script(sample.partner, [0.3, 1.0, 2.0, 0.3, 1.5])
    assert script.steps == (
        Backchannel(0, at_pause_s=0.4),
        Interrupt(1, 1.5),
        NextTurn(2, 0.3, 15.0),
        Backchannel(3, after_onset_s=0.8),
        Distractor(4, 4.0),
    )


def _problems(root: Path) -> list[str]:
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(root)
    return [str(p) for p in info.value.problems]


INTERRUPT = {"kind": "interrupt", "clip": "audio/wait.wav", "after_onset_ms": 1500}


@pytest.mark.parametrize(
    ("partner", "field", "needle"),
    [
        ({"kind": "interrupt"}, "partner", "expected a list of steps, got an object"),
        ([], "partner", "at least one step"),
        (["interrupt"], "partner[0]", "expected an object, got a string"),
        ([INTERRUPT | {"kind": "interupt"}], "partner[0].kind", "did you mean 'interrupt'"),
        ([{"clip": "audio/wait.wav"}], "partner[0].kind", "missing"),
        ([INTERRUPT | {"clip": "audio/nope.wav"}], "partner[0].clip", "file not found"),
        ([{"kind": "interrupt", "after_onset_ms": 3}], "partner[0].clip", "missing"),
        ([INTERRUPT | {"after_onset_ms": "1s"}], "partner[0].after_onset_ms", "got a string"),
        ([INTERRUPT | {"after_onset_ms": -5}], "partner[0].after_onset_ms", ">= 0"),
        ([INTERRUPT | {"after_onset_ms": None}], "partner[0].after_onset_ms", "got null"),
        ([INTERRUPT | {"gap_ms": 5}], "partner[0].gap_ms", "unknown field for an interrupt"),
        (
            [{"kind": "next_turn", "clip": "audio/t2.wav", "gap_ms": 0, "timeout": 5}],
            "partner[0].timeout",
            "did you mean 'timeout_ms'",
        ),
        ([{"kind": "next_turn", "clip": "audio/t2.wav"}], "partner[0].gap_ms", "missing"),
        (
            [{"kind": "next_turn", "clip": "audio/t2.wav", "gap_ms": 0, "timeout_ms": 0}],
            "partner[0].timeout_ms",
            "> 0",
        ),
        (
            [{"kind": "next_turn", "clip": "audio/t2.wav", "gap_ms": 0, "emotion": "Anger"}],
            "partner[0].reference",
            "'emotion' needs 'reference'",
        ),
        (
            [
                {
                    "kind": "next_turn",
                    "clip": "audio/t2.wav",
                    "gap_ms": 0,
                    "emotion": "anger",
                    "reference": "audio/s0.reference.wav",
                }
            ],
            "partner[0].emotion",
            "did you mean 'Anger'",
        ),
        ([{"kind": "backchannel", "clip": "audio/mhm.wav"}], "partner[0]", "one of"),
        (
            [
                {
                    "kind": "backchannel",
                    "clip": "audio/mhm.wav",
                    "at_pause_ms": 1,
                    "after_onset_ms": 1,
                }
            ],
            "partner[0]",
            "one of 'at_pause_ms' and 'after_onset_ms'",
        ),
        ([{"kind": "distractor", "clip": "audio/tv.wav"}], "partner[0].at_s", "missing"),
    ],
)
def test_a_bad_step_is_one_problem_naming_file_line_and_field(bench, partner, field, needle):
    (problem,) = _problems(bench(partner))
    assert f"manifest.jsonl:1: field '{field}':" in problem
    assert needle in problem
    assert "\n" not in problem


def test_every_bad_step_is_reported(bench):
    partner = [INTERRUPT | {"after_onset_ms": "x"}, INTERRUPT, {"kind": "distractor"}]
    problems = _problems(bench(partner))
    assert [p.split("field ")[1].split(":")[0] for p in problems] == [
        "'partner[0].after_onset_ms'",
        "'partner[2].at_s'",
        "'partner[2].clip'",
    ]


def test_benchmark_check_prints_the_problem_on_one_line_and_exits_2(bench):
    root = bench([INTERRUPT, INTERRUPT | {"after_onset_ms": "soon"}])
    result = duplexsim("benchmark", "check", str(root))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = [line.strip() for line in result.stderr.splitlines() if "partner" in line]
    assert lines == [
        f"{root / 'manifest.jsonl'}:1: field 'partner[1].after_onset_ms': "
        "expected a number, got a string"
    ]


def test_a_partner_models_instructions_load_as_given_or_joined_as_fdb_v2_joins_them(
    make_benchmark,
):
    lines = [
        BASE | {"partner_instructions": "You order breakfast. Be brief."},
        BASE | {"id": "p1", "partner_instructions": {"system": "Act a customer.", "task": "T1"}},
        BASE | {"id": "p2", "partner_instructions": {"system": "Act a customer."}},
        BASE | {"id": "p3"},
    ]
    samples = load_benchmark(make_benchmark(lines, n=1)).samples
    assert [s.partner_instructions for s in samples] == [
        "You order breakfast. Be brief.",
        "Act a customer.\n\nT1",
        "Act a customer.",
        None,
    ]


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        (7, "expected a string or an object, got a number"),
        ("  ", "is empty"),
        ({"task": "T1"}, "a 'system' string and an optional 'task' string"),
        ({"system": "S", "tsak": "T1"}, "(unknown: tsak)"),
        ({"system": "S", "task": 1}, "optional 'task' string"),
        ("x" * 100_001, "100001 characters; at most 100000"),
    ],
)
def test_bad_instructions_are_one_problem_naming_the_field(make_benchmark, value, needle):
    (problem,) = _problems(make_benchmark([BASE | {"partner_instructions": value}], n=1))
    assert "manifest.jsonl:1: field 'partner_instructions':" in problem and needle in problem
