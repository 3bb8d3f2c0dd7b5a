"""Another model as the user: a two-model session's user side (``run --partner``).

The sample's context opens the conversation as in every session (turn 0); from then on the
partner model, connected beside the model under test on the same loop and clock, hears the model
and is heard by it, both live: once per frame, one frame each way. Frame n of the model's input
is the context's frame n (silence after it) with the partner's audio relayed into it; frame n of
the partner's input is the model's audio (``core.relay``: each side hears the other two frames
and the bridge later, exact to the sample). Both are built a frame ahead, from what each side
had sent by then, so at the due time they only go out, one right after the other: the model's,
then the partner's (its own sends timed against the same schedule and checked against the
budget).

The partner's own reply tracker decides its utterances, and each one becomes a user turn of the
model's conversation (``core.partnerturns``), so every turn's reply is measured as a partner
script's next turn is. Where a protocol needs its turns committed, each side's are, when the
other side's tracker ends them.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.base import DuplexClient
from duplexsim.core.errors import SessionError
from duplexsim.core.partnerturns import PartnerLimits, PartnerTurns
from duplexsim.core.records import EventRecords
from duplexsim.core.redact import redact
from duplexsim.core.relay import Relay
from duplexsim.core.replytracker import ReplyTracker
from duplexsim.core.timing import TimingBudget, check_timing
from duplexsim.core.turns import TurnSettings
from duplexsim.session.engine import SessionSettings
from duplexsim.session.eventpump import EventPump
from duplexsim.session.receiver import Receiver
from duplexsim.session.sender import Sender
from duplexsim.session.useraudio import FixedContext, Frame, PartnerSide

__all__ = ["ModelPartner"]

FloatArray = NDArray[np.float32]


class ModelPartner:
    """``UserAudio`` for a two-model session. ``partner`` is a fresh client of the partner model
    (its instructions already in its options); the session's ``settings`` decide the partner's
    utterances as they decide the model's replies (hangover, maximum length, VAD)."""

    fixed_turn = True
    listening = True

    def __init__(
        self,
        context: FloatArray,
        partner: DuplexClient,
        limits: PartnerLimits,
        settings: SessionSettings,
    ) -> None:
        self.context = FixedContext(context)
        self.partner = partner
        self.limits = limits
        self.settings = settings
        connect_s = partner.config.connect_timeout_s
        self.max_turn_s = max(self.context.max_turn_s, limits.time_s) + connect_s
        self.records = EventRecords()
        self.turns: PartnerTurns | None = None  # once the model's conversation is known
        self._model: ReplyTracker | None = None
        self._pump: EventPump | None = None
        self._sent = np.zeros(0, dtype=np.float32)
        self._frames_sent = 0
        self._commits = [0, 0]  # turns committed: the model's (utterances), the partner's
        self._outgoing: FloatArray | None = None  # the partner's next frame, built

    @property
    def end_reason(self) -> str | None:
        return None if self.turns is None else self.turns.end_reason

    async def prepare(self, client: DuplexClient, rate: int, frame_len: int) -> None:
        await self.context.prepare(client, rate, frame_len)
        self.client, self.frame_len = client, frame_len
        self.clock = client.clock  # one clock: the session's, as it handed it to the model
        frame_s = frame_len / rate
        caps, s = self.partner.capabilities, self.settings
        self.partner.use_clock(self.clock)
        self.sender = Sender(self.partner, frame_s, self.clock, self.records)
        # the partner's utterances: its replies by the session's rules, each waited for as long
        # as it takes (no reply timeout: the session's limits end a silence)
        turns = TurnSettings(s.turns.hangover_s, s.turns.max_reply_s, reply_timeout_s=math.inf)
        self.tracker = ReplyTracker(
            caps.output_rate, turns, s.vad, bridge_s=s.bridge_s, continuous=caps.continuous_output
        )
        self.tracker.every_frame = True
        self.receiver = Receiver(
            self.partner, self.tracker, self.records, self._log, max_reply_s=turns.max_reply_s
        )
        self.up = Relay(caps.output_rate, rate, frame_s, s.bridge_s)  # partner -> model
        out_rate = client.capabilities.output_rate
        self.down = Relay(out_rate, caps.input_rate, frame_s, s.bridge_s)  # model -> partner
        # whose turns must be committed, once the other side's tracker has ended them
        self._commit = (client.capabilities.manual_commit, caps.manual_commit)

    async def start(self) -> None:
        """The partner connects once the model has (T0 is taken after both)."""
        with self._as_partner():
            self.partner.watch_liveness(self.settings.stall_timeout_s)
            await self.partner.connect()
            if not self.partner.pollable:
                self.receiver.inbox = self._pump = EventPump(self.partner)
                self._pump.start()

    def timeline_started(self, t0: float) -> None:
        self.sender.t0 = self.receiver.t0 = self.receiver.last_rx = t0
        self.partner.timeline_started(t0)

    def listen(self, replies: ReplyTracker, start_s: float, end_s: float) -> list[dict[str, Any]]:
        """Before the model's frame [start_s, end_s): the partner's utterances as its turns
        (recorded as partner steps once the session is over, refined: ``settle``)."""
        if self.turns is None:
            self._model = replies
            self.turns = PartnerTurns(
                self.tracker.replies, replies.replies, self.limits, self.up.delay_s,
                self.settings.turns.reply_timeout_s, self.settings.vad.frame_s,
                self.down.delay_s,
            )  # fmt: skip
        self.turns.decide(start_s, end_s)
        return []

    def finished(self, replies: ReplyTracker, now_s: float) -> bool:
        return self.turns is not None and self.turns.finished(now_s)

    async def frame(self, n: int) -> Frame:
        """The model's frame ``n``, built a frame ahead: the context's, with what the partner
        said by now relayed into it; and the partner's frame ``n`` (what the model said), which
        goes out right after it (``frame_sent``)."""
        assert self._model is not None
        self._from_partner()
        await self._commit_model_turns()
        self._outgoing = self.down.frame(n, self._model.track)
        chunk, message = await self.context.frame(n)
        muted = None if self.turns is None else self.turns.muted_from_s
        voice = self.up.frame(n, self.tracker.track, muted)
        if np.any(voice):
            chunk, message = np.clip(chunk + voice, -1.0, 1.0), None  # encoded as mixed
        self._keep(n, chunk)
        return chunk, message

    async def frame_sent(self, n: int) -> None:
        """The model's frame ``n`` went out: the partner's goes right after it."""
        voice, self._outgoing = self._outgoing, None
        if voice is None or (self.turns is not None and self.turns.closed):
            return  # it said goodbye: nothing more goes to it
        with self._as_partner():
            try:
                sent = await self.sender.send(n, voice, None)
            except SessionError:
                self._from_partner()  # a close after its last words ends it well
                if self.turns is None or not self.turns.closed:
                    raise
                return
            self.receiver.check_stall(sent, self.settings.stall_timeout_s)
            await self._commit_partner_turns()

    def _from_partner(self) -> None:
        """Everything the partner sent so far, placed on its track; its tracker on the media
        time sent to it."""
        with self._as_partner():
            now = self.clock()
            if self.receiver.drain(now) and self.turns is not None and not self.turns.closed:
                seen = min(now - self.sender.t0, self.sender.media_s())
                self.tracker.closed(seen)
                self.tracker.end_of_turn(seen)  # its utterance under way ends with its stream
                self.turns.closed = True
            self.tracker.tick(self.sender.media_s())

    async def _commit_model_turns(self) -> None:
        """Each utterance over is a turn the model must be told of, where it needs that."""
        if self.turns is None or not self._commit[0]:
            return
        while self._commits[0] < self.turns.ended:
            self._commits[0] += 1
            await self.client.commit_turn()

    async def _commit_partner_turns(self) -> None:
        """Each reply of the model's that is over is a turn the partner must be told of."""
        if self._model is None or not self._commit[1]:
            return
        over = sum(t.ended_at_s is not None for t in self._model.replies.turns)
        while self._commits[1] < over:
            self._commits[1] += 1
            await self.partner.commit_turn()

    def _keep(self, n: int, chunk: FloatArray) -> None:
        """What frame ``n`` held, for the recording (``sent``)."""
        end = (n + 1) * self.frame_len
        if end > self._sent.size:
            grown = np.zeros(max(end, 2 * self._sent.size), dtype=np.float32)
            grown[: self._sent.size] = self._sent
            self._sent = grown
        self._sent[n * self.frame_len : end] = chunk
        self._frames_sent = max(self._frames_sent, n + 1)

    def turn_over(self, frames_sent: int) -> bool:
        return self.context.turn_over(frames_sent)

    def turn_audio(
        self, turn_frames: int | None, frames_sent: int, sent: FloatArray
    ) -> tuple[FloatArray, int]:
        return self.context.turn_audio(turn_frames, frames_sent, sent)

    def sent(self, frames_sent: int) -> FloatArray:
        return self._sent[: frames_sent * self.frame_len].copy()

    def settle(self, replies: ReplyTracker, end_s: float) -> list[dict[str, Any]]:
        """Each utterance relayed, its speech's end refined to the sample, as a partner step."""
        if self.turns is None:
            return []
        self.tracker.finish()
        audio = self.tracker.track.audio()

        def offset_of(j: int) -> float | None:
            return self.tracker.timing(None, audio, j).offset_s

        return [u.to_dict() for u in self.turns.settle(end_s, offset_of)]

    def partner_side(self, budget: TimingBudget) -> PartnerSide:
        records = self.records
        check = check_timing(
            records.send_errors(), records.loop_lags(), self.receiver.rx_lag_max_s,
            self.sender.frame_s, budget,
            receiver_late_ms=self.partner.capabilities.input_jitter_ms, throughout=True,
        )  # fmt: skip
        summary = {
            "client": self.partner.describe(),
            "limits": {"turns": self.limits.turns, "time_s": self.limits.time_s},
            "delay_s": {"to_model": round(self.up.delay_s, 6),
                        "to_partner": round(self.down.delay_s, 6)},
            "utterances": 0 if self.turns is None else len(self.turns.opened),
            "ended_by": self.end_reason,
            "bytes_sent": self.partner.bytes_sent,
            "bytes_received": self.partner.bytes_received,
        }  # fmt: skip
        return PartnerSide(records, check, summary)

    async def aclose(self) -> None:
        if self._pump is not None:
            await self._pump.aclose()
        with contextlib.suppress(Exception):
            await self.partner.aclose()

    def _log(self, t: float, direction: str, kind: str, **fields: Any) -> None:
        for name, value in fields.items():
            if isinstance(value, str):
                fields[name] = redact(value, (self.partner.config.api_key,))
        event = {"t": round(t, 6), "dir": f"partner-{direction}", "kind": kind, **fields}
        self.records.add_event(t, event)

    @contextlib.contextmanager
    def _as_partner(self) -> Iterator[None]:
        """A failure of the partner's is the session's, said to be the partner's."""
        try:
            yield
        except SessionError as exc:
            if not exc.message.startswith("partner: "):
                exc.args = (f"partner: {exc.message}", *exc.args[1:])
            raise
