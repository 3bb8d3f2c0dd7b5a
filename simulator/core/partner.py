"""A partner that reacts: the user's side of a session as a script of events triggered by what the
model does (pure: no clock, no audio, no I/O).

The script's steps run in order, each armed once the one before it fired or was skipped, and
each reacts to the model's reply to the user's latest turn (turn 0 is the sample's context):

- ``Interrupt``: once that reply has lasted ``after_onset_s``, a clip is played over it; the clip
  is the user's next turn;
- ``Backchannel``: at the reply's first pause of ``at_pause_s`` (or ``after_onset_s`` into it), a
  short clip; it is no turn of its own, the reply goes on;
- ``NextTurn``: ``gap_s`` after the reply ended (or ``timeout_s`` after the user's turn ended,
  whatever the model is doing), the user's next turn.

``Distractor`` steps are not in that order: each plays at its fixed time on the timeline (speech
not addressed to the model: background talk, the user talking to someone else).

The partner decides from a ``ReplyView``: the one tracker that decides the model's replies, on
the session's timeline. A decision is taken before a frame of the user's audio is built and
places its clip at the instant the trigger was met, inside that frame when the trigger falls in
it (so it is exact to the sample), else at the frame's start, late, with ``late_s`` recorded.
Every step ends as one ``PartnerEvent``: fired (when, why) or skipped (why).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = [
    "DISTRACTOR_LISTEN_S",
    "DISTRACTOR_WINDOW_S",
    "Backchannel",
    "Distractor",
    "Interrupt",
    "NextTurn",
    "Partner",
    "PartnerEvent",
    "PartnerScript",
    "ReplyState",
    "ReplyView",
    "Step",
    "TurnOpened",
    "script_bound_s",
]

EPS = 1e-9
# a model answers a distractor if it starts speaking this soon after the distractor's end; the
# session listens on that long and for a take-over's length (1 s) more before it ends
DISTRACTOR_WINDOW_S = 1.0
DISTRACTOR_LISTEN_S = DISTRACTOR_WINDOW_S + 1.0


@dataclass(frozen=True)
class Interrupt:
    clip: int  # index into the script's clips
    after_onset_s: float
    kind: Literal["interrupt"] = "interrupt"


@dataclass(frozen=True)
class Backchannel:
    clip: int
    at_pause_s: float | None = None  # exactly one of the two
    after_onset_s: float | None = None
    kind: Literal["backchannel"] = "backchannel"

    def __post_init__(self) -> None:
        if (self.at_pause_s is None) == (self.after_onset_s is None):
            raise ValueError("a backchannel takes exactly one of at_pause_s and after_onset_s")


@dataclass(frozen=True)
class NextTurn:
    clip: int
    gap_s: float
    timeout_s: float | None = None  # after the user's previous turn ended
    kind: Literal["next_turn"] = "next_turn"


@dataclass(frozen=True)
class Distractor:
    clip: int
    at_s: float
    kind: Literal["distractor"] = "distractor"


Step = Interrupt | Backchannel | NextTurn | Distractor


@dataclass(frozen=True)
class PartnerScript:
    steps: tuple[Step, ...]
    clip_s: tuple[float, ...]  # each clip's duration on the timeline

    def __post_init__(self) -> None:
        for step in self.steps:
            if not 0 <= step.clip < len(self.clip_s):
                raise ValueError(f"{step.kind} names clip {step.clip}, not one of the script's")

    @property
    def sequence(self) -> tuple[int, ...]:
        """The steps that run in order (all but distractors), by index."""
        return tuple(i for i, s in enumerate(self.steps) if not isinstance(s, Distractor))

    @property
    def distractors(self) -> tuple[int, ...]:
        return tuple(i for i, s in enumerate(self.steps) if isinstance(s, Distractor))


@dataclass(frozen=True)
class ReplyState:
    """The model's reply to one user turn, as the tracker has decided it so far."""

    onset_s: float | None  # its first speech (None: not yet)
    last_voiced_end_s: float | None  # the end of its latest speech
    ended_at_s: float | None  # where it ended (or stopped, talked over); None: still open


