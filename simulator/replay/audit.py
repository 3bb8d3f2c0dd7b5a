"""What a recorded session's own files say about its timing: its sends against the schedule, and
its reply re-measured from output.wav against what the session decided.

A session can be replayed faithfully and still have been timed badly (its sends late, its loop
behind): ``audit_bundle`` checks the recording itself, so ``replay`` reports those sessions too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from duplexsim.core.audio import read_audio
from duplexsim.core.bundle import MAX_SESSION_S, OUTPUT, BundleMeta, number_problem
from duplexsim.core.errors import InputError, RunFolderError
from duplexsim.core.records import EventRecords
from duplexsim.core.runfolder import RunFolder
from duplexsim.core.timing import (
    LatencyWindow,
    ReplyTiming,
    TimingBudget,
    TimingCheck,
    answered_send,
    check_timing,
    measure_reply,
    window_send_s,
)
from duplexsim.core.vad import BEFORE_RUN_RULE, VadConfig

__all__ = ["TimingAudit", "audit_bundle"]


@dataclass(frozen=True)
class TimingAudit:
    check: TimingCheck  # the recorded sends (against the schedule) and lags, against the budget
    recorded_onset_s: float | None
    remeasured_onset_s: float | None

    @property
    def onset_diff_ms(self) -> float | None:
        a, b = self.recorded_onset_s, self.remeasured_onset_s
        return None if a is None or b is None else (b - a) * 1000.0

    def disagrees(self, tolerance_ms: float) -> bool:
        """The re-measurement finds a reply where the session found none, or the reverse, or
        puts its onset more than ``tolerance_ms`` away."""
        if (self.recorded_onset_s is None) != (self.remeasured_onset_s is None):
            return True
        diff = self.onset_diff_ms
        return diff is not None and abs(diff) > tolerance_ms


def audit_bundle(bundle: Path, meta: BundleMeta, run: RunFolder | None = None) -> TimingAudit:
    """``run``: how the bundle's files are read (None: from inside the bundle itself)."""
    run = run or RunFolder(bundle)
    settings = meta.settings
    try:
        budget = TimingBudget(**settings.get("budget", {}))
        vad = VadConfig(**{**BEFORE_RUN_RULE, **settings.get("vad", {})})
    except (TypeError, ValueError) as exc:
        raise RunFolderError(f"{bundle}: unusable recorded settings ({exc})") from None
    outcome = meta.outcome
    timing = outcome.get("timing") or {}
    recorded = timing.get("onset_s") if outcome.get("status") == "ok" else None
    span = _recorded_window(outcome, recorded, meta.capabilities)
    # judged as the session was: by its window, or throughout where a partner reacted or the
    # session was recorded before the window was checked
    reacted = bool(meta.extra.get("partner") or meta.extra.get("partner_model"))
    throughout = reacted or (recorded is not None and span is None)
    declared: Any = meta.capabilities.get("input_jitter_ms")
    # 60 ms: recorded before the receiver's tolerance was declared, judged so then
    ok = number_problem(declared, 0.001, 60_000.0) is None
    receiver_ms = float(declared) if ok else 60.0
    check = _send_check(run, bundle, budget, span, receiver_ms, throughout)
    remeasured = None
    if outcome.get("status") != "failed":
        try:
            path = run.file(bundle, OUTPUT)
            if path is None:
                raise RunFolderError(f"{bundle / OUTPUT}: not recorded")
            heard = read_audio(path, max_duration_s=MAX_SESSION_S)
        except InputError as exc:
            raise RunFolderError(f"{bundle}: cannot read {OUTPUT} ({exc})") from None
        again = measure_reply(
            heard.samples,
            heard.sample_rate,
            speech_end_s=timing.get("speech_end_s"),
            window_start_s=meta.sample.context_turn_start_s or 0.0,
            vad=vad,
        )
        remeasured = again.onset_s
    return TimingAudit(check, recorded, remeasured)


@dataclass(frozen=True)
class _Span:
    """The latency window as the session recorded it: its reply's timing, and the stalls it
    recorded in it (the files cannot show a stall; the sends they can)."""

    timing: ReplyTiming
    loop_stall_ms: float | None  # None: the session's loop recorded no stalls
    server_stall_ms: float | None
    answers_each_frame: bool  # the model answers each input frame as it arrives (capabilities)


def _recorded_window(
    outcome: Mapping[str, Any], onset_s: Any, capabilities: Mapping[str, Any]
) -> _Span | None:
    timing = outcome.get("timing") or {}
    window = (outcome.get("check") or {}).get("window")
    if not isinstance(onset_s, int | float) or not isinstance(window, dict):
        return None  # no reply, or recorded before the window was checked
    end = timing.get("speech_end_s")
    server = window.get("server_stall_ms")
    loop = window.get("loop_stall_ms", 0.0)  # recorded before it could be unknown: a figure
    return _Span(
        timing=ReplyTiming(
            speech_end_s=float(end) if isinstance(end, int | float) else None,
            onset_s=float(onset_s),
            offset_s=None,
            latency_s=None,
            duration_s=None,
            overlap_s=0.0,
        ),
        loop_stall_ms=float(loop) if isinstance(loop, int | float) else None,
        server_stall_ms=float(server) if isinstance(server, int | float) else None,
        # as the session judged it: by the frame its onset answered where a fake the run started
        # (its stalls recorded) answers each frame; recorded before that was declared, by every
        # send in the window
        answers_each_frame=capabilities.get("answers_each_frame") is True and server is not None,
    )


def _send_check(
    run: RunFolder,
    bundle: Path,
    budget: TimingBudget,
    span: _Span | None,
    receiver_ms: float,
    throughout: bool,
) -> TimingCheck:
    """Each recorded send against the schedule (frame n due at n frames), not against the due
    time the session wrote beside it: a session whose clock or schedule went wrong shows here.
    The latency window's sends are taken from the files too, its stalls from the record."""
    frame_s, rate = 0.02, 0
    sent = EventRecords()  # the sends and receives as recorded, due on the schedule
    for event in run.strict_events(bundle):
        if event.get("kind") == "start":
            frame_s = float(event.get("frame_ms", 20)) / 1000.0
            rate = int(event.get("output_rate") or 0)
        elif event.get("dir") == "send" and "n" in event:
            n = int(event["n"])
            woke = float(event.get("woke", event["t"]))
            sent.add_send(n, float(event["t"]), n * frame_s, 0, woke)
        elif event.get("dir") == "recv" and event.get("kind") == "audio" and "samples" in event:
            placed = float(event.get("placed_s", event["t"]))
            silent = bool(event.get("silent"))
            sent.add_received(float(event["t"]), int(event["samples"]), placed, None, silent)
    window = None
    if span is not None:
        answered = None
        if span.answers_each_frame and rate > 0:
            chunk = sent.chunk_of(span.timing.onset_s or 0.0, rate)
            frame_len = round(rate * frame_s)
            answered = answered_send(
                sent.send_n, sent.send_t, sent.recv_samples, sent.recv_t, chunk, frame_len
            )
        send_s = window_send_s(sent.send_due, sent.send_t, span.timing, frame_s, answered)
        window = LatencyWindow(
            send_ms=round(1000.0 * send_s, 3),
            loop_stall_ms=span.loop_stall_ms,
            server_stall_ms=span.server_stall_ms,
        )
    return check_timing(
        sent.send_errors(), sent.loop_lags(), 0.0, frame_s, budget, window,
        receiver_late_ms=float(receiver_ms), throughout=throughout,
    )  # fmt: skip
