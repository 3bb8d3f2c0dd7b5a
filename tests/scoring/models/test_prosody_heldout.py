"""The offline prosody scorer passes its own sanity check on voices it was never calibrated on.

``recordings/demo-heldout`` is the demo's texts and prosody spoken by other espeak-ng voices
(``make_demo.py --heldout``). The echo model, which replays Speaker A's own emotional speech,
mirrors at least three times the shuffled baseline with p < 0.01; the neutral model, always the
same clip, is within noise of chance; the silent model scores 0. Checked twice: on the replies
those models give by construction (fast, exact), and through the whole pipeline, the reference
models answering in real time (``-m slow``: minutes on a loaded machine).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from duplexsim.core.audio import read_audio
from duplexsim.core.benchmark import load_benchmark
from duplexsim.report.data import build_report
from duplexsim.run.demo_data import demo_utterance
from duplexsim.scoring.metrics import MirroringMetrics, SampleScores, compute_metrics
from duplexsim.scoring.models.base import SAMPLE_RATE, emotion_matrix
from duplexsim.scoring.models.prosody import ProsodyScorer
from tests.helpers.paths import REPO

HELDOUT = REPO / "recordings" / "demo-heldout"
ECHO_S = 3  # what the echo reference model replays of the user's last speech


def _brackets(echo: MirroringMetrics, neutral: MirroringMetrics, silent: MirroringMetrics) -> None:
    assert echo.match_rate >= 3 * echo.shuffled_baseline and echo.p_value < 0.01, (
        echo.match_rate,
        echo.shuffled_baseline,
        echo.p_value,
    )
    # within noise of chance: the lift's 95% interval holds 0 and the permutation test is calm
    lift = neutral.ci["lift_pp"]
    assert lift.low <= 0.0 <= lift.high and neutral.p_value > 0.05, neutral.lift_pp
    assert silent.match_rate == 0.0 and silent.reply_rate == 0.0 and silent.n_replied == 0


def test_brackets_hold_on_the_replies_the_reference_models_give() -> None:
    """Echo: the last 3 s of each context (the context ends with Speaker A's last speech, which
    the echo model replays); neutral: the clip the neutral model plays; silent: nothing. Each
    group scored as one speaker, as a run's replies are."""
    bench = load_benchmark(HELDOUT)
    scorer = ProsodyScorer()
    dims = scorer.dimensions

    def emotions(clips: list[np.ndarray]) -> np.ndarray:
        return emotion_matrix(ProsodyScorer.speaker_normalise(scorer.score(clips), dims), dims)

    def audio(path: Path) -> np.ndarray:
        return read_audio(path, sample_rate=SAMPLE_RATE).samples

    refs = emotions([audio(s.reference) for s in bench])
    echo = emotions([audio(s.context)[-ECHO_S * SAMPLE_RATE :] for s in bench])
    neutral = emotions([audio(demo_utterance())] * len(bench))

    def metrics(replies: np.ndarray | None) -> MirroringMetrics:
        return compute_metrics(
            [
                SampleScores(
                    s.id, s.emotion, s.language, refs[i], None if replies is None else replies[i]
                )
                for i, s in enumerate(bench)
            ],
            seed=0,
        )

    _brackets(metrics(echo), metrics(neutral), metrics(None))


@pytest.fixture(scope="module")
def heldout_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("heldout")
    command = ["demo", "--benchmark", str(HELDOUT), "--runs-dir", str(runs), "--run-prefix", "h"]
    result = subprocess.run(
        [sys.executable, "-m", "duplexsim", *command, "--concurrency", "20", "--quiet"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
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


@pytest.mark.slow
def test_echo_neutral_and_silent_brackets_hold_on_heldout_voices(heldout_runs: Path) -> None:
    echo, neutral, silent = (build_report(heldout_runs / f"h-{b}", None) for b in
                             ("echo", "neutral", "silent"))  # fmt: skip
    assert echo.identity.name == "prosody" and echo.identity.known
    # sessions whose own timing broke its budget (a loaded machine) are out of N, and say so
    for m in (echo.metrics, neutral.metrics, silent.metrics):
        assert m.n + sum(len(ids) for ids in m.out_of_n.values()) == 60 and m.n >= 30, m.out_of_n
    _brackets(echo.metrics, neutral.metrics, silent.metrics)
