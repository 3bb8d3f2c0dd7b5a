"""A partner's side of a session as ``UserAudio``: the sample's context, then the clips its script
decides to play, mixed in at the sample where each was decided (``core.partner``).

Before each frame is built the session hands it the conversation (the one tracker of the model's
replies) and the frame's span; the partner's decisions come back as events the session records,
and a step that makes a user turn (an interruption, a next turn) opens it in the conversation,
so the model's next speech is measured as the reply to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.base import DuplexClient
from duplexsim.core.audio import read_audio, resample
from duplexsim.core.partner import Partner, PartnerEvent, script_bound_s
from duplexsim.core.partnerfield import ScriptEntry, partner_script
from duplexsim.core.replytracker import ReplyTracker
from duplexsim.core.timing import speech_end
from duplexsim.core.turns import TurnSettings
from duplexsim.core.vad import VadConfig
from duplexsim.session.useraudio import CONTEXT_RATE, FixedContext, Frame, OneModel

__all__ = ["PartnerAudio", "PartnerClips", "read_partner_clips"]


class PartnerClips:
    """A script's clips at 16 kHz and where the speech in each ends (seconds into the clip)."""

    def __init__(
        self,
        entries: Sequence[ScriptEntry],
        clips: Sequence[NDArray[np.float32]],
        speech_end_s: Sequence[float | None],
    ) -> None:
        if not len(entries) == len(clips) == len(speech_end_s):
            raise ValueError("one clip and one speech end per step")
        self.entries = tuple(entries)
        self.clips = tuple(clips)
        self.speech_end_s = tuple(speech_end_s)


def read_partner_clips(entries: Sequence[ScriptEntry], vad: VadConfig) -> PartnerClips:
    """Decode a script's clips at 16 kHz and find where the speech in each ends (CPU work: a
    runner does it in its worker pool)."""
    clips = [read_audio(e.clip, sample_rate=CONTEXT_RATE).samples for e in entries]
    return PartnerClips(entries, clips, [speech_end(c, CONTEXT_RATE, vad) for c in clips])


class PartnerAudio(OneModel):
    """The context as ``FixedContext`` plays it, and the partner's clips over it."""

    fixed_turn = True
    listening = True

    def __init__(
        self, context: NDArray[np.float32], clips: PartnerClips, turns: TurnSettings
    ) -> None:
        self.context = FixedContext(context)
        self.clips = clips
        # the longest the model can take over one turn: wait for a reply, its length, its end
        per_turn_s = turns.reply_timeout_s + turns.max_reply_s + turns.hangover_s
        rough = partner_script(clips.entries, [c.size / CONTEXT_RATE for c in clips.clips])
        self.max_turn_s = self.context.max_turn_s + script_bound_s(rough, per_turn_s)
        self.rate = CONTEXT_RATE
        self.frame_len = 0
        self.partner: Partner | None = None
        self.played: list[tuple[int, NDArray[np.float32]]] = []  # (first sample, clip) in order
        self._clips: tuple[NDArray[np.float32], ...] = ()

    @property
    def events(self) -> list[PartnerEvent]:
        return [] if self.partner is None else self.partner.events

    async def prepare(self, client: DuplexClient, rate: int, frame_len: int) -> None:
        await self.context.prepare(client, rate, frame_len)
        self.rate, self.frame_len = rate, frame_len
        self._clips = tuple(resample(c, CONTEXT_RATE, rate) for c in self.clips.clips)
        script = partner_script(self.clips.entries, [c.size / rate for c in self._clips])
        context_end = len(self.context.frames) * frame_len / rate
        self.partner = Partner(script, context_end, sample_rate=rate)

    async def start(self) -> None:
        return None

    def listen(self, replies: ReplyTracker, start_s: float, end_s: float) -> list[dict[str, Any]]:
        """Before the frame [start_s, end_s) is built: what the partner decides, as events."""
        assert self.partner is not None
        out = []
        for event in self.partner.decide(replies, start_s, end_s):
            if event.fired and event.clip is not None and event.at_s is not None:
                first = round(event.at_s * self.rate)
                self.played.append((first, self._clips[event.clip]))
                if event.opened is not None:
                    speech = self.clips.speech_end_s[event.clip]
                    turn = replies.open_turn(
                        event.opened.start_s,
                        event.opened.end_s,
                        None if speech is None else event.at_s + speech,
                    )
                    assert turn == event.opened.turn
            out.append(event.to_dict())
        return out

    def finished(self, replies: ReplyTracker, now_s: float) -> bool:
        assert self.partner is not None
        return self.partner.finished(replies, now_s)

    async def frame(self, n: int) -> Frame:
        chunk, message = await self.context.frame(n)
        lo = n * self.frame_len
        hi = lo + self.frame_len
        mixed: NDArray[np.float32] | None = None
        for first, clip in self.played:
            a, b = max(lo, first), min(hi, first + clip.size)
            if a < b:
                if mixed is None:
                    mixed = chunk.copy()
                mixed[a - lo : b - lo] += clip[a - first : b - first]
        if mixed is None:
            return chunk, message
        return np.clip(mixed, -1.0, 1.0), None  # encoded by the client, as mixed

    def turn_over(self, frames_sent: int) -> bool:
        return self.context.turn_over(frames_sent)

    def turn_audio(
        self, turn_frames: int | None, frames_sent: int, sent: NDArray[np.float32]
    ) -> tuple[NDArray[np.float32], int]:
        return self.context.turn_audio(turn_frames, frames_sent, sent)

    def sent(self, frames_sent: int) -> NDArray[np.float32]:
        out = self.context.sent(frames_sent)
        for first, clip in self.played:
            n = max(0, min(clip.size, out.size - first))
            out[first : first + n] += clip[:n]
        return np.clip(out, -1.0, 1.0)
