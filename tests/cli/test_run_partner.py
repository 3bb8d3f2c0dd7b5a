"""``run --partner``: its options, their one-line errors, and a whole run of two fake models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from duplexsim.cli import build_parser
from duplexsim.cli.run_cmd import partner_options
from duplexsim.core.errors import ConfigError
from tests.helpers.cli import duplexsim
from tests.helpers.timing import LENIENT_ARGS


def options(*extra: str):
    args = build_parser().parse_args(["run", "--model", "fake:echo", "--benchmark", "b", *extra])
    return partner_options(args)


def test_without_partner_the_user_is_the_samples_audio():
    assert options() is None


def test_the_partners_settings_and_instructions_file(tmp_path):
    told = tmp_path / "examiner.txt"
    told.write_text("Order a breakfast set to go.\n", encoding="utf-8")
    partner = options(
        "--partner", "fake:examiner@moshi", "--partner-turns", "3", "--partner-time-s", "45",
        "--partner-instructions", str(told),
    )  # fmt: skip
    assert partner is not None
    assert (partner.profile.protocol, partner.profile.fake_behaviour) == ("moshi", "examiner")
    assert (partner.limits.turns, partner.limits.time_s) == (3, 45.0)
    assert partner.instructions == "Order a breakfast set to go.\n"
    assert partner.instructions_source == str(told)
    default = options("--partner", "fake:examiner")
    assert default is not None and (default.limits.turns, default.limits.time_s) == (5, 60.0)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--partner-turns", "2"], "--partner-turns needs --partner"),
        (["--partner", "fake:examiner", "--partner-turns", "0"], "turn limit must be at least 1"),
        (["--partner", "fake:examiner", "--partner-time-s", "-1"], "time limit must be > 0 s"),
        (["--partner", "fake:examiner", "--partner-instructions", "/nonexistent/x.txt"],
         "cannot read the partner's instructions"),
    ],
)  # fmt: skip
def test_bad_partner_settings_are_one_line_errors(argv, needle):
    with pytest.raises(ConfigError, match=needle):
        options(*argv)


def test_a_run_of_two_fake_models_from_the_command_line(make_benchmark, tmp_path: Path):
    bench = make_benchmark(n=1)
    runs = tmp_path / "runs"
    result = duplexsim(
        "run", "--model", "fake:echo", "--partner", "fake:examiner", "--benchmark", str(bench),
        "--partner-turns", "2", "--partner-time-s", "30", "--runs-dir", str(runs), "--run-id", "r",
        "--hangover", "0.8", "--reply-timeout", "2", "--quiet", *LENIENT_ARGS,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    meta = json.loads((runs / "r" / "sessions" / "s0" / "meta.json").read_text())
    assert meta["partner_model"]["model"]["fake_behaviour"] == "examiner"
    assert meta["outcome"]["partner_model"]["ended_by"] == "turn-limit"
    assert [t["turn"] for t in meta["outcome"]["turns"]] == [0, 1, 2]
    empty = tmp_path / "empty.txt"
    empty.write_text(" \n")
    bad = duplexsim(
        "run", "--model", "fake:echo", "--partner", "fake:examiner", "--benchmark", str(bench),
        "--partner-instructions", str(empty), "--runs-dir", str(runs),
    )  # fmt: skip
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().endswith("the partner's instructions are empty")
