"""Timing metrics of one session, computed from the audio on the timeline (pure)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.turns import ReplyWindow
from duplexsim.core.vad import VadConfig, frame_flags, refine_bounds, speech_bounds

__all__ = [
    "LatencyWindow",
    "ReplyTiming",
    "SendStats",
    "TimingBudget",
    "TimingCheck",
    "answered_send",
    "check_timing",
    "fidelity_lost",
    "input_late_limit_ms",
    "latency_window",
    "measure_reply",
    "reply_timing",
    "send_stats",
    "sorted_percentile",
    "speech_end",
    "window_send_s",
]


@dataclass(frozen=True)
class ReplyTiming:
    speech_end_s: float | None  # end of Speaker A's last voiced frame
    onset_s: float | None  # model speech onset on the timeline
    offset_s: float | None  # end of the model's last voiced frame in the reply
    latency_s: float | None  # onset - speech_end; negative means the model talked over A
    duration_s: float | None
    overlap_s: float  # time the model talked while Speaker A was still speaking


@dataclass(frozen=True)
class SendStats:
    frames: int
    p50_ms: float
    p99_ms: float
    max_ms: float


@dataclass(frozen=True)
class TimingBudget:
    """What our own side may cost a session before its timing cannot be vouched for."""

    send_p99_ms: float = 5.0  # send-time error (the send returned this long after it was due)
    send_max_ms: float = 20.0
    loop_lag_max_ms: float = 20.0  # the loop woke the sender this late
    # an event handled this long after its bytes were read, beyond the frame it waits for
    recv_lag_max_ms: float = 20.0
    # what the latency itself may owe to the machine: the sends between the user's speech end
    # and the reply onset, the loop's stall when the reply was read, and a co-located model
    # server's stalls, all added up
    latency_ms: float = 5.0
    # input fidelity: a frame this late (or the send max, if larger) is a gap and a burst a
    # receiver hears; below it the model heard the user's audio as a person's client sends it.
    # None: what the model's own receiver absorbs (``Capabilities.input_jitter_ms``)
    input_late_ms: float | None = None

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value is not None and not value > 0:
                raise ValueError(f"timing budget {name} must be > 0")


@dataclass(frozen=True)
class LatencyWindow:
    """What the machine may have added to one reply's latency, in ms: the latest send due from
    the frame holding the user's speech end to the reply's onset, and the longest stall just
    before the onset of our loop (the reply's bytes waited that long to be read; None: not
    known, a loop that does not record its stalls) and of a fake model server on this machine
    (None: not one of ours). Their sum bounds the error."""

    send_ms: float
    loop_stall_ms: float | None
    server_stall_ms: float | None = None

    @property
    def known(self) -> bool:
        """Every part of this machine's share is known (our loop's stalls were recorded)."""
        return self.loop_stall_ms is not None

    @property
    def bound_ms(self) -> float | None:
        """The sum of the parts; None where our loop's share is not known."""
        if self.loop_stall_ms is None:
            return None
        return self.send_ms + self.loop_stall_ms + (self.server_stall_ms or 0.0)

    def describe(self) -> str:
        loop = "not recorded" if self.loop_stall_ms is None else f"{self.loop_stall_ms:.1f}"
        parts = [f"send {self.send_ms:.1f}", f"loop {loop}"]
        if self.server_stall_ms is not None:
            parts.append(f"model server {self.server_stall_ms:.1f}")
        return ", ".join(parts)


@dataclass(frozen=True)
class TimingCheck:
    """A session's own timing against the budget: valid, or the first figure over it."""

    send: SendStats
    loop_lag_max_ms: float
    recv_lag_max_ms: float
    # None: valid (measurement precision: its timed figures can be vouched for). A reply's
    # latency is spoilt only by what its window holds; a session whose timed events span it
    # (a partner that reacts) by any figure over the budget. Losing fidelity loses it too.
    invalid: str | None
    window: LatencyWindow | None = None  # what the machine may have added to the latency
    # input fidelity lost: a frame so late that the model did not hear the user's audio as a
    # person's client sends it (None: kept)
    unfaithful: str | None = None
    # the first whole-session figure over the budget (send p99 or max, loop or receive lag):
    # the machine did not keep pace somewhere in the session (None: it did). Admission learns
    # from it; it spoils a latency only inside the latency window.
    unpaced: str | None = None

    @property
    def paced(self) -> bool:
        """Every frame and event of the session kept the budget."""
        return self.unpaced is None

    @property
    def faithful(self) -> bool:
        """The model heard Speaker A's audio as a real client sends it: every metric counts it."""
        return self.unfaithful is None

    @property
    def latency_bound_ms(self) -> float | None:
        """The window's bound; None: no reply to time, or our loop's share not known."""
        bound = None if self.window is None else self.window.bound_ms
        return None if bound is None else round(bound, 3)

    @property
    def valid(self) -> bool:
        return self.invalid is None


