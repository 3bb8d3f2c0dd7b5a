"""One session: stream the user's audio to one client in real time and capture the reply.

This is the only layer (with the runner) that reads the clock and sleeps, and it reads one clock:
its own (the event loop's by default), handed to the client to stamp arrivals with. Frames go out
on an absolute schedule; received audio is placed on the same timeline by ``OutputTrack`` alone;
the pure ReplyDetector decides when the reply is over, and its decision is the session's: the same
speech frames give the status, the reply's end and its timing. Events are drained once per frame
by the send loop, from every client alike (stamped when their bytes were read, so nothing is lost
in timing).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.base import (
    AudioOut,
    ClientEvent,
    DuplexClient,
    EndOfTurn,
    ErrorEvent,
    ProviderEmotion,
    SpeechStarted,
    SpeechStopped,
    Transcript,
)
from duplexsim.core.conversation import Conversation, UserTurn
from duplexsim.core.errors import Disconnected, ProtocolError, SessionError
from duplexsim.core.intake import AHEAD_MARGIN_S, Intake
from duplexsim.core.records import EventRecords
from duplexsim.core.redact import redact
from duplexsim.core.timeline import OutputTrack, Schedule
from duplexsim.core.timing import (
    LatencyWindow,
    ReplyTiming,
    SendStats,
    TimingBudget,
    TimingCheck,
    check_timing,
    reply_timing,
    speech_end,
)
from duplexsim.core.turns import EndReason, ReplyDetector, TurnSettings
from duplexsim.core.vad import BEFORE_RUN_RULE, StreamingVad, VadConfig, refine_bounds
from duplexsim.session.eventloop import stall_log
from duplexsim.session.eventpump import EventPump
from duplexsim.session.stalls import StallLog
from duplexsim.session.useraudio import CONTEXT_RATE, FixedContext, LiveInput, LiveSource, UserAudio

# a stamp is taken this soon after the stall that held it ends (the loop's next poll, and the
# callbacks ahead of the read in that iteration, each shorter than a recorded stall)
STAMP_SLACK_S = 0.001

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
    # a partner's session: each user turn and the model's reply to it, and the partner's steps
    turns: list[dict[str, Any]] = field(default_factory=list)
    partner: list[dict[str, Any]] = field(default_factory=list)
    speech: list[list[float]] = field(default_factory=list)  # the model's, pauses merged

    @functools.cached_property
    def events(self) -> list[dict[str, Any]]:
        """Every event as a dict (built on first use: the runner leaves that to the process
        that writes the bundle)."""
        return self.records.log()


class _Session:
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
        self.tap = tap
        self.frame_ms = settings.frame_ms or self.caps.frame_ms
        self.schedule = Schedule(self.frame_ms / 1000.0)
        self.frame_len = self.caps.input_rate * self.frame_ms // 1000
        self.track = OutputTrack(self.caps.output_rate, bridge_s=settings.bridge_s)
        # the user's turns and the model's reply to each (the context's turn ends where its
        # source says: a fixed context at its last frame); one decision for the session and for
        # a partner that reacts to it
        self.replies = Conversation(
            settings.turns, window_start_s=window_start_s, refine=self._refine_onset
        )
        self.partner_events: list[dict[str, Any]] = []
        # what a server may send is bounded: a flood fails the session instead of filling memory
        self.intake = Intake(self.caps.output_rate, settings.turns.max_reply_s + AHEAD_MARGIN_S)
        self.vad = StreamingVad(self.caps.output_rate, settings.vad)
        self.vad_end = 0  # samples of the track fed to the streaming VAD
        self.vad_finished = False  # the stream is over and the VAD has had all of it
        self.vad_batch = self.caps.output_rate // 10  # run the VAD on >= 100 ms at a time
        # the first VAD frame that ends after the window starts: speech before it is chatter
        self.first_frame = max(0, int(window_start_s / settings.vad.frame_s + 1e-9))
        # The hot paths record numbers in columns (no objects for the garbage collector to
        # walk); they become event dicts where the bundle is written.
        self.records = EventRecords()
        self.inbox: DuplexClient | EventPump = client
        self.frames_sent = 0
        self.turn_frames: int | None = None  # frames sent when the user's turn ended
        self.t0 = 0.0
        self.last_rx = 0.0
        self.rx_lag_max_s = 0.0  # the longest an event waited between its read and its handling
        self.ended_by: str | None = None  # how streaming stopped when the detector did not say
        self.sending: tuple[int, float, float, int] | None = None  # (n, due, woke, samples)
        self.closed_at_s: float | None = None  # where the model's stream stopped, if it closed

    @property
    def detector(self) -> ReplyDetector:
        """The reply to the context: the session's own."""
        return self.replies.first

    @property
    def done(self) -> bool:
        if self.ended_by is not None:
            return True
        return self.user.finished(self.replies, self.schedule.due(self.frames_sent))

    def log(self, t: float, direction: str, kind: str, **fields: Any) -> None:
        # every text a server sends (transcripts, error messages) passes here on its way to a file
        for name, value in fields.items():
            if isinstance(value, str):
                fields[name] = redact(value, (self.client.config.api_key,))
        event = {"t": round(t, 6), "dir": direction, "kind": kind, **fields}
        self.records.add_event(t, event)

    def advance_vad(self) -> None:
        """Feed the VAD everything placed since the last call (final: nothing is ever placed
        before the track's audible end) and tell the detector about speech frames."""
        end = self.track.end_samples
        if end <= self.vad_end or self.vad_finished:
            return
        spans = self.vad.speech(self.track.segment(self.vad_end, end))
        self.vad_end = end
        self._voiced(spans)
        self.replies.heard(self.vad.decided_frames * self.vad.cfg.frame_s)

    def finish_vad(self) -> None:
        """The stream is over (closed, or the session ended): the VAD decides on its last audio
        too, which it otherwise holds until more comes (a partial frame, the resampler's)."""
        if not self.vad_finished:
            self.advance_vad()
            self.vad_finished = True
            self._voiced(self.vad.finish())
            self.replies.heard(self.vad.decided_frames * self.vad.cfg.frame_s)

    def _voiced(self, spans: list[tuple[int, int]]) -> None:
        frame_s = self.vad.cfg.frame_s
        for lo, hi in spans:
            lo = max(lo, self.first_frame)
            if hi > lo:
                self.replies.voiced(lo * frame_s, hi * frame_s)

    def _refine_onset(self, onset_s: float) -> float:
        """An onset on the VAD's frame grid, to the sample on the track (as ``reply`` refines
        it: the audio around its first frame is final once that frame is speech)."""
        first = round(onset_s / self.settings.vad.frame_s)
        frame = self.caps.output_rate * self.settings.vad.frame_ms // 1000
        x = self.track.segment(0, (first + 2) * frame)
        return refine_bounds(x, self.caps.output_rate, first, first + 1, self.settings.vad)[0]

    def model_s(self) -> float | None:
        """How far the model's own audio has got past the context's reply's last speech."""
        return self.model_at(self.detector.last_voiced_end_s)

    def model_at(self, last: float | None) -> float | None:
        """How far the model's own audio has got past its speech ending at ``last``: a stream
        that sends its silence is heard out in its own time (its last speech, and the stream it
        sent after that, however late it came); for others time passing is their silence (None:
        now)."""
        if not self.caps.continuous_output:
            return None
        if last is None:
            return self.track.stream_end_s
        return last + self.track.stream_after_s(last)

    def _stream_end_s(self) -> float:
        """Where the model's stream stopped on the timeline, as the detector counts its silence:
        its own audio time for a stream that sends its silence; for others, when the close was
        seen (time passing was their silence), unless audio sent ahead still plays out."""
        model = self.model_s()
        if model is not None:
            return model
        seen = min(self.clock() - self.t0, self.schedule.due(self.frames_sent))
        return max(seen, self.track.stream_end_s)

    def tick(self, now_s: float) -> list[tuple[int, str]]:
        """Advance the replies; the VAD catches up in batches, always before an ending, and
        every frame for a user who listens. The replies that ended now, by turn."""
        if (
            self.user.listening
            or self.track.end_samples - self.vad_end >= self.vad_batch
            or self.replies.pending(now_s, self.model_at)
        ):
            self.advance_vad()
        if self.user.listening:
            self.replies.heard(self.heard_s(now_s))
        return self.replies.tick(now_s, self.model_at)  # after the VAD: its last speech

    def heard_s(self, now_s: float) -> float:
        """How far the model's speech is decided: the VAD's final frames, and past the audible
        end the silence the model has sent since (a stream that sends nothing: time passing),
        once the VAD has had all of the audible audio."""
        vad, frame_s = self.vad, self.vad.cfg.frame_s
        if self.vad_end < self.track.end_samples:
            return vad.decided_frames * frame_s
        # a stream that sends nothing may still bridge a chunk late by bridge_s to its audio
        silence = (
            self.track.stream_end_s
            if self.caps.continuous_output
            else now_s - self.settings.bridge_s
        )
        return vad.decided_through_silence(math.floor(silence / frame_s + 1e-9)) * frame_s

    async def stream(self) -> None:
        """Frames on the absolute schedule; after each, the events received since, then the
        detector on the media time sent (so a loaded client still sends its whole schedule)."""
        n = 0
        if self.user.turn_over(0):
            await self._end_turn(0)  # an empty context: the turn is over before it began
        while not self.done:
            if self.user.listening:
                self._listen(n)
            chunk, message = await self.user.frame(n)
            due = self.t0 + self.schedule.due(n)
            delay = due - self.clock()
            if delay > 0:
                await asyncio.sleep(delay)
            woke = self.clock()
            # a send still under way when the session ends (its deadline) is recorded then
            self.sending = (n, due, woke, chunk.size)
            try:
                if message is None:
                    await self.client.send_audio(chunk)
                else:
                    await self.client.send_encoded(message)
            except SessionError:
                self.sending = None  # it did not go out: nothing was late
                # what the server said before it closed, and why: a close after its reply
                # (websockets' send returns only once the connection is closed) ends it well
                self._drain_events()
                if not self.done:
                    raise
                break
            self.sending = None
            sent = self.clock()  # after the send returned: the send's own cost is in the error
            self.frames_sent = n = n + 1
            self.records.add_send(n - 1, sent - self.t0, due - self.t0, chunk.size, woke - self.t0)
            if self.tap is not None:
                self.tap.on_sent(chunk, due - self.t0)
            if self.turn_frames is None and self.user.turn_over(n):
                await self._end_turn(n)
            self._drain_events()
            self._check_stall(sent)
            for turn, reason in self.tick(self.schedule.due(n)):
                if self.ended_by is None:
                    more = {"turn": turn} if turn else {}
                    self.log(self.clock() - self.t0, "local", "reply_end", reason=reason, **more)

    def _listen(self, n: int) -> None:
        """The user decides before frame ``n`` is built; its decisions are recorded."""
        start, end = self.schedule.due(n), self.schedule.due(n + 1)
        for event in self.user.listen(self.replies, start, end):
            self.partner_events.append(event)
            self.log(self.clock() - self.t0, "user", "partner", **event)

    async def _end_turn(self, frames: int) -> None:
        """The user's turn is over after ``frames`` frames."""
        self.turn_frames = frames
        end_s = self.schedule.due(frames)
        self.replies.set_context_end(end_s)
        # when it was seen, and where on the timeline the turn ended (the media time sent)
        self.log(self.clock() - self.t0, "local", "context_end", end_s=round(end_s, 6))
        if self.caps.manual_commit:
            await self.client.commit_turn()

    def _check_stall(self, now: float) -> None:
        if self.caps.continuous_output and now - self.last_rx > self.settings.stall_timeout_s:
            raise Disconnected(
                f"server sent nothing for {self.settings.stall_timeout_s:.1f} s (stalled)",
                reason="stalled",
            )

    def _drain_events(self) -> None:
        """Everything the client received since the last frame (stamped when read)."""
        events, ended = self.inbox.poll_events()
        if events:
            now = self.clock()
            self.rx_lag_max_s = max(self.rx_lag_max_s, now - min(e.arrival for e in events))
        for event in events:
            self.on_event(event)
        if ended:
            self._events_ended()

    def _events_ended(self) -> None:
        self.finish_vad()  # nothing more will be placed
        if not self.done:
            if self.detector.onset_s is None:
                raise Disconnected("server closed the connection before replying")
            self.ended_by = "server-closed"
            self.closed_at_s = self._stream_end_s()
            self.log(self.clock() - self.t0, "local", "reply_end", reason="server-closed")

    def on_event(self, event: ClientEvent) -> None:
        t = event.arrival - self.t0
        self.last_rx = event.arrival
        self.intake.message(t)
        if isinstance(event, AudioOut):
            self._on_audio(event, t)
        elif isinstance(event, EndOfTurn):
            self.log(t, "recv", "end_of_turn")
            self.advance_vad()
            # a burst sent faster than real time is over only once it has played out
            self.replies.end_of_turn(max(t, self.track.end_s))
        elif isinstance(event, Transcript):
            self.intake.text(len(event.text))
            self.log(t, "recv", "transcript", text=event.text, final=event.final)
        elif isinstance(event, SpeechStarted | SpeechStopped):
            self.log(
                t,
                "recv",
                "speech_started" if isinstance(event, SpeechStarted) else "speech_stopped",
            )
        elif isinstance(event, ProviderEmotion):
            self._on_provider_emotion(event, t)
        elif isinstance(event, ErrorEvent):
            err = event.error
            self.intake.text(len(err.message))
            self.log(
                t,
                "recv",
                "error",
                reason=err.reason,
                message=err.message,
                retryable=err.retryable,
                fatal=event.fatal,
            )
            if event.fatal:
                raise err

    def _on_provider_emotion(self, event: ProviderEmotion, t: float) -> None:
        # recorded in events.jsonl as the provider said it, beside the scorer's own estimate
        scores = {k: round(float(v), 6) for k, v in event.scores.items()}
        self.log(
            t,
            "recv",
            "provider_emotion",
            role=event.role,
            source=event.source,
            id=event.message_id,
            scores=scores,
        )

    def _on_audio(self, event: AudioOut, t: float) -> None:
        samples = np.asarray(event.samples, dtype=np.float32)
        placed = self.track.place(samples, t, event.offset_s, silent=event.silent)
        self.intake.audio(placed.n_samples, t, placed.start_s + placed.n_samples / self.track.rate)
        self.records.add_received(
            t, placed.n_samples, placed.start_s, event.offset_s, placed.silent
        )
        if self.tap is not None and not placed.silent:
            self.tap.on_placed(samples, placed.start_s)

    def reply(
        self, speech_end_s: float | None, output: NDArray[np.float32], turn: int = 0
    ) -> ReplyTiming:
        """The reply's timing from the detector's own speech frames (the one decision), refined
        to the sample on the track; ``turn``: the reply to that user turn."""
        d = self.replies.turns[turn].detector
        if d.onset_s is None or d.last_voiced_end_s is None:
            return ReplyTiming(speech_end_s, None, None, None, None, 0.0)
        frame_s = self.settings.vad.frame_s
        end_s = d.last_voiced_end_s
        limit = _reply_limit(d, self.settings.turns.max_reply_s)
        if limit is not None:
            end_s = min(end_s, limit)
        first, end = round(d.onset_s / frame_s), round(end_s / frame_s)
        return reply_timing(
            output, self.caps.output_rate, first, max(end, first + 1), speech_end_s,
            self.settings.vad,
        )  # fmt: skip

    def latency_window(
        self, timing: ReplyTiming, loop: StallLog | None, server: StallLog | None
    ) -> LatencyWindow | None:
        """What this machine may have added to the reply's latency (``LatencyWindow``): the
        sends from the frame holding the speech end to the onset (a model hears the end of the
        turn, and the silence after it, only as they arrive; when it decided is its own), the
        stall of our loop that ended as the onset's chunk was stamped (its bytes waited that
        long to be read), and the stall of a co-located fake server as that chunk left it (it
        answers each frame as it reads it, so only then does a stall move its reply). ``loop``
        and ``server`` are in the loop's time: given only when the session runs on the loop's
        own clock."""
        onset = timing.onset_s
        if onset is None:
            return None
        frame_s = self.schedule.frame_s
        end = onset if timing.speech_end_s is None else timing.speech_end_s
        lo = min(end, onset) - frame_s
        r = self.records
        late = max(
            (t - due for t, due in zip(r.send_t, r.send_due, strict=True) if lo <= due <= onset),
            default=0.0,
        )
        stamped = self.t0 + self._stamp_of(onset)
        loop_s = 0.0 if loop is None else loop.worst(stamped - STAMP_SLACK_S, stamped)
        server_s = None
        if server is not None:
            server_s = server.worst(stamped - loop_s - 2 * STAMP_SLACK_S, stamped)
        return LatencyWindow(
            send_ms=round(1000.0 * max(late, 0.0), 3),
            loop_stall_ms=round(1000.0 * loop_s, 3),
            server_stall_ms=None if server_s is None else round(1000.0 * server_s, 3),
        )

    def _stamp_of(self, position_s: float) -> float:
        """When the audible chunk that holds timeline position ``position_s`` was stamped (the
        position itself where no chunk holds it)."""
        r = self.records
        rate = self.track.rate
        for i in range(len(r.recv_t) - 1, -1, -1):
            placed = r.recv_placed[i]
            if not r.recv_silent[i] and placed <= position_s < placed + r.recv_samples[i] / rate:
                return r.recv_t[i]
        return position_s

    def turn_records(
        self, speech_end_s: float | None, output: NDArray[np.float32]
    ) -> list[dict[str, Any]]:
        """Each user turn and the reply to it, for a user who listens (a partner)."""
        if not self.user.listening:
            return []
        out = []
        for k, turn in enumerate(self.replies.turns):
            end = speech_end_s if k == 0 else turn.speech_end_s
            out.append(_turn_record(k, turn, self.reply(end, output, k)))
        return out

    def truncated(self, deadline: bool) -> str | None:
        """Why the reply was cut short, if it was: its maximum length, the session's deadline,
        or a server that closed while the model was still speaking: its last speech reaches
        the end of its stream (within two VAD frames: the last one may be partial, completed
        with silence). Silence the model sent, or let pass, before the close is not a cut."""
        d = self.detector
        if d.onset_s is None:
            return None
        if deadline and d.ended is None:
            return "deadline"
        if d.ended is EndReason.MAX_LENGTH:
            return EndReason.MAX_LENGTH.value
        closed, last = self.closed_at_s, d.last_voiced_end_s
        if closed is not None and last is not None and last >= closed - 2 * self.vad.cfg.frame_s:
            return "server-closed"
        return None


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
    wall0 = clock()
    deadline = settings.deadline_s(source.max_turn_s, client.config.connect_timeout_s)
    error: SessionError | None = None
    timed_out = False
    try:
        async with asyncio.timeout(deadline):
            await source.prepare(client, s.caps.input_rate, s.frame_len)
            client.watch_liveness(settings.stall_timeout_s)
            await client.connect()
            await source.start()
            if not client.pollable:
                s.inbox = pump = EventPump(client)
                pump.start()
            s.t0 = s.last_rx = Schedule.start(clock())
            client.timeline_started(s.t0)
            if tap is not None:
                tap.on_start(s.t0, s.caps.input_rate, s.caps.output_rate)
            s.log(
                0.0,
                "local",
                "start",
                frame_ms=s.frame_ms,
                input_rate=s.caps.input_rate,
                output_rate=s.caps.output_rate,
            )
            await s.stream()
    except SessionError as exc:
        error = exc
    except (ValueError, TypeError, LookupError, RecursionError) as exc:
        # whatever a server's bytes make of a decoder that missed them: this session's failure,
        # never the run's
        what = f"{type(exc).__name__}: {str(exc)[:200]}"
        error = ProtocolError(f"could not handle what the server sent ({what})")
    except TimeoutError:
        timed_out = True
        if s.detector.onset_s is None:  # a reply cut by the deadline is kept, marked truncated
            error = Disconnected(
                f"session passed its deadline of {deadline:.1f} s", reason="deadline"
            )
    finally:
        if s.sending is not None:  # it never returned: as late as the session's end
            n, due, woke, size = s.sending
            s.records.add_send(n, clock() - s.t0, due - s.t0, size, woke - s.t0)
        if tap is not None:
            tap.on_end()
        if isinstance(s.inbox, EventPump):
            await s.inbox.aclose()
        with contextlib.suppress(Exception):
            await client.aclose()
    wall_s = clock() - wall0
    s.finish_vad()  # the last audio placed: the detector's speech frames are final
    loop = asyncio.get_running_loop()
    # assembling the recordings is end-of-session work: off the loop that paces the others
    sent, output = await asyncio.to_thread(_recorded_audio, s)
    if speech_end_s is None:
        # VAD over a whole clip is CPU work: it runs in ``executor`` (a process pool in the
        # runner), never on the loop that paces other sessions
        turn_audio, turn_rate = source.turn_audio(s.turn_frames, s.frames_sent, sent)
        speech_end_s = await loop.run_in_executor(
            executor, speech_end, turn_audio, turn_rate, settings.vad
        )
    timing = None if error is not None else s.reply(speech_end_s, output)
    truncated = None if error is not None else s.truncated(timed_out)
    window = None if timing is None else s.latency_window(timing, loop_stalls, server_stalls)
    outcome = _outcome(s, sent, output, timing, error, truncated, wall_s, window)
    if error is None:
        outcome.turns = s.turn_records(speech_end_s, output)
        if s.user.listening:
            outcome.speech = [[round(a, 6), round(b, 6)] for a, b in s.replies.speech]
    outcome.partner = s.partner_events
    return outcome


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


