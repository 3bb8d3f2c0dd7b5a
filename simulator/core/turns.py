"""End-of-reply detection: a pure state machine fed with VAD frames, end-of-turn signals, time."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["EndReason", "ReplyDetector", "ReplyWindow", "TurnSettings"]


class EndReason(StrEnum):
    HANGOVER = "vad-hangover"  # the model fell silent for the hangover
    END_OF_TURN = "end-of-turn"  # the protocol said the reply was complete
    MAX_LENGTH = "max-length"  # the reply hit the maximum length
    NO_REPLY = "no-reply"  # no speech within the reply timeout after the context


@dataclass(frozen=True)
class TurnSettings:
    hangover_s: float = 2.0
    max_reply_s: float = 20.0
    reply_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        for name in ("hangover_s", "max_reply_s", "reply_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")


@dataclass(frozen=True)
class ReplyWindow:
    """Where a reply may be: speech that ends before ``start_s`` (the start of Speaker A's final
    turn) is chatter, not the reply. The one statement of that rule: the session's reply tracker,
    the detector and a re-measurement of a recording all ask it."""

    start_s: float = 0.0

    def keeps(self, end_s: float) -> bool:
        """Whether speech that ends at ``end_s`` may be the reply."""
        return end_s > self.start_s

    def first_frame(self, frame_s: float) -> int:
        """The first frame of ``frame_s`` that ends after the window starts."""
        return max(0, int(self.start_s / frame_s + 1e-9))

    def clip(self, lo: int, hi: int, frame_s: float) -> tuple[int, int] | None:
        """Frames [lo, hi) of speech, less those that end before the window (None: all do)."""
        lo = max(lo, self.first_frame(frame_s))
        return (lo, hi) if hi > lo else None


class ReplyDetector:
    """Decides when the model's reply is over.

    Speech that ends before ``window_start_s`` (the start of Speaker A's final turn) is chatter,
    not the reply. ``context_end_s`` is when the last context frame is due.

    Two clocks drive it: ``now_s``, the media time sent (the context's end, the reply timeout as
    a listener waits for it), and ``model_s``, how far the model's own audio has got on the
    timeline (the hangover and the maximum length): a model running behind is heard out, not
    cut where our clock says its silence should have been.
    """

    def __init__(
        self, settings: TurnSettings, *, context_end_s: float, window_start_s: float = 0.0
    ):
        self.settings = settings
        self.context_end_s = context_end_s
        self.window = ReplyWindow(window_start_s)
        self.onset_s: float | None = None
        self.last_voiced_end_s: float | None = None
        self.ended: EndReason | None = None
        self.ended_at_s: float | None = None

    def voiced(self, start_s: float, end_s: float) -> None:
        """A voiced VAD frame spanning [start_s, end_s) on the timeline."""
        if self.ended is not None or not self.window.keeps(end_s):
            return
        if self.onset_s is None:
            self.onset_s = start_s
        self.last_voiced_end_s = max(end_s, self.last_voiced_end_s or end_s)

    def end_of_turn(self, now_s: float) -> None:
        """The protocol's end-of-turn signal; it ends the reply only once the reply has begun,
        and never inside the context (a model that answered a pause in Speaker A's turn is
        still heard out to the end of the context, then by the hangover rule)."""
        if self.ended is None and self.onset_s is not None and now_s >= self.context_end_s:
            self._end(EndReason.END_OF_TURN, now_s)

    def tick(self, now_s: float, model_s: float | None = None) -> EndReason | None:
        """Advance time; returns the reason once the reply is over. ``model_s`` defaults to
        ``now_s`` (a model whose silence is sent as nothing: time passing is its silence)."""
        if self.ended is None:
            reason = self.pending(now_s, model_s)
            if reason is not None:
                self._end(reason, self._end_at(reason, now_s))
        return self.ended

    def pending(self, now_s: float, model_s: float | None = None) -> EndReason | None:
        """What ``tick`` would decide, without deciding it (so a caller can bring the VAD up to
        date first)."""
        if self.ended is not None:
            return self.ended
        s = self.settings
        model = now_s if model_s is None else model_s
        if now_s < self.context_end_s:
            return None  # the whole context is always sent; a reply cannot end inside it
        if self.onset_s is None:
            if now_s >= self.context_end_s + s.reply_timeout_s:
                return EndReason.NO_REPLY
        elif self.last_voiced_end_s is not None and model >= self.last_voiced_end_s + s.hangover_s:
            return EndReason.HANGOVER
        elif model >= self.onset_s + s.max_reply_s:
            return EndReason.MAX_LENGTH
        return None

    def _end_at(self, reason: EndReason, now_s: float) -> float:
        """Where on the timeline the reply ended: where the rule was met in the model's audio
        (the hangover after its last voiced frame, its maximum length), else now."""
        s = self.settings
        if reason is EndReason.HANGOVER and self.last_voiced_end_s is not None:
            return self.last_voiced_end_s + s.hangover_s
        if reason is EndReason.MAX_LENGTH and self.onset_s is not None:
            return self.onset_s + s.max_reply_s
        return now_s

    def _end(self, reason: EndReason, now_s: float) -> None:
        self.ended = reason
        self.ended_at_s = now_s