def check_timing(
    send_errors_s: Sequence[float],
    loop_lags_s: Sequence[float],
    recv_lag_max_s: float,
    frame_s: float,
    budget: TimingBudget,
    window: LatencyWindow | None = None,
    *,
    receiver_late_ms: float = 60.0,
    throughout: bool = False,
) -> TimingCheck:
    """Send-time error, loop lag and receive lag of one session, and what the machine may have
    added to its reply's latency, against the budget (receive lag counts beyond the one frame
    an event may wait to be drained). ``receiver_late_ms``: the lateness of a frame the model's
    receiver absorbs (fidelity); ``throughout``: the session's timed events span it (a partner
    that reacts), so every figure gates its precision, not only the latency window's."""
    send = send_stats(send_errors_s)
    loop_ms = 1000.0 * max(loop_lags_s, default=0.0)
    recv_ms = 1000.0 * max(recv_lag_max_s - frame_s, 0.0)
    checks = [
        ("send p99", send.p99_ms, budget.send_p99_ms),
        ("send max", send.max_ms, budget.send_max_ms),
        ("loop lag", loop_ms, budget.loop_lag_max_ms),
        ("receive lag", recv_ms, budget.recv_lag_max_ms),
    ]
    over = [f"{name} {got:.1f} ms > {limit:g} ms" for name, got, limit in checks if got > limit]
    unpaced = over[0] if over else None
    unfaithful = fidelity_lost(send, budget, receiver_late_ms)
    imprecise = []
    if window is not None:
        bound = window.bound_ms
        if bound is None:
            imprecise.append(f"latency window not known ({window.describe()})")
        elif bound > budget.latency_ms:
            imprecise.append(
                f"latency window {bound:.1f} ms > {budget.latency_ms:g} ms ({window.describe()})"
            )
    if throughout and unpaced is not None:
        imprecise.append(unpaced)
    if unfaithful is not None:
        imprecise.append(f"input fidelity lost ({unfaithful})")
    return TimingCheck(
        send,
        round(loop_ms, 3),
        round(recv_ms, 3),
        imprecise[0] if imprecise else None,
        window,
        unfaithful,
        unpaced,
    )


def window_send_s(
    send_due_s: Sequence[float],
    send_t_s: Sequence[float],
    timing: ReplyTiming,
    frame_s: float,
    answered: int | None = None,
) -> float:
    """How late the latest send was among those due from the frame holding the user's speech end
    to the reply's onset (a model hears the end of the turn, and the silence after it, only as
    they arrive; when it decided is its own); 0.0 without a reply. ``answered``: the send whose
    answer holds the onset, for a model that answers each frame as it arrives and decides on
    its input's media time (``answered_send``): only that frame's lateness can have moved the
    reply (the frames before it left before it, the ones after came after the reply)."""
    onset = timing.onset_s
    if onset is None:
        return 0.0
    if answered is not None:
        return max(0.0, send_t_s[answered] - send_due_s[answered])
    end = onset if timing.speech_end_s is None else timing.speech_end_s
    lo = min(end, onset) - frame_s
    late = (t - due for t, due in zip(send_t_s, send_due_s, strict=True) if lo <= due <= onset)
    return max(0.0, max(late, default=0.0))  # no send in the window (sending had stopped): 0


def answered_send(
    send_n: Sequence[int],
    send_t_s: Sequence[float],
    recv_samples: Sequence[int],
    recv_t_s: Sequence[float],
    chunk: int | None,
    frame_len: int,
) -> int | None:
    """The send (its index) of the input frame that received chunk ``chunk`` answers, for a
    model that answers each input frame with one output frame of ``frame_len`` samples: the
    output before the chunk, in frames. None where there is no such chunk, that frame was not
    sent, or it was sent after its answer came (the model did not answer frame by frame)."""
    if chunk is None or not 0 <= chunk < len(recv_t_s) or frame_len <= 0:
        return None
    frame = sum(recv_samples[:chunk]) // frame_len
    i = bisect.bisect_left(send_n, frame)
    if i == len(send_n) or send_n[i] != frame or send_t_s[i] > recv_t_s[chunk]:
        return None
    return i


