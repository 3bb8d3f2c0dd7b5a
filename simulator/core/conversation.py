"""The user's turns and the model's reply to each, decided from one stream of speech frames (pure).

Turn 0 is the sample's context; a partner (``duplexsim.core.partner``) opens more. Each turn's
reply is a ``ReplyDetector``, fed the speech frames that belong to it: a frame goes to the reply
still speaking, else to the latest turn's. A turn opened while the reply before it is still open
talks over that reply: the model has the floor until its first pause of ``yield_gap_s`` (then it
stopped, at the end of its speech before that pause); speech after the pause answers the new turn.

This is the ``ReplyView`` the partner reads, so the partner and the measurement take one decision:
the same frames, the same replies, the same ends.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from duplexsim.core.partner import ReplyState
from duplexsim.core.turns import ReplyDetector, TurnSettings

__all__ = ["TALKED_OVER", "YIELD_GAP_S", "Conversation", "UserTurn"]

# a talked-over model that falls silent this long has stopped (Full-Duplex-Bench's get_timing.py
# merges the model's speech over gaps up to 0.5 s: a shorter silence is a pause, not a stop)
YIELD_GAP_S = 0.5
TALKED_OVER = "talked-over"

ModelAt = Callable[[float | None], float | None]  # how far the model's audio has got past a point


@dataclass
class UserTurn:
    """One user turn and the model's reply to it."""

    start_s: float  # the user's audio for it starts here (turn 0: the window's start)
    end_s: float  # and ends here (turn 0: inf until the context's last frame is sent)
    detector: ReplyDetector
    speech_end_s: float | None = None  # where the user's speech in it ended
    talked_over_s: float | None = None  # a later turn started while this reply was open
    stopped_s: float | None = None  # then the reply stopped here (its speech's end, or no reply)

    @property
    def open(self) -> bool:
        """It still takes speech frames."""
        return self.detector.ended is None and self.stopped_s is None

    @property
    def ended_at_s(self) -> float | None:
        if self.stopped_s is not None:
            return self.stopped_s
        return self.detector.ended_at_s

    @property
    def end_reason(self) -> str | None:
        if self.stopped_s is not None:
            return TALKED_OVER
        return None if self.detector.ended is None else self.detector.ended.value


