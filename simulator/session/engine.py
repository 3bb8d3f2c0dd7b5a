"""One session: stream the user's audio to one client in real time and capture the reply.

This is the only layer (with the runner) that reads the clock and sleeps, and it reads one clock:
its own (the event loop's by default), handed to the client to stamp arrivals with. A session is
a pipeline of parts, each owning one idea, that ``_Session`` conducts: the user's audio
(``useraudio``), the sender (frames on the absolute schedule, each send timed: ``sender``), the
receive path (``eventpump`` for streaming clients, ``receiver`` handing events on once per
frame, stamped when their bytes were read, so nothing is lost in timing), the pure reply tracker
(``core.replytracker``: the timeline, the VAD, the detector and the reply window; its decision
is the session's: the same speech frames give the status, the reply's end and its timing), and
the timing check (``core.timing``, with ``latency``: what the machine may have added to the
latency).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.base import DuplexClient
from duplexsim.core.conversation import UserTurn
from duplexsim.core.errors import Disconnected, ProtocolError, RateLimited, SessionError
from duplexsim.core.intake import kept_error
from duplexsim.core.records import EventRecords, merged_log
from duplexsim.core.redact import redact
from duplexsim.core.replytracker import ReplyTracker
from duplexsim.core.retry import ProviderLimit
from duplexsim.core.stalls import StallLog
from duplexsim.core.timing import (
    LatencyWindow,
    ReplyTiming,
    SendStats,
    TimingBudget,
    TimingCheck,
    check_timing,
    speech_end,
)
from duplexsim.core.turns import EndReason, TurnSettings
from duplexsim.core.usage import Usage
from duplexsim.core.vad import BEFORE_RUN_RULE, VadConfig
from duplexsim.session.eventloop import stall_log
from duplexsim.session.eventpump import EventPump
from duplexsim.session.latency import reply_window
from duplexsim.session.receiver import Receiver
from duplexsim.session.sender import Sender
from duplexsim.session.useraudio import (
    CONTEXT_RATE,
    FixedContext,
    LiveInput,
    LiveSource,
    PartnerSide,
    UserAudio,
)

__all__ = [
    "CONTEXT_RATE",
    "LiveInput",
    "LiveSource",
    "SessionOutcome",
    "SessionSettings",
    "SessionTap",
    "run_session",
]


class SessionTap(Protocol):
    """Observes a session as it runs (``run --monitor``, ``talk``). Called on the session's loop:
    each call must return at once (hand the audio to another thread)."""

    def on_start(self, t0: float, input_rate: int, output_rate: int) -> None: ...

    def on_sent(self, samples: NDArray[np.float32], start_s: float) -> None:
        """A frame was sent; it starts at ``start_s`` on the timeline (input rate)."""

    def on_placed(self, samples: NDArray[np.float32], start_s: float) -> None:
        """Model audio was placed at ``start_s`` on the timeline (output rate)."""

    def on_end(self) -> None:
        """The session is over (also after a failure, even one before ``on_start``)."""


@dataclass(frozen=True)
class SessionSettings:
    frame_ms: int | None = None  # None: the client's preferred frame size (20 ms for pcm-ws)
    turns: TurnSettings = field(default_factory=TurnSettings)
    vad: VadConfig = field(default_factory=VadConfig)
    # silence on the wire this long (continuous-output protocols), or no answer to pings this
    # long (WebSocket protocols): the server is stalled
    stall_timeout_s: float = 5.0
    deadline_margin_s: float = 10.0
    # an audible chunk at most this late after the audible one before it continues it (the gap
    # is the transport's, not the model's pause)
    bridge_s: float = 0.1
    budget: TimingBudget = field(default_factory=TimingBudget)

    def deadline_s(self, context_s: float, connect_timeout_s: float) -> float:
        t = self.turns
        return (
            connect_timeout_s
            + context_s
            + t.reply_timeout_s
            + t.max_reply_s
            + t.hangover_s
            + self.deadline_margin_s
        )

    @classmethod
    def from_description(cls, data: dict[str, Any]) -> SessionSettings:
        """The inverse of ``describe``, for replaying a recorded session with its own settings."""
        return cls(
            frame_ms=None if data["frame_ms"] is None else int(data["frame_ms"]),
            turns=TurnSettings(**data["turns"]),
            vad=VadConfig(**{**BEFORE_RUN_RULE, **data["vad"]}),
            stall_timeout_s=float(data["stall_timeout_s"]),
            deadline_margin_s=float(data["deadline_margin_s"]),
            bridge_s=float(data.get("bridge_s", 0.0)),  # recorded before bridging: none
            budget=TimingBudget(**data.get("budget", {})),
        )

    def describe(self) -> dict[str, Any]:
        return {
            "frame_ms": self.frame_ms,
            "turns": vars(self.turns).copy(),
            "vad": vars(self.vad).copy(),
            "stall_timeout_s": self.stall_timeout_s,
            "deadline_margin_s": self.deadline_margin_s,
            "bridge_s": self.bridge_s,
            "budget": vars(self.budget).copy(),
        }


@dataclass
class SessionOutcome:
    status: str  # "ok" | "no-reply" | "failed"
    end_reason: str
    timing: ReplyTiming | None
    send: SendStats
    check: TimingCheck  # our own timing against the budget: can the figures be vouched for
    input_rate: int
    output_rate: int
    sent: NDArray[np.float32]  # everything sent, at input_rate
    output: NDArray[np.float32]  # the model's audio on the timeline, at output_rate
    records: EventRecords
    bytes_sent: int = 0
    bytes_received: int = 0
    error: str | None = None
    truncated: str | None = None  # why the reply was cut short (max-length, deadline, ...)
    retryable: bool = False
    retry_after_s: float | None = None
    wall_s: float = 0.0
    # a partner's session: each user turn and the model's reply to it, the partner's steps, and
    # the model's speech (pauses merged)
    turns: list[dict[str, Any]] = field(default_factory=list)
    partner: list[dict[str, Any]] = field(default_factory=list)
    speech: list[list[float]] = field(default_factory=list)
    # what the session used: the provider's reports, and the seconds measured here
    usage: Usage = field(default_factory=Usage)
    rate_limited: bool = False  # the provider refused it for its rate limits
    # a partner model's session (``run --partner``): its timing (each direction's sends against
    # its schedule; ``check`` holds both), what it was and how it went, and its own events
    partner_check: TimingCheck | None = None
    partner_model: dict[str, Any] = field(default_factory=dict)
    partner_records: EventRecords | None = None

    @functools.cached_property
    def events(self) -> list[dict[str, Any]]:
        """Every event as a dict (built on first use: the runner leaves that to the process
        that writes the bundle); a partner model's audio under ``partner-send`` and
        ``partner-recv``."""
        if self.partner_records is None:
            return self.records.log()
        return merged_log((self.records, ""), (self.partner_records, "partner-"))


class _Session:
    """The conductor: the user's audio goes out through the sender; once per frame the receiver
    hands on what came back, and the reply tracker (fed the media time sent) says whether the
    reply is over. Each part owns its idea; this one only orders them."""

    def __init__(
        self,
        client: DuplexClient,
        user: UserAudio,
        settings: SessionSettings,
        window_start_s: float,
        clock: Callable[[], float],
        tap: SessionTap | None,
    ):
        self.client = client
        self.caps = client.capabilities
        self.user = user
        self.settings = settings
        self.clock = clock
        self.frame_ms = settings.frame_ms or self.caps.frame_ms
        self.frame_len = self.caps.input_rate * self.frame_ms // 1000
        # The hot paths record numbers in columns (no objects for the garbage collector to
        # walk); they become event dicts where the bundle is written.
        self.records = EventRecords()
        self.tracker = ReplyTracker(
            self.caps.output_rate,
            settings.turns,
            settings.vad,
            window_start_s=window_start_s,
            bridge_s=settings.bridge_s,
            continuous=self.caps.continuous_output,
        )
        self.tracker.every_frame = user.listening  # a partner reads it before each frame
        self.partner_events: list[dict[str, Any]] = []
        on_sent = None if tap is None else tap.on_sent
        on_placed = None if tap is None else tap.on_placed
        self.sender = Sender(client, self.frame_ms / 1000.0, clock, self.records, on_sent)
        self.receiver = Receiver(
            client, self.tracker, self.records, self.log,
            max_reply_s=settings.turns.max_reply_s, on_placed=on_placed,
        )  # fmt: skip
        self.turn_frames: int | None = None  # frames sent when the user's turn ended
        self.ended_by: str | None = None  # how streaming stopped when the detector did not say

    @property
    def t0(self) -> float:
        return self.sender.t0

    @property
    def done(self) -> bool:
        """Streaming stopped, or the user has nothing more to say and every reply is over."""
        if self.ended_by is not None:
            return True
        return self.user.finished(self.tracker, self.sender.media_s())

    def start(self) -> None:
        """T0: the timeline starts now (the next whole tick)."""
        self.receiver.t0 = self.receiver.last_rx = self.sender.start()

    def log(self, t: float, direction: str, kind: str, **fields: Any) -> None:
        # every text a server sends (transcripts, error messages) passes here on its way to a file
        for name, value in fields.items():
            if isinstance(value, str):
                fields[name] = redact(value, (self.client.config.api_key,))
        event = {"t": round(t, 6), "dir": direction, "kind": kind, **fields}
        self.records.add_event(t, event)

    async def stream(self) -> None:
        """Frames on the absolute schedule; after each, the events received since, then the
        tracker on the media time sent (so a loaded client still sends its whole schedule)."""
        n = 0
        if self.user.turn_over(0):
            await self._end_turn(0)  # an empty context: the turn is over before it began
        while not self.done:
            if self.user.listening:
                self._listen(n)
            chunk, message = await self.user.frame(n)
            try:
                sent = await self.sender.send(n, chunk, message)
            except SessionError:
                # what the server said before it closed, and why: a close after its reply
                # (websockets' send returns only once the connection is closed) ends it well
                self._drain_events()
                if not self.done:
                    raise
                break
            if self.user.listening:
                await self.user.frame_sent(n)  # a partner model's frame goes right after
            n = self.sender.frames_sent
            if self.turn_frames is None and self.user.turn_over(n):
                await self._end_turn(n)
            self._drain_events()
            self.receiver.check_stall(sent, self.settings.stall_timeout_s)
            self.tracker.tick(self.sender.media_s())
            for turn, reason in self.tracker.ended_turns():
                if self.ended_by is None:
                    more = {"turn": turn} if turn else {}
                    self.log(self.clock() - self.t0, "local", "reply_end", reason=reason, **more)

    def _listen(self, n: int) -> None:
        """The user decides before frame ``n`` is built, from the tracker's decisions; what it
        decided is recorded."""
        due = self.sender.schedule.due
        for event in self.user.listen(self.tracker, due(n), due(n + 1)):
            self.partner_events.append(event)
            self.log(self.clock() - self.t0, "user", "partner", **event)

    async def settle_user(self) -> None:
        """Streaming is over: what the user knows only now (a partner model's utterances), off
        the loop, recorded as its decisions are."""
        for event in await asyncio.to_thread(self.user.settle, self.tracker, self.sender.media_s()):
            self.partner_events.append(event)
            self.log(self.clock() - self.t0, "user", "partner", **event)

    def turn_records(
        self, speech_end_s: float | None, output: NDArray[np.float32]
    ) -> list[dict[str, Any]]:
        """Each user turn and the reply to it, for a user who listens (a partner)."""
        if not self.user.listening:
            return []
        out = []
        for k, turn in enumerate(self.tracker.replies.turns):
            end = speech_end_s if k == 0 else turn.speech_end_s
            out.append(_turn_record(k, turn, self.tracker.timing(end, output, k)))
        return out

    async def _end_turn(self, frames: int) -> None:
        """The user's turn is over after ``frames`` frames."""
        self.turn_frames = frames
        end_s = self.sender.schedule.due(frames)
        self.tracker.context_ended(end_s)
        # when it was seen, and where on the timeline the turn ended (the media time sent)
        self.log(self.clock() - self.t0, "local", "context_end", end_s=round(end_s, 6))
        if self.caps.manual_commit:
            await self.client.commit_turn()

    def _drain_events(self) -> None:
        """Everything the client received since the last frame (stamped when read)."""
        if self.receiver.drain(self.clock()):
            self._events_ended()

    def _events_ended(self) -> None:
        self.tracker.finish()  # nothing more will be placed
        if not self.done:
            if self.tracker.onset_s is None:
                raise Disconnected("server closed the connection before replying")
            self.ended_by = "server-closed"
            # when the close was seen on the timeline: time passing was the model's silence
            seen = min(self.clock() - self.t0, self.sender.media_s())
            self.tracker.closed(seen)
            self.log(self.clock() - self.t0, "local", "reply_end", reason="server-closed")


async def run_session(
    client: DuplexClient,
    user: UserAudio | NDArray[np.float32],
    settings: SessionSettings,
    *,
    window_start_s: float = 0.0,
    speech_end_s: float | None = None,
    clock: Callable[[], float] | None = None,
    executor: concurrent.futures.Executor | None = None,
    tap: SessionTap | None = None,
    server_stalls: StallLog | None = None,
    on_rate_limits: Callable[[tuple[ProviderLimit, ...]], None] | None = None,
) -> SessionOutcome:
    """Stream ``user`` (a 16 kHz context, or any ``UserAudio`` such as a live source) to
    ``client`` and capture its reply; never raises SessionError: failures come back as a
    "failed" outcome with the reason.

    ``clock`` (default: the event loop's, which its sleeps follow) is the session's one clock;
    the client stamps arrivals with it. ``speech_end_s`` (end of Speaker A's speech) is measured
    from the user's turn unless given; the runner measures it before the session starts so the
    event loop never does that work. ``tap`` observes the session's audio as it runs.
    ``server_stalls`` are the stalls of a model server on this machine (a fake the run started),
    checked with our loop's own over the reply's latency window (on the loop's clock only).
    ``on_rate_limits`` hears the provider's rate limits as soon as it says them.
    """
    loop_stalls = None
    if clock is None:
        clock = asyncio.get_running_loop().time
        loop_stalls = stall_log()
    else:
        server_stalls = None  # stalls are in the loop's time, not this clock's
    source = FixedContext(user) if isinstance(user, np.ndarray) else user
    client.use_clock(clock)
    s = _Session(client, source, settings, window_start_s, clock, tap)
    s.receiver.on_rate_limits = on_rate_limits
    wall0 = clock()
    error, timed_out, connected_s = await _connect_and_stream(s, tap)
    wall_s = clock() - wall0
    s.tracker.finish()  # the last audio placed: the detector's speech frames are final
    # assembling the recordings is end-of-session work: off the loop that paces the others
    sent, output = await asyncio.to_thread(_recorded_audio, s)
    if speech_end_s is None:
        # VAD over a whole clip is CPU work: it runs in ``executor`` (a process pool in the
        # runner), never on the loop that paces other sessions
        turn_audio, turn_rate = source.turn_audio(s.turn_frames, s.sender.frames_sent, sent)
        speech_end_s = await asyncio.get_running_loop().run_in_executor(
            executor, speech_end, turn_audio, turn_rate, settings.vad
        )
    timing = truncated = window = None
    if error is None:
        timing = s.tracker.timing(speech_end_s, output)
        truncated = s.tracker.truncated(timed_out)
        window = reply_window(
            timing, s.records, s.sender.frame_s, s.caps.output_rate, s.t0,
            loop_stalls, server_stalls, answers_each_frame=s.caps.answers_each_frame,
        )  # fmt: skip
        if truncated is None and s.tracker.onset_s is not None and s.tracker.ended is None:
            truncated = s.user.end_reason  # a reply the user's own limit cut
    if error is None and s.user.listening:
        await s.settle_user()
    outcome = _outcome(s, sent, output, timing, error, truncated, wall_s, window)
    if error is None and s.user.listening:
        outcome.turns = s.turn_records(speech_end_s, output)
        outcome.speech = [[round(a, 6), round(b, 6)] for a, b in s.tracker.replies.speech]
    outcome.partner = s.partner_events
    outcome.usage = _usage(s, connected_s)
    _add_partner_side(outcome, s.user.partner_side(settings.budget))
    return outcome


def _usage(s: _Session, connected_s: float | None) -> Usage:
    """The provider's reports, with the audio seconds sent and received and the time connected
    measured here (what a provider that reports nothing bills by)."""
    sent_s = sum(s.records.send_samples) / s.caps.input_rate
    received_s = sum(s.records.recv_samples) / s.caps.output_rate
    return s.receiver.usage.total.with_measured(sent_s, received_s, connected_s)


def _add_partner_side(outcome: SessionOutcome, side: PartnerSide | None) -> None:
    """A partner model's half: its records and timing; the session's timing is valid only
    while both directions kept the budget."""
    if side is None:
        return
    outcome.partner_records = side.records
    outcome.partner_check = side.check
    outcome.partner_model = side.summary
    if outcome.check.valid and not side.check.valid:
        outcome.check = dataclasses.replace(outcome.check, invalid=f"partner {side.check.invalid}")


async def _connect_and_stream(
    s: _Session, tap: SessionTap | None
) -> tuple[SessionError | None, bool, float | None]:
    """Connect, stream until the reply is over, close: the failure, if any, whether the session
    passed its deadline (a reply cut by it is kept, marked truncated), and how long it was
    connected (from the start of its handshake to its close; None: it never connected)."""
    client, caps = s.client, s.caps
    connected_at: float | None = None
    deadline = s.settings.deadline_s(s.user.max_turn_s, client.config.connect_timeout_s)
    pump: EventPump | None = None
    try:
        async with asyncio.timeout(deadline):
            await s.user.prepare(client, caps.input_rate, s.frame_len)
            client.watch_liveness(s.settings.stall_timeout_s)
            began = s.clock()
            await client.connect()
            connected_at = began
            await s.user.start()
            if not client.pollable:
                s.receiver.inbox = pump = EventPump(client)
                pump.start()
            s.start()
            client.timeline_started(s.t0)
            s.user.timeline_started(s.t0)
            if tap is not None:
                tap.on_start(s.t0, caps.input_rate, caps.output_rate)
            s.log(
                0.0, "local", "start",
                frame_ms=s.frame_ms, input_rate=caps.input_rate, output_rate=caps.output_rate,
            )  # fmt: skip
            await s.stream()
    except SessionError as exc:
        error, timed_out = exc, False
    except (ValueError, TypeError, LookupError, RecursionError) as exc:
        # whatever a server's bytes make of a decoder that missed them: this session's failure,
        # never the run's
        what = f"{type(exc).__name__}: {str(exc)[:200]}"
        error, timed_out = ProtocolError(f"could not handle what the server sent ({what})"), False
    except TimeoutError:
        timed_out = True
        error = None
        if s.tracker.onset_s is None:
            message = f"session passed its deadline of {deadline:.1f} s"
            error = Disconnected(message, reason="deadline")
    else:
        error, timed_out = None, False
    finally:
        s.sender.record_unfinished()  # a send that never returned: as late as the end
        if tap is not None:
            tap.on_end()
        if pump is not None:
            await pump.aclose()
        with contextlib.suppress(Exception):
            await client.aclose()
        with contextlib.suppress(Exception):
            await s.user.aclose()
    connected_s = None if connected_at is None else s.clock() - connected_at
    return error, timed_out, connected_s


def _turn_record(k: int, turn: UserTurn, timing: ReplyTiming) -> dict[str, Any]:
    def r(x: float | None) -> float | None:
        return None if x is None or math.isinf(x) else round(x, 6)

    return {
        "turn": k,
        "start_s": r(turn.start_s),
        "end_s": r(turn.end_s),
        "speech_end_s": r(timing.speech_end_s),
        "onset_s": r(timing.onset_s),
        "offset_s": r(timing.offset_s),
        "latency_s": r(timing.latency_s),
        "duration_s": r(timing.duration_s),
        "overlap_s": r(timing.overlap_s),
        "end_reason": turn.end_reason,
        "ended_at_s": r(turn.ended_at_s),
        "talked_over_s": r(turn.talked_over_s),
        "stopped_s": r(turn.stopped_s),
    }


def _recorded_audio(s: _Session) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """What was sent, and the model's audio on the timeline at least as long as it."""
    sent = s.user.sent(s.sender.frames_sent)
    return sent, s.tracker.track.audio(min_duration_s=sent.size / s.caps.input_rate)


def _outcome(
    s: _Session,
    sent: NDArray[np.float32],
    output: NDArray[np.float32],
    timing: ReplyTiming | None,
    error: SessionError | None,
    truncated: str | None,
    wall_s: float,
    window: LatencyWindow | None = None,
) -> SessionOutcome:
    """The session's verdict: one decision (the tracker's speech frames) gives the status, the
    end reason and the timing."""
    caps = s.caps
    if error is not None:
        status, reason = "failed", error.reason
    elif timing is None or timing.onset_s is None:
        status, reason = "no-reply", EndReason.NO_REPLY.value
    else:
        status = "ok"
        ended = s.tracker.replies.turns[0].end_reason  # talked over by a partner, or the detector's
        reason = ended if ended is not None else s.ended_by or s.user.end_reason or "deadline"
    check = check_timing(
        s.records.send_errors(),
        s.records.loop_lags(),
        s.receiver.rx_lag_max_s,
        s.sender.frame_s,
        s.settings.budget,
        window,
        receiver_late_ms=caps.input_jitter_ms,
        throughout=s.user.listening,
    )
    # bounded, whatever a server said (an opening's error is counted by nothing else)
    said = None if error is None else redact(error.message, (s.client.config.api_key,))
    return SessionOutcome(
        status=status,
        end_reason=reason,
        timing=timing,
        send=check.send,
        check=check,
        input_rate=caps.input_rate,
        output_rate=caps.output_rate,
        sent=sent,
        output=output,
        records=s.records,
        bytes_sent=s.client.bytes_sent,
        bytes_received=s.client.bytes_received,
        error=None if said is None else kept_error(said),
        truncated=truncated,
        retryable=False if error is None else error.retryable,
        retry_after_s=getattr(error, "retry_after_s", None),
        wall_s=wall_s,
        rate_limited=isinstance(error, RateLimited),
    )
