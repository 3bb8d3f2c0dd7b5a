"""A reply keeps its first syllable: once a run counts, its onset goes back over the soft onset
and the bursts before it that stand above the stream's own noise floor; steady noise, a breath
and noise alone never make a reply. Exact to the frame on frame levels, and within 5 ms of the
truth on real human speech (tests/data), plain and through Opus."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from duplexsim.core.onsets import OnsetRule, floor_peak, noise_floor_db, onset_spans
from duplexsim.core.timing import measure_reply
from duplexsim.core.vad import BEFORE_RUN_RULE, SpeechRuns, VadConfig, _classify, _to_vad_rate
from tests.helpers.onsetcases import (
    OPUS_DELAY_S,
    RATE,
    WORD_STARTS,
    all_cases,
    clip,
    heard_onset_s,
    level_syllable,
    noise,
    opus,
)

RULE = VadConfig().onset_rule
assert RULE is not None
CASES = all_cases()


def spans(levels: list[float], voiced: list[int], start: int, peak: float) -> list[tuple[int, int]]:
    flags = np.zeros(len(levels), dtype=bool)
    flags[voiced] = True
    assert RULE is not None
    return onset_spans(np.array(levels, dtype=np.float64), flags, start, peak, RULE)


def test_the_floor_is_a_low_percentile_of_the_levels_outside_speech() -> None:
    assert noise_floor_db(np.array([-50.0, -52.0, -48.0, -30.0, -51.0, -49.0])) == -51.0
    assert noise_floor_db(np.zeros(0)) == -math.inf
    # the rule's floor leaves out voiced frames and digital silence: in a stream that sends
    # digital silence between syllables, nothing shows a floor, and every burst is audible
    levels = [-200] * 4 + [-25] * 4 + [-200] * 8 + [-15]
    assert spans(levels, [4, 5, 6, 7, 16], 16, -15.0) == [(4, 8), (16, 16)]


def test_a_soft_onset_above_the_floor_is_the_runs_onset() -> None:
    # room tone at -55, a soft rise (-44 .. -36, one dip of a frame), the run from frame 8
    levels = [-55, -56, -55, -54, -44, -47, -40, -36, -24, -20]
    assert spans(levels, [8, 9], 8, -20.0) == [(4, 8)]
    # steady noise just under the run is the floor: nothing before it belongs
    assert spans([-39, -40, -39, -39, -40, -39, -39, -40, -20], [8], 8, -20.0) == [(8, 8)]


def test_a_burst_before_a_pause_belongs_if_voiced_and_about_as_loud() -> None:
    # a level syllable (-24), 70 ms at -58, the run at -15
    levels = [-200] * 4 + [-24, -24, -25, -24, -23, -24] + [-58] * 7 + [-20, -15]
    assert spans(levels, [4, 5, 6, 7, 8, 9, 17, 18], 17, -15.0) == [(4, 10), (17, 17)]
    # a breath (-42, 20+ dB under the run) is not the reply; nor a burst webrtcvad never voiced
    breath = [-200] * 4 + [-42, -41, -43, -42] + [-58] * 10 + [-20, -15]
    assert spans(breath, [4, 5, 6, 7, 18, 19], 18, -15.0) == [(18, 18)]
    assert spans(levels, [17, 18], 17, -15.0) == [(17, 17)]


def test_a_burst_too_long_before_belongs_to_nothing() -> None:
    pause = RULE.burst_gap + 1
    levels = [-24.0] * 6 + [-200.0] * pause + [-15.0]
    assert spans(levels, [*range(6), 6 + pause], 6 + pause, -15.0) == [(6 + pause, 6 + pause)]
    levels = [-24.0] * 6 + [-200.0] * (pause - 1) + [-15.0]
    assert spans(levels, [*range(6), 5 + pause], 5 + pause, -15.0) == [
        (0, 6),
        (5 + pause, 5 + pause),
    ]


def test_bursts_chain_back_one_by_one() -> None:
    unit = [-25.0] * 4 + [-200.0] * 10
    levels = unit * 3 + [-15.0]
    voiced = [i for i, v in enumerate(levels) if v > -100]
    assert spans(levels, voiced, 42, -15.0) == [(0, 4), (14, 18), (28, 32), (42, 42)]


def test_the_floors_peak_leaves_out_bursts_and_speech() -> None:
    frame = 240
    x = np.full(frame * 20, 0.001, np.float32)  # -60 dBFS
    x[frame * 5 : frame * 6] = 0.2  # a burst in the window
    assert floor_peak(x, frame, 20, 50) == pytest.approx(0.001)
    assert floor_peak(np.zeros(frame * 20, np.float32), frame, 20, 50) == 0.0


def test_speech_runs_decide_alike_in_any_chunking() -> None:
    # the onset rule looks back over frames a chunk may have split from the run
    case = level_syllable()
    vad = VadConfig()
    x = _to_vad_rate(case.audio, RATE)
    n = x.size // vad.frame_len
    flags, levels = _classify(x[: n * vad.frame_len].reshape(n, -1), vad, None)
    whole = SpeechRuns(vad).push(flags, levels)
    for chunk in (1, 2, 7, 10):
        runs = SpeechRuns(vad)
        got = [
            s
            for i in range(0, n, chunk)
            for s in runs.push(flags[i : i + chunk], levels[i : i + chunk])
        ]
        assert _merged(got) == _merged(whole)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in spans:
        if out and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_case_has_its_true_onset_within_5_ms_and_no_phantom(case) -> None:  # type: ignore[no-untyped-def]
    got = measure_reply(case.audio, RATE, speech_end_s=None).onset_s
    if case.onset_s is None:
        assert got is None
    else:
        assert got is not None and abs(got - case.onset_s) <= 0.005


def test_recordings_made_before_the_onset_rule_are_re_measured_as_they_were() -> None:
    # recorded settings with the run rule's fields but not the onset rule's
    recorded = dict(vars(VadConfig()))
    for key in ("onset_floor_db", "floor_ms", "burst_gap_ms", "burst_db", "edge_above_floor"):
        del recorded[key]
    old = VadConfig(**{**BEFORE_RUN_RULE, **recorded})
    assert old.onset_rule is None and not old.edge_above_floor
    case = level_syllable()
    got = measure_reply(case.audio, RATE, speech_end_s=None, vad=old).onset_s
    assert case.onset_s is not None and got is not None
    assert got - case.onset_s == pytest.approx(0.1461, abs=0.001)  # the next run's onset


def test_the_onset_rule_is_recorded_with_the_session_settings() -> None:
    described = vars(VadConfig())
    assert described["onset_floor_db"] > 0 and described["edge_above_floor"] is True
    assert VadConfig(**{**BEFORE_RUN_RULE, **described}) == VadConfig()
    assert replace(VadConfig(), onset_floor_db=0.0).onset_rule is None
    assert isinstance(VadConfig().onset_rule, OnsetRule)


def test_a_negative_window_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="burst_gap_ms"):
        VadConfig(burst_gap_ms=-10)


@pytest.mark.parametrize("coded", [False, True], ids=["plain", "opus"])
def test_steady_noise_alone_never_makes_a_reply(coded: bool) -> None:
    # -30..-50 dBFS in 1 dB steps, two seeds each
    for level in np.arange(-30.0, -51.0, -1.0):
        for seed in (1, 2):
            x = noise(float(level), 3.0, seed)
            x = opus(x) if coded else x
            assert measure_reply(x, RATE, speech_end_s=None).onset_s is None, (level, seed)


@pytest.mark.parametrize("pause_s", [0.05, 0.1, 0.2, 0.3])
def test_a_breath_before_a_word_in_digital_silence_stays_out_of_the_onset(pause_s: float) -> None:
    breath = clip("librivox-0930")[round(0.005 * RATE) : round(0.09 * RATE)]  # -41..-44 dBFS
    word = clip("goforward")[round(WORD_STARTS["goforward"] * RATE) :]
    silence = np.zeros(round(pause_s * RATE), np.float32)
    x = np.concatenate((np.zeros(RATE // 2, np.float32), breath, silence, word))
    word_s = 0.5 + (breath.size + silence.size) / RATE
    for y, word_at in ((x, word_s), (opus(x), word_s + OPUS_DELAY_S)):
        got = measure_reply(y, RATE, speech_end_s=None).onset_s
        assert got == pytest.approx(heard_onset_s(y, word_at), abs=1e-9)