class Conversation:
    """One stream of the model's speech frames, split into the replies to the user's turns.

    ``refine`` maps an onset on the VAD's frame grid (and the end of the speech heard after it)
    to the sample (the tracker refines it on its track); without it onsets stay on the grid."""

    def __init__(
        self,
        settings: TurnSettings,
        *,
        window_start_s: float = 0.0,
        yield_gap_s: float = YIELD_GAP_S,
        refine: Callable[[float, float], float] | None = None,
    ) -> None:
        self.settings = settings
        self.yield_gap_s = yield_gap_s
        self.refine = refine
        self.heard_s = 0.0
        first = ReplyDetector(settings, context_end_s=math.inf, window_start_s=window_start_s)
        self.turns = [UserTurn(window_start_s, math.inf, first)]
        self._onsets: dict[int, float] = {}
        # all of the model's speech, merged over silences shorter than the yield gap (its
        # pauses): what a distractor or a backchannel is measured against
        self.speech: list[list[float]] = []
        self._reported: set[int] = set()  # turns whose end ``tick`` has told

    @property
    def first(self) -> ReplyDetector:
        """The reply to the context: the session's own reply."""
        return self.turns[0].detector

    def set_context_end(self, end_s: float) -> None:
        """The context's last frame is sent: turn 0's user audio ends here."""
        self.end_turn(0, end_s)

    def end_turn(self, k: int, end_s: float, speech_end_s: float | None = None) -> None:
        """User turn ``k``'s audio ends at ``end_s`` (a turn opened before its end was known: the
        context, a partner model's utterance); its reply cannot end, nor time out, before."""
        turn = self.turns[k]
        turn.end_s = end_s
        turn.detector.context_end_s = end_s
        if speech_end_s is not None:
            turn.speech_end_s = speech_end_s

    def open_turn(self, start_s: float, end_s: float, speech_end_s: float | None = None) -> int:
        """A user turn from ``start_s`` to ``end_s``; the replies still open are talked over."""
        for turn in self.turns:
            if turn.open and turn.talked_over_s is None:
                turn.talked_over_s = start_s
                if turn.detector.onset_s is None:
                    turn.stopped_s = start_s  # it never began: nothing to stop
        detector = ReplyDetector(self.settings, context_end_s=end_s, window_start_s=start_s)
        self.turns.append(UserTurn(start_s, end_s, detector, speech_end_s))
        return len(self.turns) - 1

    def voiced(self, start_s: float, end_s: float) -> None:
        """A speech frame [start_s, end_s) of the model on the timeline (in order)."""
        if self.speech and start_s - self.speech[-1][1] < self.yield_gap_s - 1e-9:
            self.speech[-1][1] = max(self.speech[-1][1], end_s)
        else:
            self.speech.append([start_s, end_s])
        self._yield(start_s)
        for turn in self.turns:
            if turn.talked_over_s is not None and self._tail_of(turn, start_s):
                return  # a talked-over reply's last speech, heard after it ended: its own
            if turn.open and (turn.talked_over_s is not None or turn is self.turns[-1]):
                turn.detector.voiced(start_s, end_s)
                return

    def _tail_of(self, turn: UserTurn, start_s: float) -> bool:
        """Speech from ``start_s`` goes on from ``turn``'s reply, which is over (its protocol
        said so before the VAD had heard its end): a new turn's reply begins after a yield gap."""
        last = turn.detector.last_voiced_end_s
        return not turn.open and last is not None and start_s < last + self.yield_gap_s - 1e-9

    def heard(self, heard_s: float) -> None:
        """The model's speech is decided up to ``heard_s``: silence up to there is final."""
        self.heard_s = max(self.heard_s, heard_s)
        self._yield(self.heard_s)

    def _yield(self, t: float) -> None:
        """Talked-over replies silent for the yield gap by ``t`` have stopped."""
        for turn in self.turns:
            last = turn.detector.last_voiced_end_s
            talked_over = turn.open and turn.talked_over_s is not None
            if talked_over and last is not None and t >= last + self.yield_gap_s - 1e-9:
                turn.stopped_s = last

    def end_of_turn(self, now_s: float) -> None:
        """The protocol said the reply is complete: the reply speaking now."""
        turn = self._speaking()
        if turn is not None:
            turn.detector.end_of_turn(now_s)

    def _speaking(self) -> UserTurn | None:
        return next((t for t in self.turns if t.open), None)

    def pending(self, now_s: float, model_at: ModelAt) -> bool:
        """Whether a tick would end a reply now (the VAD should catch up first)."""
        return any(
            t.detector.pending(now_s, model_at(t.detector.last_voiced_end_s)) is not None
            for t in self.turns
            if t.open
        )

    def tick(self, now_s: float, model_at: ModelAt) -> list[tuple[int, str]]:
        """Advance time; the replies that ended (or stopped) since the last tick, by turn, with
        the reason."""
        ended = []
        for k, turn in enumerate(self.turns):
            if turn.open:
                turn.detector.tick(now_s, model_at(turn.detector.last_voiced_end_s))
            reason = turn.end_reason
            if reason is not None and k not in self._reported:
                self._reported.add(k)
                ended.append((k, reason))
        return ended

    def onset_s(self, k: int) -> float | None:
        """The reply's onset, refined to the sample once known."""
        d = self.turns[k].detector
        onset = d.onset_s
        if onset is None or self.refine is None:
            return onset
        if k not in self._onsets:
            self._onsets[k] = self.refine(onset, d.last_voiced_end_s or onset)
        return self._onsets[k]

    def reply(self, turn: int) -> ReplyState:
        t = self.turns[turn]
        return ReplyState(self.onset_s(turn), t.detector.last_voiced_end_s, t.ended_at_s)