class ReplyView(Protocol):
    """What the partner reads of the model: how far its audio has been decided, and its reply
    to each user turn (turn 0: the context; a turn the partner opened: its number)."""

    @property
    def heard_s(self) -> float:
        """The model's speech is decided up to here on the timeline."""
        ...

    def reply(self, turn: int) -> ReplyState: ...


@dataclass(frozen=True)
class TurnOpened:
    """A step made a user turn: the clip from ``start_s`` to ``end_s`` awaits a reply."""

    turn: int
    start_s: float
    end_s: float


@dataclass(frozen=True)
class PartnerEvent:
    """One step's outcome: fired at ``at_s`` (its trigger met at ``due_s``) or skipped."""

    step: int
    kind: str
    fired: bool
    why: str
    turn: int  # the user turn whose reply it reacted to
    clip: int | None = None
    at_s: float | None = None  # where its clip starts on the timeline
    due_s: float | None = None  # where its trigger was met (at_s - due_s: how late it fired)
    opened: TurnOpened | None = None
    end_s: float | None = None  # where its clip ends

    @property
    def late_s(self) -> float:
        if self.at_s is None or self.due_s is None:
            return 0.0
        return max(0.0, self.at_s - self.due_s)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "step": self.step,
            "partner": self.kind,
            "fired": self.fired,
            "why": self.why,
            "turn": self.turn,
        }
        if self.fired:
            out |= {"clip": self.clip, "at_s": _r(self.at_s), "due_s": _r(self.due_s)}
            out |= {"late_s": _r(self.late_s), "clip_end_s": _r(self.end_s)}
        if self.opened is not None:
            out["opens_turn"] = self.opened.turn
        return out


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


