"""One session: stream a sample's context to one client in real time and capture the reply.

This is the only layer (with the runner) that reads the clock and sleeps. Frames go out on an
absolute schedule; received audio is placed on the same timeline; the pure ReplyDetector decides
when the reply is over. A client that can be polled has its events drained once per frame by the
send loop (stamped when their bytes were read, so nothing is lost in timing); others stream them
to a receive task.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from clients.base import (
    AudioOut,
    ClientEvent,
    DuplexClient,
    EndOfTurn,
    ErrorEvent,
    ProviderEmotion,
    SpeechStarted,
    SpeechStopped,
    Transcript,
    WireMessage,
)
from simulator.core.audio import frame_signal, resample
from simulator.core.errors import Disconnected, SessionError
from simulator.core.records import EventRecords
from simulator.core.timeline import OutputTrack, Schedule
from simulator.core.timing import ReplyTiming, SendStats, measure_reply, send_stats, speech_end
from simulator.core.turns import EndReason, ReplyDetector, TurnSettings
from simulator.core.vad import StreamingVad, VadConfig

__all__ = ["LiveInput", "SessionOutcome", "SessionSettings", "SessionTap", "run_session"]

CONTEXT_RATE = 16000


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


class LiveInput(Protocol):
    """The user's side from a live source (a microphone) instead of a fixed context: the session
    sends its frames on the usual schedule (a late one as soon as it is there), and the source
    decides when the user's turn is over (then the reply is detected as usual, while the source
    keeps streaming: the user can talk over the reply)."""

    max_turn_s: float  # the longest the user's turn can last (for the session's deadline)

    async def start(self, rate: int, frame_len: int) -> None:
        """Get ready to deliver frames of ``frame_len`` samples at ``rate`` Hz; returns once the
        first one can be read (T0 is taken then)."""

    async def read(self) -> NDArray[np.float32]:
        """The next frame; waits for it."""
        ...

    @property
    def turn_ended(self) -> bool: ...


@dataclass(frozen=True)
class SessionSettings:
    frame_ms: int | None = None  # None: the client's preferred frame size (20 ms for pcm-ws)
    turns: TurnSettings = field(default_factory=TurnSettings)
    vad: VadConfig = field(default_factory=VadConfig)
    # silence on the wire this long (continuous-output protocols), or no answer to pings this
    # long (WebSocket protocols): the server is stalled
    stall_timeout_s: float = 5.0
    deadline_margin_s: float = 10.0

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
            vad=VadConfig(**data["vad"]),
            stall_timeout_s=float(data["stall_timeout_s"]),
            deadline_margin_s=float(data["deadline_margin_s"]),
        )

    def describe(self) -> dict[str, Any]:
        return {
            "frame_ms": self.frame_ms,
            "turns": vars(self.turns).copy(),
            "vad": vars(self.vad).copy(),
            "stall_timeout_s": self.stall_timeout_s,
            "deadline_margin_s": self.deadline_margin_s,
        }


@dataclass
class SessionOutcome:
    status: str  # "ok" | "no-reply" | "failed"
    end_reason: str
    timing: ReplyTiming | None
    send: SendStats
    input_rate: int
    output_rate: int
    sent: NDArray[np.float32]  # everything sent, at input_rate
    output: NDArray[np.float32]  # the model's audio on the timeline, at output_rate
    records: EventRecords
    bytes_sent: int = 0
    bytes_received: int = 0
    error: str | None = None
    retryable: bool = False
    retry_after_s: float | None = None
    wall_s: float = 0.0

    @functools.cached_property
    def events(self) -> list[dict[str, Any]]:
        """Every event as a dict (built on first use: the runner leaves that to the process
        that writes the bundle)."""
        return self.records.log()


class _Session:
    def __init__(
        self,
        client: DuplexClient,
        context: NDArray[np.float32],
        settings: SessionSettings,
        window_start_s: float,
        clock: Callable[[], float],
        tap: SessionTap | None = None,
        live: LiveInput | None = None,
    ):
        self.client = client
        self.caps = client.capabilities
        self.settings = settings
        self.clock = clock
        self.frame_ms = settings.frame_ms or self.caps.frame_ms
        self.schedule = Schedule(self.frame_ms / 1000.0)
        self.frame_len = frame_len = self.caps.input_rate * self.frame_ms // 1000
        self.frames = frame_signal(resample(context, CONTEXT_RATE, self.caps.input_rate), frame_len)
        self.silence = np.zeros(frame_len, dtype=np.float32)
        # the wire messages of the frames and of silence, when the client encodes ahead of time
        self.encoded: Sequence[WireMessage] = ()
        self.encoded_silence: WireMessage | None = None
        # a live turn's end is decided by its source: until then the reply cannot end
        self.context_end_s = math.inf if live is not None else self.schedule.due(len(self.frames))
        self.tap = tap
        self.live = live
        self.live_sent: list[NDArray[np.float32]] = []
        self.turn_frames: int | None = None  # frames sent when the user's turn ended
        self.detector = ReplyDetector(
            settings.turns, context_end_s=self.context_end_s, window_start_s=window_start_s
        )
        self.track = OutputTrack(self.caps.output_rate)
        self.vad = StreamingVad(self.caps.output_rate, settings.vad)
        self.vad_end = 0  # samples of the track fed to the streaming VAD
        self.vad_batch = self.caps.output_rate // 10  # run the VAD on >= 100 ms at a time
        # The hot paths record numbers in columns (no objects for the garbage collector to
        # walk); they become event dicts where the bundle is written.
        self.records = EventRecords()
        self.frames_sent = 0
        self.t0 = 0.0
        self.last_rx = 0.0
        self.done = asyncio.Event()
        # a pollable client's events are drained once per frame by the send loop: no task
        # wakes for each message
        self.polled = client.pollable

    def log(self, t: float, direction: str, kind: str, **fields: Any) -> None:
        event = {"t": round(t, 6), "dir": direction, "kind": kind, **fields}
        self.records.add_event(t, event)

    def advance_vad(self) -> None:
        """Feed the VAD everything placed since the last call (final: nothing is ever placed
        before the track's end) and tell the detector about voiced frames."""
        end = self.track.end_samples
        if end <= self.vad_end:
            return
        first = self.vad.frames_done
        flags = self.vad.push(self.track.segment(self.vad_end, end))
        self.vad_end = end
        frame_s = self.vad.cfg.frame_s
        for i in np.flatnonzero(flags):
            k = first + int(i)
            self.detector.voiced(k * frame_s, (k + 1) * frame_s)

    def tick(self, now_s: float) -> EndReason | None:
        """Advance the detector; the VAD catches up in batches, and always before an ending."""
        if (
            self.track.end_samples - self.vad_end >= self.vad_batch
            or self.detector.pending(now_s) is not None
        ):
            self.advance_vad()
        return self.detector.tick(now_s)

    async def send_loop(self) -> None:
        """Frames on the absolute schedule: the context then silence, or a live source's frames
        (a frame the source delivers late goes out as soon as it is there)."""
        live = self.live
        n = 0
        if live is None and len(self.frames) == 0:
            await self._end_turn(0)  # an empty context: the turn is over before it began
        while not self.done.is_set():
            chunk = await live.read() if live is not None else None
            due = self.t0 + self.schedule.due(n)
            delay = due - self.clock()
            if delay > 0:
                await asyncio.sleep(delay)
            if self.done.is_set():
                break
            now = self.clock()
            try:
                if chunk is None:
                    chunk = await self._send_fixed(n)
                else:
                    await self.client.send_audio(chunk)
            except SessionError:
                if not self.polled:
                    raise
                # what the server said before it closed, and why: a close after its reply
                # (websockets' send returns only once the connection is closed) ends it well
                self._drain_events()
                if not self.done.is_set():
                    raise
                break
            self.frames_sent = n = n + 1
            self.records.add_send(n - 1, now - self.t0, due - self.t0, chunk.size)
            if live is not None:
                self.live_sent.append(chunk)
            if self.tap is not None:
                self.tap.on_sent(chunk, due - self.t0)
            if self.turn_frames is None and (
                live.turn_ended if live is not None else n == len(self.frames)
            ):
                await self._end_turn(n)
            if self.polled:
                self._drain_events()
            self._check_stall(now)
            # decide on the media time sent, so a loaded client still sends its whole schedule
            reason = self.tick(self.schedule.due(n))
            if reason is not None:
                self.log(self.clock() - self.t0, "local", "reply_end", reason=reason.value)
                self.done.set()

    async def _send_fixed(self, n: int) -> NDArray[np.float32]:
        """Send frame ``n`` of the context (silence after it), pre-encoded where the client can."""
        chunk: NDArray[np.float32]
        if n < len(self.frames):
            chunk, message = self.frames[n], (self.encoded[n] if self.encoded else None)
        else:
            chunk, message = self.silence, self.encoded_silence
        if message is None:
            await self.client.send_audio(chunk)
        else:
            await self.client.send_encoded(message)
        return chunk

    def encode_fixed(self) -> None:
        """Encode the context and silence ahead of time (in a thread, before streaming)."""
        frames = self.client.encode_audio(self.frames)
        silence = self.client.encode_audio(self.silence[None])
        if frames is not None and silence is not None:
            self.encoded_silence = silence[0]
            # a tuple of bytes or str: the collector stops tracking it at its first pass, where
            # a list would be walked (every message touched, megabytes of cold memory) by every
            # collection of its generation while sessions stream
            self.encoded = tuple(frames)

    async def _end_turn(self, frames: int) -> None:
        """The user's turn is over after ``frames`` frames (the context's end, or where a live
        source decided it)."""
        self.turn_frames = frames
        self.context_end_s = self.detector.context_end_s = self.schedule.due(frames)
        self.log(self.clock() - self.t0, "local", "context_end")
        if self.caps.manual_commit:
            await self.client.commit_turn()

    def _check_stall(self, now: float) -> None:
        if self.caps.continuous_output and now - self.last_rx > self.settings.stall_timeout_s:
            raise Disconnected(
                f"server sent nothing for {self.settings.stall_timeout_s:.1f} s (stalled)",
                reason="stalled",
            )

    async def receive_loop(self) -> None:
        async for event in self.client.events():
            self.on_event(event)
        self._events_ended()

    def _drain_events(self) -> None:
        """Everything a pollable client received since the last frame (stamped when read)."""
        events, ended = self.client.poll_events()
        for event in events:
            self.on_event(event)
        if ended:
            self._events_ended()

    def _events_ended(self) -> None:
        self.advance_vad()
        if not self.done.is_set():
            if self.detector.onset_s is None:
                raise Disconnected("server closed the connection before replying")
            self.log(self.clock() - self.t0, "local", "reply_end", reason="server-closed")
            self.done.set()

    def on_event(self, event: ClientEvent) -> None:
        t = event.arrival - self.t0
        self.last_rx = event.arrival
        if isinstance(event, AudioOut):
            self._on_audio(event, t)
        elif isinstance(event, EndOfTurn):
            self.log(t, "recv", "end_of_turn")
            self.advance_vad()
            # a burst sent faster than real time is over only once it has played out
            self.detector.end_of_turn(max(t, self.track.end_s))
        elif isinstance(event, Transcript):
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
        self.records.add_received(
            t, placed.n_samples, placed.start_s, event.offset_s, placed.silent
        )
        if self.tap is not None and not placed.silent:
            self.tap.on_placed(samples, placed.start_s)


async def run_session(
    client: DuplexClient,
    context: NDArray[np.float32],
    settings: SessionSettings,
    *,
    window_start_s: float = 0.0,
    speech_end_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    executor: concurrent.futures.Executor | None = None,
    tap: SessionTap | None = None,
    live: LiveInput | None = None,
) -> SessionOutcome:
    """Stream ``context`` (16 kHz mono) to ``client`` and capture its reply; never raises
    SessionError: failures come back as a "failed" outcome with the reason.

    ``speech_end_s`` (end of Speaker A's speech) is measured from ``context`` unless given; the
    runner measures it before the session starts so the event loop never does that work.
    ``tap`` observes the session's audio as it runs. ``live`` replaces ``context`` (pass an
    empty array) with a live source such as a microphone; speech end is then measured on what
    was sent up to the end of the user's turn.
    """
    s = _Session(client, context, settings, window_start_s, clock, tap, live)
    wall0 = time.monotonic()
    context_s = live.max_turn_s if live is not None else len(context) / CONTEXT_RATE
    deadline = settings.deadline_s(context_s, client.config.connect_timeout_s)
    error: SessionError | None = None
    try:
        async with asyncio.timeout(deadline):
            if live is None:
                await asyncio.to_thread(s.encode_fixed)
            client.watch_liveness(settings.stall_timeout_s)
            await client.connect()
            if live is not None:
                await live.start(s.caps.input_rate, s.frame_len)
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
            await _stream(s)
    except SessionError as exc:
        error = exc
    except TimeoutError:
        error = Disconnected(f"session passed its deadline of {deadline:.1f} s", reason="deadline")
    finally:
        if tap is not None:
            tap.on_end()
        with contextlib.suppress(Exception):
            await client.aclose()
    wall_s = time.monotonic() - wall0
    loop = asyncio.get_running_loop()
    # assembling the recordings is end-of-session work: off the loop that paces the others
    sent, output = await asyncio.to_thread(_recorded_audio, s)
    records = s.records
    # VAD over whole clips is CPU work: it runs in ``executor`` (a process pool in the runner),
    # never on the loop that paces other sessions
    if speech_end_s is None:
        if live is None:
            user, user_rate = context, CONTEXT_RATE
        else:
            turn = s.frames_sent if s.turn_frames is None else s.turn_frames
            user, user_rate = sent[: turn * s.frame_len], s.caps.input_rate
        speech_end_s = await loop.run_in_executor(
            executor, speech_end, user, user_rate, settings.vad
        )
    timing = None
    if error is None and s.track.end_samples == 0:
        # nothing audible ever arrived: no reply, known without running the VAD over silence
        timing = ReplyTiming(speech_end_s, None, None, None, None, 0.0)
    elif error is None:
        timing = await loop.run_in_executor(
            executor,
            functools.partial(
                measure_reply,
                output,
                s.caps.output_rate,
                speech_end_s=speech_end_s,
                window_start_s=s.detector.window_start_s,
                window_end_s=_reply_limit(s.detector, settings.turns.max_reply_s),
                vad=settings.vad,
            ),
        )
    return _outcome(s, sent, output, records, timing, error, wall_s)


async def _stream(s: _Session) -> None:
    if s.polled:
        await s.send_loop()
        return
    sender = asyncio.create_task(s.send_loop())
    receiver = asyncio.create_task(s.receive_loop())
    try:
        done, _ = await asyncio.wait({sender, receiver}, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()  # raises the first failure
        await sender
    finally:
        for task in (sender, receiver):
            task.cancel()
        await asyncio.gather(sender, receiver, return_exceptions=True)


def _reply_limit(detector: ReplyDetector, max_reply_s: float) -> float | None:
    """Where the reply ends for measurement: when the detector ended it, at most max_reply_s."""
    limits = [t for t in (detector.ended_at_s,) if t is not None]
    if detector.onset_s is not None:
        limits.append(detector.onset_s + max_reply_s)
    return min(limits) if limits else None


def _recorded_audio(s: _Session) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """What was sent, and the model's audio on the timeline at least as long as it."""
    if s.live is not None:
        sent = np.concatenate(s.live_sent) if s.live_sent else np.zeros(0, dtype=np.float32)
        return sent, s.track.audio(min_duration_s=sent.size / s.caps.input_rate)
    n_context = min(s.frames_sent, len(s.frames))
    sent = np.concatenate(
        (s.frames[:n_context].reshape(-1), np.tile(s.silence, s.frames_sent - n_context))
    )
    return sent, s.track.audio(min_duration_s=sent.size / s.caps.input_rate)


def _outcome(
    s: _Session,
    sent: NDArray[np.float32],
    output: NDArray[np.float32],
    records: EventRecords,
    timing: ReplyTiming | None,
    error: SessionError | None,
    wall_s: float,
) -> SessionOutcome:
    caps = s.caps
    if error is not None:
        status, reason = "failed", error.reason
    elif timing is None or timing.onset_s is None:
        status, reason = "no-reply", EndReason.NO_REPLY.value
    else:
        status = "ok"
        reason = s.detector.ended.value if s.detector.ended else "server-closed"
    return SessionOutcome(
        status=status,
        end_reason=reason,
        timing=timing,
        send=send_stats(s.records.send_errors()),
        input_rate=caps.input_rate,
        output_rate=caps.output_rate,
        sent=sent,
        output=output,
        records=records,
        bytes_sent=s.client.bytes_sent,
        bytes_received=s.client.bytes_received,
        error=None if error is None else error.message,
        retryable=False if error is None else error.retryable,
        retry_after_s=getattr(error, "retry_after_s", None),
        wall_s=wall_s,
    )
