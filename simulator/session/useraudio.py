"""The user's side of a session as one interface: a fixed context, or a live source.

A session asks its ``UserAudio`` for frame n, sends it on the schedule, and asks whether the
user's turn is over; it never branches on where the audio comes from.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.base import DuplexClient, WireMessage
from duplexsim.core.audio import frame_signal, resample
from duplexsim.core.records import EventRecords
from duplexsim.core.replytracker import ReplyTracker
from duplexsim.core.timing import TimingBudget, TimingCheck

__all__ = [
    "CONTEXT_RATE",
    "FixedContext",
    "LiveInput",
    "LiveSource",
    "OneModel",
    "PartnerSide",
    "UserAudio",
]

CONTEXT_RATE = 16000
Frame = tuple[NDArray[np.float32], WireMessage | None]  # the samples, and their message if encoded


@dataclass(frozen=True)
class PartnerSide:
    """A partner model's half of a two-model session: its own sends and receipts (recorded
    under their own directions), its timing against the budget, and what it was."""

    records: EventRecords
    check: TimingCheck
    summary: dict[str, Any]


class UserAudio(Protocol):
    max_turn_s: float  # the longest the user's turn can last (for the session's deadline)
    fixed_turn: bool  # the turn's end is known before streaming (its frames are all there)
    # it reacts to the model (a partner): the session keeps the model's speech decided up to
    # each frame for it, and asks it before each frame
    listening: bool

    @property
    def end_reason(self) -> str | None:
        """Why the user ended the session, where it did (a partner model's limits)."""
        ...

    def listen(self, replies: ReplyTracker, start_s: float, end_s: float) -> list[dict[str, Any]]:
        """Before the frame [start_s, end_s) is built: what the user decides, seeing the model's
        replies so far; the decisions as events to record."""
        ...

    def finished(self, replies: ReplyTracker, now_s: float) -> bool:
        """The user has nothing more to say and the reply to its last turn is over."""
        ...

    async def prepare(self, client: DuplexClient, rate: int, frame_len: int) -> None:
        """Before connecting: get the frames ready (encoded ahead where the client can)."""

    async def start(self) -> None:
        """After connecting: returns once frame 0 can be read (T0 is taken then)."""

    def timeline_started(self, t0: float) -> None:
        """T0 is taken: the clock's value when frame 0 is due."""

    async def frame(self, n: int) -> Frame:
        """Frame ``n``; waits for a live source's."""
        ...

    async def frame_sent(self, n: int) -> None:
        """Frame ``n`` went out (asked of a user who listens: a partner model's own frame goes
        right after it)."""

    def turn_over(self, frames_sent: int) -> bool:
        """Whether the user's turn is over once ``frames_sent`` frames are out."""
        ...

    def sent(self, frames_sent: int) -> NDArray[np.float32]:
        """Everything the first ``frames_sent`` frames held."""
        ...

    def turn_audio(
        self, turn_frames: int | None, frames_sent: int, sent: NDArray[np.float32]
    ) -> tuple[NDArray[np.float32], int]:
        """The user's turn as audio and its rate, to find where its speech ended."""
        ...

    def settle(self, replies: ReplyTracker, end_s: float) -> list[dict[str, Any]]:
        """Streaming is over at ``end_s`` (CPU work: the session runs it off its loop): what the
        user knows only now (a partner model's utterances, refined), as events to record."""
        ...

    def partner_side(self, budget: TimingBudget) -> PartnerSide | None:
        """A partner model's half of the session (None: the user is no model)."""
        ...

    async def aclose(self) -> None:
        """The session is over: close what the user side opened."""


class OneModel:
    """The user side of a session with one model: nothing of its own to start, settle or close."""

    end_reason: str | None = None

    def timeline_started(self, t0: float) -> None:
        return None

    async def frame_sent(self, n: int) -> None:
        return None

    def settle(self, replies: ReplyTracker, end_s: float) -> list[dict[str, Any]]:
        return []

    def partner_side(self, budget: TimingBudget) -> PartnerSide | None:
        return None

    async def aclose(self) -> None:
        return None


class FixedContext(OneModel):
    """A sample's context (16 kHz), then silence for as long as the session lasts."""

    fixed_turn = True
    listening = False

    def __init__(self, context: NDArray[np.float32]) -> None:
        self.context = context
        self.max_turn_s = context.size / CONTEXT_RATE
        self.frames = np.zeros((0, 0), dtype=np.float32)
        self.silence = np.zeros(0, dtype=np.float32)
        self.encoded: Sequence[WireMessage] = ()
        self.encoded_silence: WireMessage | None = None

    async def prepare(self, client: DuplexClient, rate: int, frame_len: int) -> None:
        self.frames = frame_signal(resample(self.context, CONTEXT_RATE, rate), frame_len)
        self.silence = np.zeros(frame_len, dtype=np.float32)
        await asyncio.to_thread(self._encode, client)

    def _encode(self, client: DuplexClient) -> None:
        frames = client.encode_audio(self.frames)
        silence = client.encode_audio(self.silence[None])
        if frames is not None and silence is not None:
            self.encoded_silence = silence[0]
            # a tuple of bytes or str: the collector stops tracking it at its first pass, where
            # a list would be walked by every collection of its generation while sessions stream
            self.encoded = tuple(frames)

    async def start(self) -> None:
        return None

    def listen(self, replies: ReplyTracker, start_s: float, end_s: float) -> list[dict[str, Any]]:
        return []

    def finished(self, replies: ReplyTracker, now_s: float) -> bool:
        return replies.reply(0).ended_at_s is not None

    async def frame(self, n: int) -> Frame:
        if n < len(self.frames):
            return self.frames[n], (self.encoded[n] if self.encoded else None)
        return self.silence, self.encoded_silence

    def turn_over(self, frames_sent: int) -> bool:
        return frames_sent >= len(self.frames)

    def turn_audio(
        self, turn_frames: int | None, frames_sent: int, sent: NDArray[np.float32]
    ) -> tuple[NDArray[np.float32], int]:
        return self.context, CONTEXT_RATE

    def sent(self, frames_sent: int) -> NDArray[np.float32]:
        n_context = min(frames_sent, len(self.frames))
        return np.concatenate(
            (self.frames[:n_context].reshape(-1), np.tile(self.silence, frames_sent - n_context))
        )


class LiveInput(Protocol):
    """A live source (a microphone): it delivers frames as they come and decides when the
    user's turn is over (the reply is then detected as usual, while the source keeps
    streaming: the user can talk over the reply)."""

    max_turn_s: float

    async def start(self, rate: int, frame_len: int) -> None:
        """Get ready to deliver frames of ``frame_len`` samples at ``rate`` Hz; returns once the
        first one can be read."""

    async def read(self) -> NDArray[np.float32]:
        """The next frame; waits for it."""
        ...

    @property
    def turn_ended(self) -> bool: ...


class LiveSource(OneModel):
    """A ``LiveInput`` as the session's user audio: frames sent as they come (a late one as
    soon as it is there), the turn over when the source says so."""

    fixed_turn = False
    listening = False

    def __init__(self, live: LiveInput) -> None:
        self.live = live
        self.max_turn_s = live.max_turn_s
        self._rate = self._frame_len = 0
        self._frames: list[NDArray[np.float32]] = []

    async def prepare(self, client: DuplexClient, rate: int, frame_len: int) -> None:
        self._rate, self._frame_len = rate, frame_len

    async def start(self) -> None:
        await self.live.start(self._rate, self._frame_len)

    def listen(self, replies: ReplyTracker, start_s: float, end_s: float) -> list[dict[str, Any]]:
        return []

    def finished(self, replies: ReplyTracker, now_s: float) -> bool:
        return replies.reply(0).ended_at_s is not None

    async def frame(self, n: int) -> Frame:
        chunk = await self.live.read()
        self._frames.append(chunk)
        return chunk, None

    def turn_over(self, frames_sent: int) -> bool:
        return self.live.turn_ended

    def turn_audio(
        self, turn_frames: int | None, frames_sent: int, sent: NDArray[np.float32]
    ) -> tuple[NDArray[np.float32], int]:
        turn = frames_sent if turn_frames is None else turn_frames
        return sent[: turn * self._frame_len], self._rate

    def sent(self, frames_sent: int) -> NDArray[np.float32]:
        frames = self._frames[:frames_sent]
        return np.concatenate(frames) if frames else np.zeros(0, dtype=np.float32)