def _reply_limit(detector: ReplyDetector, max_reply_s: float) -> float | None:
    """Where the reply ends for measurement: when the detector ended it, at most max_reply_s."""
    limits = [t for t in (detector.ended_at_s,) if t is not None]
    if detector.onset_s is not None:
        limits.append(detector.onset_s + max_reply_s)
    return min(limits) if limits else None


def _recorded_audio(s: _Session) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """What was sent, and the model's audio on the timeline at least as long as it."""
    sent = s.user.sent(s.frames_sent)
    return sent, s.track.audio(min_duration_s=sent.size / s.caps.input_rate)


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
    """The session's verdict: one decision (the detector's speech frames) gives the status, the
    end reason and the timing."""
    caps = s.caps
    if error is not None:
        status, reason = "failed", error.reason
    elif timing is None or timing.onset_s is None:
        status, reason = "no-reply", EndReason.NO_REPLY.value
    else:
        status = "ok"
        ended = s.replies.turns[0].end_reason  # talked over by a partner, or the detector's
        reason = ended if ended is not None else s.ended_by or "deadline"
    check = check_timing(
        s.records.send_errors(),
        s.records.loop_lags(),
        s.rx_lag_max_s,
        s.schedule.frame_s,
        s.settings.budget,
        window,
    )
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
        error=None if error is None else redact(error.message, (s.client.config.api_key,)),
        truncated=truncated,
        retryable=False if error is None else error.retryable,
        retry_after_s=getattr(error, "retry_after_s", None),
        wall_s=wall_s,
    )