class Partner:
    """Runs a ``PartnerScript`` against a ``ReplyView``. ``context_end_s``: where turn 0 (the
    context) ends on the timeline; ``sample_rate``: clips start on that rate's samples (the
    first at or after the instant decided)."""

    def __init__(
        self, script: PartnerScript, context_end_s: float, *, sample_rate: int | None = None
    ) -> None:
        self.script = script
        self.rate = sample_rate
        self._order = list(script.sequence)
        self._pending_distractors = list(script.distractors)
        self._next = 0  # position in ``_order`` of the armed step
        self.turn = 0  # the user turn whose reply the armed step watches
        self._turn_end_s = context_end_s  # where that turn's user audio ends
        self._turns = 1
        self._clips_end_s = context_end_s
        self.events: list[PartnerEvent] = []

    @property
    def armed(self) -> Step | None:
        if self._next >= len(self._order):
            return None
        return self.script.steps[self._order[self._next]]

    def decide(
        self, view: ReplyView, frame_start_s: float, frame_end_s: float
    ) -> list[PartnerEvent]:
        """Before the user's frame [frame_start_s, frame_end_s) is built: the steps that fire in
        it (or are skipped), in order. A step fired or skipped here arms the next, which may fire
        too, unless it opened a turn (the caller opens it in the view before the next frame)."""
        out: list[PartnerEvent] = []
        for i in list(self._pending_distractors):
            distractor = self.script.steps[i]
            assert isinstance(distractor, Distractor)
            if distractor.at_s < frame_end_s - EPS:
                self._pending_distractors.remove(i)
                out.append(self._fire(i, distractor.at_s, frame_start_s, "at its time"))
        while (armed := self.armed) is not None:
            event = self._step(self._order[self._next], armed, view, frame_start_s, frame_end_s)
            if event is None:
                break
            out.append(event)
            self._next += 1
            if event.opened is not None:
                break  # the next step watches a turn that begins in this frame: from the next
        self.events.extend(out)
        return out

    def finished(self, view: ReplyView, now_s: float) -> bool:
        """Every step has fired or been skipped, every clip has played (a distractor's, and
        ``DISTRACTOR_LISTEN_S`` after it), and every reply is over (one talked over too: the
        model may talk on past the turn that interrupted it)."""
        return (
            self.armed is None
            and not self._pending_distractors
            and now_s >= self._clips_end_s - EPS
            and all(view.reply(k).ended_at_s is not None for k in range(self._turns))
        )

    def _step(
        self, i: int, step: Step, view: ReplyView, start_s: float, end_s: float
    ) -> PartnerEvent | None:
        reply = view.reply(self.turn)
        if isinstance(step, NextTurn):
            return self._next_turn(i, step, reply, start_s, end_s)
        if reply.ended_at_s is not None:
            what = "no reply" if reply.onset_s is None else "the reply ended"
            return self._skip(i, f"{what} before it could fire")
        if isinstance(step, Interrupt):
            return self._after_onset(i, step.after_onset_s, reply, start_s, end_s)
        if isinstance(step, Backchannel):
            if step.after_onset_s is not None:
                return self._after_onset(i, step.after_onset_s, reply, start_s, end_s)
            assert step.at_pause_s is not None
            return self._at_pause(i, step.at_pause_s, reply, view.heard_s, start_s)
        raise AssertionError(step)  # distractors are not in the order

    def _after_onset(
        self, i: int, after_s: float, reply: ReplyState, start_s: float, end_s: float
    ) -> PartnerEvent | None:
        if reply.onset_s is None:
            return None
        due = reply.onset_s + after_s
        if due >= end_s - EPS:
            return None
        ms = round(after_s * 1000)
        return self._fire(i, due, start_s, f"the model had spoken {ms} ms")

    def _at_pause(
        self, i: int, pause_s: float, reply: ReplyState, heard_s: float, start_s: float
    ) -> PartnerEvent | None:
        last = reply.last_voiced_end_s
        if reply.onset_s is None or last is None or heard_s < last + pause_s - EPS:
            return None
        ms = round(pause_s * 1000)
        return self._fire(i, last + pause_s, start_s, f"the model paused {ms} ms")

    def _next_turn(
        self, i: int, step: NextTurn, reply: ReplyState, start_s: float, end_s: float
    ) -> PartnerEvent | None:
        if reply.ended_at_s is not None:
            due = max(reply.ended_at_s + step.gap_s, self._turn_end_s)
            why = f"{round(step.gap_s * 1000)} ms after the reply ended"
            if reply.onset_s is None:
                why = f"{round(step.gap_s * 1000)} ms after no reply"
            if due < end_s - EPS:
                return self._fire(i, due, start_s, why)
        if step.timeout_s is not None:
            due = self._turn_end_s + step.timeout_s
            if due < end_s - EPS:
                ms = round(step.timeout_s * 1000)
                return self._fire(i, due, start_s, f"timeout: {ms} ms after the user's turn")
        return None

    def _fire(self, i: int, due_s: float, start_s: float, why: str) -> PartnerEvent:
        step = self.script.steps[i]
        at = max(due_s, start_s)
        if self.rate is not None:
            at = math.ceil(at * self.rate - 1e-6) / self.rate
        clip_end = at + self.script.clip_s[step.clip]
        listen = DISTRACTOR_LISTEN_S if isinstance(step, Distractor) else 0.0
        self._clips_end_s = max(self._clips_end_s, clip_end + listen)
        opened = None
        if isinstance(step, Interrupt | NextTurn):
            opened = TurnOpened(self._turns, at, clip_end)
        event = PartnerEvent(
            i, step.kind, True, why, self.turn, step.clip, at, due_s, opened, clip_end
        )
        if opened is not None:
            self._turns += 1
            self.turn, self._turn_end_s = opened.turn, opened.end_s
        return event

    def _skip(self, i: int, why: str) -> PartnerEvent:
        return PartnerEvent(i, self.script.steps[i].kind, False, why, self.turn)


def script_bound_s(script: PartnerScript, per_turn_s: float) -> float:
    """The longest the script can keep a session going past its context: each step's clip,
    each step's wait (a reply can last ``per_turn_s``), each distractor's time."""
    total = 0.0
    for step in script.steps:
        if isinstance(step, Distractor):
            continue
        wait = per_turn_s
        if isinstance(step, NextTurn):
            limit = per_turn_s if step.timeout_s is None else min(per_turn_s, step.timeout_s)
            wait = step.gap_s + limit
        total += wait + script.clip_s[step.clip]
    late = max(
        (
            s.at_s + script.clip_s[s.clip] + DISTRACTOR_LISTEN_S
            for s in script.steps
            if isinstance(s, Distractor)
        ),
        default=0.0,
    )
    return max(total + per_turn_s, late)