def latency_window(
    send_s: float, loop_stall_s: float | None, server_stall_s: float | None
) -> LatencyWindow:
    """The window from its parts in seconds (``window_send_s``, the stall of our loop as the
    onset's chunk was read (None: not recorded), a co-located model server's as it left it),
    in ms."""
    return LatencyWindow(
        send_ms=round(1000.0 * send_s, 3),
        loop_stall_ms=None if loop_stall_s is None else round(1000.0 * loop_stall_s, 3),
        server_stall_ms=None if server_stall_s is None else round(1000.0 * server_stall_s, 3),
    )


def input_late_limit_ms(budget: TimingBudget, receiver_late_ms: float = 60.0) -> float:
    """How late a frame may be before the model did not hear the stream as sent: the budget's
    fidelity limit where it sets one, else what the model's receiver absorbs; never tighter
    than the budget's send max."""
    limit = receiver_late_ms if budget.input_late_ms is None else budget.input_late_ms
    return max(limit, budget.send_max_ms)


def fidelity_lost(
    send: SendStats, budget: TimingBudget, receiver_late_ms: float = 60.0
) -> str | None:
    """Why the stream the model received was not the one a person's client sends (None: it
    was): a frame later than the limit leaves a gap, then a burst, on the receiving side."""
    limit = input_late_limit_ms(budget, receiver_late_ms)
    if send.max_ms > limit:
        return f"a frame {send.max_ms:.1f} ms late > {limit:g} ms"
    return None


def speech_end(
    context: NDArray[np.float32], rate: int, vad: VadConfig | None = None
) -> float | None:
    """End of the last voiced frame of the context (not the end of the clip)."""
    bounds = speech_bounds(context, rate, vad)
    return None if bounds is None else bounds[1]


def measure_reply(
    output: NDArray[np.float32],
    rate: int,
    *,
    speech_end_s: float | None,
    window_start_s: float = 0.0,
    window_end_s: float | None = None,
    vad: VadConfig | None = None,
) -> ReplyTiming:
    """Onset, offset, latency and overlap of the model's reply: its speech frames that end after
    ``window_start_s``, up to ``window_end_s``. The VAD runs over the track from its start, as the
    session's streaming VAD did, so a re-measurement decides as the session did."""
    cfg = vad or VadConfig()
    hi = output.size if window_end_s is None else min(output.size, round(window_end_s * rate))
    flags = frame_flags(output[: max(hi, 0)], rate, cfg)
    first = ReplyWindow(window_start_s).first_frame(cfg.frame_s)
    voiced = np.flatnonzero(flags[first:]) + first
    if voiced.size == 0:
        return ReplyTiming(speech_end_s, None, None, None, None, 0.0)
    return reply_timing(output, rate, int(voiced[0]), int(voiced[-1]) + 1, speech_end_s, cfg)


def reply_timing(
    output: NDArray[np.float32],
    rate: int,
    first: int,
    end: int,
    speech_end_s: float | None,
    vad: VadConfig,
) -> ReplyTiming:
    """The timing of a reply whose speech spans VAD frames [first, end) of ``output``."""
    onset, offset = refine_bounds(output, rate, first, end, vad)
    latency = None if speech_end_s is None else onset - speech_end_s
    overlap = 0.0 if speech_end_s is None else max(0.0, min(speech_end_s, offset) - onset)
    return ReplyTiming(speech_end_s, onset, offset, latency, offset - onset, overlap)


def send_stats(errors_s: Sequence[float]) -> SendStats:
    """Percentiles of (actual send instant - due instant), in milliseconds."""
    if not errors_s:
        return SendStats(0, 0.0, 0.0, 0.0)
    ms = np.sort(np.asarray(errors_s, dtype=np.float64)) * 1000.0
    return SendStats(len(ms), sorted_percentile(ms, 50), sorted_percentile(ms, 99), float(ms[-1]))


def sorted_percentile(ascending: NDArray[np.float64], q: float) -> float:
    """``np.percentile(values, q)`` (linear) of values already sorted. Sessions end on the pacing
    loop: np.percentile costs 1-3 ms a call there, and imports numpy.ma (10-25 ms) on its first."""
    pos = q / 100.0 * (ascending.size - 1)
    lo = int(pos)
    hi = min(lo + 1, ascending.size - 1)
    a, b, t = ascending[lo], ascending[hi], pos - lo
    # numpy's lerp: from the nearer end, so the result is exactly np.percentile's
    return float(b - (b - a) * (1.0 - t) if t >= 0.5 else a + (b - a) * t)
