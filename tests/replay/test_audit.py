"""replay finds timing problems in a recording: sends late against the schedule, and a reply
whose re-measurement from output.wav disagrees with what the session decided."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from duplexsim.core.bundle import BundleMeta, SampleRef
from duplexsim.replay.audit import audit_bundle
from tests.helpers.signals import voiced_signal, write_wav

RATE = 16000


def bundle(
    tmp_path: Path,
    late_ms: float,
    onset_s: float | None,
    *,
    late_frame: int = 50,
    window: dict[str, float | None] | None = None,
    capabilities: dict[str, object] | None = None,
    extra: dict[str, object] | None = None,
    answered: bool = False,
) -> tuple[Path, BundleMeta]:
    """A recorded session: 100 frames sent, frame ``late_frame`` ``late_ms`` late; a reply at
    1.5-2.5 s; ``window``: the latency window's stalls as the session recorded them;
    ``answered``: each frame answered by one output frame 0.5 ms after it left (recorded)."""
    folder = tmp_path / "sessions" / "s0"
    out = np.zeros(4 * RATE, np.float32)
    out[round(1.5 * RATE) : round(2.5 * RATE)] = voiced_signal(1.0)
    write_wav(folder / "output.wav", out)
    events = [{"t": 0.0, "dir": "local", "kind": "start", "frame_ms": 20, "output_rate": RATE}]
    for n in range(100):
        t = n * 0.02 + (late_ms / 1000 if n == late_frame else 0.0001)
        events.append({"t": t, "dir": "send", "kind": "audio", "n": n, "due": n * 0.02, "woke": t})
        if answered:
            silent = not 1.5 <= n * 0.02 < 2.5
            placed = n * 0.02 if silent else t + 0.0005
            events.append({"t": t + 0.0005, "dir": "recv", "kind": "audio", "samples": 320,
                           "placed_s": placed, "offset_s": None, "silent": silent})  # fmt: skip
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    meta = BundleMeta(
        sample=SampleRef("s0", context_turn_start_s=0.0),
        run_id="r",
        model={},
        settings={"vad": {}, "budget": {"send_p99_ms": 5.0, "send_max_ms": 20.0}},
        outcome={
            "status": "ok" if onset_s is not None else "no-reply",
            "timing": {"onset_s": onset_s, "speech_end_s": 1.0},
            **({} if window is None else {"check": {"window": window}}),
        },
        capabilities=capabilities or {},
        extra=extra or {},
    )
    return folder, meta


def test_a_session_that_kept_its_budget_and_agrees_is_clean(tmp_path: Path) -> None:
    audit = audit_bundle(*bundle(tmp_path, 0.1, 1.5))
    assert audit.check.valid and not audit.disagrees(5.0)
    assert audit.onset_diff_ms == pytest.approx(0.0, abs=0.1)


def test_a_late_send_in_the_recording_is_over_budget(tmp_path: Path) -> None:
    audit = audit_bundle(*bundle(tmp_path, 30.0, 1.5))
    assert audit.check.invalid == "send max 30.0 ms > 20 ms"


@pytest.mark.parametrize("recorded", [1.45, None])
def test_a_reply_that_re_measures_differently_disagrees(tmp_path: Path, recorded) -> None:
    audit = audit_bundle(*bundle(tmp_path, 0.1, recorded))
    assert audit.remeasured_onset_s == pytest.approx(1.5, abs=0.001)
    assert audit.disagrees(5.0)


def test_the_latency_window_is_checked_from_the_sends_and_the_recorded_stalls(
    tmp_path: Path,
) -> None:
    stalls = {"send_ms": 0.0, "loop_stall_ms": 1.0, "server_stall_ms": None}
    # frame 60 (1.2 s) lies between the speech end (1.0 s) and the onset (1.5 s)
    late = audit_bundle(*bundle(tmp_path / "a", 4.5, 1.5, late_frame=60, window=stalls))
    assert late.check.invalid == "latency window 5.5 ms > 5 ms (send 4.5, loop 1.0)"
    # the same late send before the speech end does not touch the latency
    early = audit_bundle(*bundle(tmp_path / "b", 4.5, 1.5, late_frame=20, window=stalls))
    assert early.check.valid and early.check.latency_bound_ms == pytest.approx(1.1)
    served = {**stalls, "server_stall_ms": 6.0}
    assert not audit_bundle(*bundle(tmp_path / "c", 0.1, 1.5, window=served)).check.valid
    # recorded before the window was checked: no window to audit
    assert audit_bundle(*bundle(tmp_path / "d", 0.1, 1.5)).check.window is None


def test_a_model_that_answers_each_frame_is_audited_by_the_frame_its_onset_answers(
    tmp_path: Path,
) -> None:
    stalls = {"send_ms": 0.0, "loop_stall_ms": 1.0, "server_stall_ms": 0.0}
    caps = {"answers_each_frame": True}
    # frame 60 (1.2 s), inside the window, 4.5 ms late: it left before frame 75, whose answer
    # holds the onset and which left on time; the session judged it so, and so does replay
    kw: dict[str, Any] = {"window": stalls, "capabilities": caps, "answered": True}
    inside = audit_bundle(*bundle(tmp_path / "a", 4.5, 1.5006, late_frame=60, **kw))
    assert inside.check.valid and inside.check.window is not None
    assert inside.check.window.send_ms == pytest.approx(0.1)
    # the frame the onset answers, late: the reply waited on it
    onset = audit_bundle(*bundle(tmp_path / "b", 4.5, 1.505, late_frame=75, **kw))
    over = "latency window 5.5 ms > 5 ms (send 4.5, loop 1.0, model server 0.0)"
    assert onset.check.invalid == over
    # recorded before models declared it: every send in the window counts, as it did then
    old = bundle(tmp_path / "c", 4.5, 1.5006, late_frame=60, window=stalls, answered=True)
    assert audit_bundle(*old).check.invalid == over
    # a model served elsewhere (no stalls of its server recorded): the whole window, as judged
    remote = {**stalls, "server_stall_ms": None}
    elsewhere = bundle(tmp_path / "e", 4.5, 1.5006, late_frame=60, **{**kw, "window": remote})
    assert (
        audit_bundle(*elsewhere).check.invalid
        == "latency window 5.5 ms > 5 ms (send 4.5, loop 1.0)"
    )
    # a record that does not say what it received (no sizes): nothing answers, all sends count
    folder, meta = bundle(tmp_path / "d", 4.5, 1.5006, late_frame=60, **kw)
    rows = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    for row in rows:
        if row["dir"] == "recv":
            del row["samples"]
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in rows))
    assert not audit_bundle(folder, meta).check.valid


def test_a_late_send_outside_the_window_spoils_only_a_session_timed_throughout(
    tmp_path: Path,
) -> None:
    stalls = {"send_ms": 0.0, "loop_stall_ms": 0.0, "server_stall_ms": None}
    plain = audit_bundle(*bundle(tmp_path / "a", 30.0, 1.5, late_frame=20, window=stalls))
    assert plain.check.valid and plain.check.unpaced == "send max 30.0 ms > 20 ms"
    reacted = {"partner": [{"kind": "interrupt"}]}
    partner = bundle(tmp_path / "b", 30.0, 1.5, late_frame=20, window=stalls, extra=reacted)
    assert audit_bundle(*partner).check.invalid == "send max 30.0 ms > 20 ms"


@pytest.mark.parametrize(("declared", "kept"), [(250.0, True), (None, False), ("x", False)])
def test_fidelity_is_judged_by_the_receivers_recorded_tolerance(
    tmp_path: Path, declared: object, kept: bool
) -> None:
    caps = {} if declared is None else {"input_jitter_ms": declared}
    audit = audit_bundle(*bundle(tmp_path, 75.0, 1.5, late_frame=20, capabilities=caps))
    # undeclared (or not a number): 60 ms, the one limit such a bundle was judged by
    assert audit.check.faithful is kept
    if not kept:
        assert audit.check.unfaithful == "a frame 75.0 ms late > 60 ms"
