"""A two-model session played again (``replay``): the partner model is not there, what it said is.

The model heard ``input.wav`` (the context with the partner's voice relayed into it); each of the
partner's utterances opened its user turn in the frame where its relayed speech began, and was
given its end in the frame where the partner's tracker had decided it (``outcome.partner``:
``at_s``, ``decided_s``, ``given_end_s``), and refined once the session was over
(``clip_end_s``). Played again frame by frame with the model's recorded audio, the session takes
its decisions anew from the same turns at the same frames.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.base import DuplexClient
from duplexsim.core.audio import frame_signal, resample
from duplexsim.core.replytracker import ReplyTracker
from duplexsim.session.useraudio import FixedContext, Frame, OneModel

__all__ = ["RecordedPartner"]

FloatArray = NDArray[np.float32]
EPS = 1e-9


class RecordedPartner(OneModel):
    """``input``: what the model heard, at ``input_rate``; ``steps``: ``outcome.partner``;
    ``ended_by``: why the recorded session ended (``outcome.partner_model``)."""

    fixed_turn = True
    listening = True

    def __init__(
        self,
        context: FloatArray,
        heard: FloatArray,
        input_rate: int,
        steps: Sequence[Mapping[str, Any]],
        ended_by: str | None,
    ) -> None:
        self.context = FixedContext(context)
        self.heard, self.input_rate = heard, input_rate
        self.steps = [dict(s) for s in steps]
        self.end_reason = ended_by
        self.max_turn_s = max(self.context.max_turn_s, heard.size / input_rate)
        self.end_s = heard.size / input_rate
        self._turns: list[int] = []  # the model's turn each step opened
        self._ended = 0

    async def prepare(self, client: DuplexClient, rate: int, frame_len: int) -> None:
        await self.context.prepare(client, rate, frame_len)
        self.frames = frame_signal(resample(self.heard, self.input_rate, rate), frame_len)
        self.frame_len = frame_len

    async def start(self) -> None:
        return None

    def listen(self, replies: ReplyTracker, start_s: float, end_s: float) -> list[dict[str, Any]]:
        """Each recorded utterance opens its turn and is given its end in the frames they did."""
        steps = self.steps
        while len(self._turns) < len(steps) and steps[len(self._turns)]["at_s"] < end_s - EPS:
            self._turns.append(replies.open_turn(float(steps[len(self._turns)]["at_s"]), math.inf))
        while self._ended < len(self._turns):
            step = steps[self._ended]
            decided, given = step.get("decided_s"), step.get("given_end_s")
            if decided is None or given is None or float(decided) > start_s + EPS:
                break
            end = float(given)
            replies.replies.end_turn(self._turns[self._ended], end, end)
            self._ended += 1
        return []

    def finished(self, replies: ReplyTracker, now_s: float) -> bool:
        """Where the recorded session ended."""
        return now_s >= self.end_s - EPS

    async def frame(self, n: int) -> Frame:
        if n < len(self.frames):
            return self.frames[n], None
        return np.zeros(self.frame_len, dtype=np.float32), None

    def turn_over(self, frames_sent: int) -> bool:
        return self.context.turn_over(frames_sent)

    def turn_audio(
        self, turn_frames: int | None, frames_sent: int, sent: FloatArray
    ) -> tuple[FloatArray, int]:
        return self.context.turn_audio(turn_frames, frames_sent, sent)

    def sent(self, frames_sent: int) -> FloatArray:
        return np.asarray(self.frames[:frames_sent].reshape(-1), dtype=np.float32)

    def settle(self, replies: ReplyTracker, end_s: float) -> list[dict[str, Any]]:
        """The utterances' refined ends, as the recorded session gave them at its end."""
        for k, step in zip(self._turns, self.steps, strict=False):
            if step.get("decided_s") is not None:
                end = float(step["clip_end_s"])
                replies.replies.end_turn(k, end, end)
        return self.steps[: len(self._turns)]
