"""The offline prosody scorer passes its own sanity check on voices it was never calibrated on.

``recordings/demo-heldout`` is the demo's texts and prosody spoken by other espeak-ng voices
(``make_demo.py --heldout``). Through the whole pipeline (the demo's reference models in real
time, then scoring and the MIRRORING metrics): the echo model, which replays Speaker A's own
emotional speech, mirrors at least three times the shuffled baseline with p < 0.01; the neutral
model, always the same clip, is within noise of chance; the silent model scores 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.report.data import build_report

REPO = Path(__file__).resolve().parents[1]
HELDOUT = REPO / "recordings" / "demo-heldout"


@pytest.fixture(scope="module")
def heldout_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("heldout")
    command = ["demo", "--benchmark", str(HELDOUT), "--runs-dir", str(runs), "--run-prefix", "h"]
    result = subprocess.run(
        [sys.executable, "-m", "simulator", *command, "--concurrency", "20", "--quiet"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return runs


def test_the_heldout_voices_are_not_the_calibration_voices() -> None:
    text = (REPO / "recordings" / "make_demo.py").read_text(encoding="utf-8")
    assert 'VOICE_A = "+m3"' in text and 'VOICE_B = "+f3"' in text
    assert 'HELDOUT_VOICES = ("+m1", "+f4")' in text
    lines = (HELDOUT / "manifest.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 60 and {json.loads(x)["language"] for x in lines} == {
        "en", "hi", "ar", "it", "tl"
    }  # fmt: skip


def test_echo_neutral_and_silent_brackets_hold_on_heldout_voices(heldout_runs: Path) -> None:
    echo, neutral, silent = (build_report(heldout_runs / f"h-{b}", None) for b in
                             ("echo", "neutral", "silent"))  # fmt: skip
    assert echo.identity.name == "prosody" and echo.identity.known
    e, n, s = echo.metrics, neutral.metrics, silent.metrics
    assert e.n == n.n == s.n == 60
    assert e.match_rate >= 3 * e.shuffled_baseline and e.p_value < 0.01, (e.match_rate, e.p_value)
    # within noise of chance: the lift's 95% interval holds 0 and the permutation test is calm
    lift = n.ci["lift_pp"]
    assert lift.low <= 0.0 <= lift.high and n.p_value > 0.05, (n.lift_pp, n.p_value)
    assert s.match_rate == 0.0 and s.reply_rate == 0.0 and s.n_replied == 0
