"""The onset cases through whole sessions on the virtual clock: a model that plays each case's
audio (real speech after silence, the level syllable, speech after noise, a breath, noise alone,
plain and through Opus) has its true onset within 5 ms and no phantom reply, and a re-measurement
of the session's output (as ``replay`` re-measures output.wav) decides the same."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf

from duplexsim.clients.fakekit.behaviours.base import Step
from duplexsim.core.timing import measure_reply
from duplexsim.session.engine import run_session
from tests.helpers.onsetcases import RATE, Case, all_cases
from tests.helpers.sessions import settings
from tests.helpers.virtualclock import ScriptedClient, run_virtual

CASES = all_cases()
SETTINGS = settings(reply_timeout_s=3.0)


class Playback:
    """A model whose output, frame by frame from T0, is ``audio`` (then silence)."""

    def __init__(self, audio: np.ndarray) -> None:
        self.audio = audio
        self.at = 0

    def push(self, samples: np.ndarray) -> Step:
        out = np.zeros(samples.size, np.float32)
        chunk = self.audio[self.at : self.at + samples.size]
        out[: chunk.size] = chunk
        self.at += samples.size
        return Step(out, silent=not out.any())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_session_finds_the_true_onset_and_its_recording_agrees(case: Case) -> None:
    client = ScriptedClient(Playback(case.audio), rate=RATE, end_of_turn=False)  # type: ignore[arg-type]
    context = np.zeros(3200, np.float32)  # 0.2 s at 16 kHz: the user's turn ends at once
    out = run_virtual(run_session(client, context, SETTINGS, speech_end_s=0.2))
    assert out.timing is not None
    if case.onset_s is None:
        assert (out.status, out.timing.onset_s) == ("no-reply", None)
    else:
        assert out.status == "ok" and out.timing.onset_s is not None
        assert abs(out.timing.onset_s - case.onset_s) <= 0.005
    again = measure_reply(out.output, RATE, speech_end_s=0.2)
    assert again.onset_s == out.timing.onset_s
    # and from output.wav as the bundle holds it (16-bit)
    wav = io.BytesIO()
    sf.write(wav, out.output, RATE, format="WAV", subtype="PCM_16")
    wav.seek(0)
    heard, _ = sf.read(wav, dtype="float32")
    from_file = measure_reply(heard, RATE, speech_end_s=0.2).onset_s
    assert (from_file is None) == (again.onset_s is None)
    if from_file is not None and again.onset_s is not None:
        assert abs(from_file - again.onset_s) <= 1.5 / RATE
