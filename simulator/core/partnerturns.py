"""A partner model's utterances as the user's turns (pure: no clock, no audio, no I/O).

In a two-model session (``run --partner``) the user's side is another model, relayed live: what it
says reaches the model under test ``delay_s`` after it was placed on the timeline
(``core.relay``), and the other way round. The partner's own reply tracker decides its
utterances, as the session's decides the model's replies: each utterance is the partner's reply
to a turn opened in the partner's conversation the moment its utterance before ended (it listens
from then on, with no reply timeout of its own). Each utterance is a user turn in the model's
conversation: opened where its relayed speech starts, its end given once the partner's tracker
has decided it, so the model's speech after it is measured as the reply to it (latency, overlap,
how it ended), as for a partner script's next turn.

Three things end the session: the turn limit (after ``turns`` utterances the partner is muted:
nothing from the end of the last one is relayed; the session ends once every reply is over), the
time limit (at ``time_s`` on the timeline, whatever is under way), and a partner with nothing
more to say (its stream closed, or it said nothing for the reply timeout after it heard that all
was over: ``back_s``, how much later it hears the model, and ``delay_s`` later).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from duplexsim.core.conversation import Conversation

__all__ = ["PartnerLimits", "PartnerTurns", "Utterance"]

EPS = 1e-9


@dataclass(frozen=True)
class PartnerLimits:
    """What ends a two-model session at the latest: the partner's utterances relayed as user
    turns, and the time on the timeline (Full-Duplex-Bench v2's examiner has 5 turns, 60 s)."""

    turns: int = 5
    time_s: float = 60.0

    def __post_init__(self) -> None:
        if self.turns < 1:
            raise ValueError(f"the partner's turn limit must be at least 1, not {self.turns}")
        if not 0 < self.time_s < math.inf:
            raise ValueError(f"the partner's time limit must be > 0 s, not {self.time_s}")


@dataclass(frozen=True)
class Utterance:
    """One of the partner's utterances and the user turn it made (the model's timeline)."""

    index: int  # the partner's utterance, from 0
    turn: int  # the user turn it made in the model's conversation
    start_s: float  # where its relayed speech starts (its onset, refined to the sample)
    end_s: float  # where its relayed speech ends (refined); where the session ended, if cut
    cut: bool  # the session ended before the partner's tracker decided its end
    decided_s: float | None  # the model's frame that heard its end had been decided
    given_end_s: float | None  # the end its turn was given then (on the VAD's frames)
    partner_onset_s: float  # its onset on the partner's own timeline

    def to_dict(self) -> dict[str, object]:
        """As a partner step (``outcome.partner``): a next turn the partner model took."""
        why = "the partner model spoke" + (" (cut by the session's end)" if self.cut else "")
        return {
            "step": self.index,
            "partner": "next_turn",
            "fired": True,
            "why": why,
            "turn": self.turn - 1,
            "by": "model",
            "at_s": round(self.start_s, 6),
            "due_s": round(self.start_s, 6),
            "late_s": 0.0,
            "clip_end_s": round(self.end_s, 6),
            "opens_turn": self.turn,
            "decided_s": None if self.decided_s is None else round(self.decided_s, 6),
            "given_end_s": None if self.given_end_s is None else round(self.given_end_s, 6),
            "partner_onset_s": round(self.partner_onset_s, 6),
        }


class PartnerTurns:
    """Follows the partner's conversation (its own tracker's) and opens and ends the user turns
    of the model's; ``delay_s``: how much later the model hears the partner (``Relay``)."""

    def __init__(
        self,
        partner: Conversation,
        model: Conversation,
        limits: PartnerLimits,
        delay_s: float,
        reply_timeout_s: float,
        frame_s: float = 0.01,
        back_s: float = 0.0,
    ) -> None:
        self.partner = partner
        self.model = model
        self.limits = limits
        self.delay_s = delay_s
        self.reply_timeout_s = reply_timeout_s
        self.frame_s = frame_s  # the partner's speech frames' (its VAD's)
        self.back_s = back_s  # how much later the partner hears the model
        partner.set_context_end(0.0)  # the partner listens from the start
        self.opened: list[int] = []  # the model's turn each utterance made, by utterance
        self._decided: list[tuple[float, float]] = []  # by utterance: (frame, end given)
        self.muted_from_s: float | None = None  # on the partner's timeline: past its turns
        self.closed = False  # the partner's stream ended: it says nothing more
        self.end_reason: str | None = None

    @property
    def ended(self) -> int:
        """Utterances over, their turns ended in the model's conversation."""
        return len(self._decided)

    def decide(self, frame_start_s: float, frame_end_s: float) -> None:
        """Before the model's frame [frame_start_s, frame_end_s) is built: the partner listens
        again after each utterance; each utterance whose relayed speech has begun by the frame's
        end opens its user turn; each one the partner's tracker has ended ends its turn."""
        partner = self.partner
        while (latest := partner.turns[-1]).ended_at_s is not None:
            # from the end of the speech frame it ended in: the rest of that frame is its own
            # (its protocol may end it before the VAD has had its last, partial frame)
            at = math.ceil(latest.ended_at_s / self.frame_s - 1e-6) * self.frame_s
            partner.open_turn(at, at)
        for j in range(len(self.opened), min(len(partner.turns), self.limits.turns)):
            onset = partner.reply(j).onset_s
            if onset is None or onset + self.delay_s >= frame_end_s - EPS:
                break
            self.opened.append(self.model.open_turn(onset + self.delay_s, math.inf))
        while len(self._decided) < len(self.opened):
            j = len(self._decided)
            heard = partner.turns[j]
            last = heard.detector.last_voiced_end_s
            if heard.ended_at_s is None or last is None:
                break
            end = last + self.delay_s
            self.model.end_turn(self.opened[j], end, end)
            self._decided.append((frame_start_s, end))
            if j == self.limits.turns - 1:
                self.muted_from_s = heard.ended_at_s

    def finished(self, now_s: float) -> bool:
        """Whether the session is over at ``now_s`` (the media time sent); ``end_reason`` says
        why once it is."""
        if self.end_reason is None:
            if now_s >= self.limits.time_s - EPS:
                self.end_reason = "time-limit"
            elif not self._under_way():
                self.end_reason = self._why_over(now_s)
        return self.end_reason is not None

    def _under_way(self) -> bool:
        """An utterance within the limit is heard or about to be, or a reply is still open."""
        heard = [j for j, t in enumerate(self.partner.turns) if t.detector.onset_s is not None]
        live = [j for j in heard if j < self.limits.turns]
        if len(live) > len(self._decided):
            return True  # begun and not yet relayed, or not yet over
        return any(t.ended_at_s is None for t in self.model.turns)

    def _why_over(self, now_s: float) -> str | None:
        if len(self._decided) >= self.limits.turns:
            return "turn-limit"
        if self.closed:
            return "partner-closed"
        ends = [t.ended_at_s for t in self.model.turns if t.ended_at_s is not None]
        ends += [self.model.turns[k].end_s for k in self.opened]
        # the reply timeout runs from when the partner heard the end, to when it would be heard
        wait = self.back_s + self.reply_timeout_s + self.delay_s
        if now_s >= max(ends, default=0.0) + wait - EPS:
            return "partner-silent"
        return None

    def settle(self, end_s: float, offset_of: Callable[[int], float | None]) -> list[Utterance]:
        """The session ended at ``end_s``: each utterance relayed, its speech's end refined to
        the sample (``offset_of``: the partner's tracker's, on its timeline) and given to its
        turn; one cut by the session's end keeps its turn open."""
        out = []
        for j, k in enumerate(self.opened):
            turn = self.model.turns[k]
            onset = turn.start_s - self.delay_s
            if j < len(self._decided):
                decided, given = self._decided[j]
                refined = offset_of(j)
                end = given if refined is None else refined + self.delay_s
                self.model.end_turn(k, end, end)
                out.append(Utterance(j, k, turn.start_s, end, False, decided, given, onset))
            else:
                last = self.partner.turns[j].detector.last_voiced_end_s
                heard = end_s if last is None else min(end_s, last + self.delay_s)
                out.append(Utterance(j, k, turn.start_s, heard, True, None, None, onset))
        return out
