"""The run rule on raw frame flags, exact to the frame: a run counts once it has lasted
``min_speech_ms`` and its levels have spread by ``min_spread_db``; up to ``max_gap_ms`` of
unvoiced frames (webrtcvad drops loud frames of speech, up to four at a time) do not end it.
The onset rule that comes after it (what a run's onset goes back over) is off here: its own
tests are in test_onsets.py."""

from __future__ import annotations

import numpy as np
import pytest

from duplexsim.core.vad import BEFORE_RUN_RULE, SpeechRuns, VadConfig

# Frame levels (dBFS) at the onset of a delayed-echo reply heard through Opus (the synthetic voice
# starts on a syllable's quiet rise), where webrtcvad calls frame 8 unvoiced though it is as loud
# as its neighbours, and every frame from 24 on.
LEVELS = [-99, -39, -36, -33, -34, -33, -32, -31, -28, -29, -29, -28, -26, -28, -28, -29]
LEVELS += [-26, -30, -31, -32, -30, -34, -35, -36, -34, -37]
DROPOUT = 8
END = 24  # the run's end


def runs(**kw: object) -> VadConfig:
    """The run rule alone (no onset rule after it)."""
    return VadConfig(onset_floor_db=0.0, **kw)  # type: ignore[arg-type]


def flags(*unvoiced: int) -> np.ndarray:
    out = np.zeros(len(LEVELS), dtype=bool)
    out[1:END] = True
    out[list(unvoiced)] = False
    return out


def speech(cfg: VadConfig, f: np.ndarray, chunk: int = 100) -> list[tuple[int, int]]:
    runs = SpeechRuns(cfg)
    levels = np.array(LEVELS, dtype=np.float64)
    spans = [
        span
        for i in range(0, f.size, chunk)
        for span in runs.push(f[i : i + chunk], levels[i : i + chunk])
    ]
    merged: list[tuple[int, int]] = []
    for lo, hi in spans:
        if merged and merged[-1][1] == lo:
            merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged


@pytest.mark.parametrize("chunk", [1, 3, 100])
def test_a_dropout_before_the_levels_spread_keeps_the_run_from_its_first_frame(chunk: int) -> None:
    got = speech(runs(), flags(DROPOUT), chunk)
    assert got == [(1, END)]  # the dropped frame is inside the run: speech too


def test_without_gaps_the_run_starts_at_its_first_frame() -> None:
    assert speech(runs(), flags()) == [(1, END)]


def test_before_the_gap_rule_a_dropout_moved_the_onset_past_it() -> None:
    # what the session measured: speech from the frame after the dropout, 80 ms late (the run
    # before it was dropped: its levels had spread 3 dB)
    old = runs(max_gap_ms=0)
    assert speech(old, flags(DROPOUT)) == [(DROPOUT + 1, END)]
    # recordings that lack the field are re-measured as they were measured
    assert VadConfig(**{**BEFORE_RUN_RULE, "min_spread_db": 6.0}).max_gap_ms == 0


def test_a_gap_longer_than_max_gap_ends_the_run() -> None:
    gap = [*range(DROPOUT, DROPOUT + 6)]  # 60 ms > 50 ms
    # the run before it never spread: dropped; the one after it counts from its own start
    assert speech(runs(), flags(*gap)) == [(DROPOUT + 6, END)]
    assert speech(runs(max_gap_ms=60), flags(*gap)) == [(1, END)]


def test_gap_frames_do_not_count_towards_the_minimum_length() -> None:
    f = np.zeros(len(LEVELS), dtype=bool)
    f[[1, 3]] = True  # two voiced frames around a gap: 20 ms of voice, not 30
    assert speech(runs(min_spread_db=0.0), f) == []
    f[5] = True
    assert speech(runs(min_spread_db=0.0), f) == [(1, 6)]


def test_a_negative_gap_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="max_gap_ms"):
        VadConfig(max_gap_ms=-10)


def test_edges_searched_block_by_block_are_the_edges_of_the_whole_span() -> None:
    """refine_bounds reads from each side only as far as its edge: the same samples as reading
    the whole span (whatever the level, the span's length, and where the edges fall)."""
    from duplexsim.core.vad import VadConfig, refine_bounds

    def whole_span(x: np.ndarray, rate: int, first: int, end: int, cfg: VadConfig):  # type: ignore[no-untyped-def]
        from duplexsim.core.vad import edge_level

        frame = rate * cfg.frame_ms // 1000
        edge = edge_level(x, rate, first, cfg)
        inner = (end, first) if cfg.edge_above_floor else (first + 1, end - 1)
        lo, hi = max(0, (first - 1) * frame), inner[0] * frame
        hits = np.flatnonzero(np.abs(x[lo:hi]) >= edge)
        onset = lo + int(hits[0]) if hits.size else first * frame
        lo, hi = inner[1] * frame, (end + 1) * frame
        hits = np.flatnonzero(np.abs(x[lo:hi]) >= edge)
        offset = lo + int(hits[-1]) + 1 if hits.size else end * frame
        return onset / rate, offset / rate

    rng = np.random.default_rng(7)
    for trial in range(300):
        rate = (16000, 24000)[trial % 2]
        n = int(rng.integers(rate // 10, 6 * rate))
        x = (rng.standard_normal(n) * 10 ** rng.uniform(-4, -1)).astype(np.float32)
        x[rng.integers(0, n, 5)] *= 50  # a few loud samples anywhere
        frames = n // (rate // 100)
        first = int(rng.integers(0, max(1, frames - 1)))
        end = int(rng.integers(first + 1, frames + 2))
        for above in (True, False):
            cfg = VadConfig(edge_above_floor=above, edge_dbfs=float(rng.uniform(-60, -20)))
            assert refine_bounds(x, rate, first, end, cfg) == whole_span(x, rate, first, end, cfg)
