"""What a model did at each partner step, and per task over a run (pure; docs/metrics.md,
"A partner that reacts").

Each measure comes from a session's one decision: its turns (each user turn and the model's
reply to it, refined to the sample), the partner's steps as they fired, and the model's speech
(its voiced frames, merged over silences shorter than ``YIELD_GAP_S``: a pause, not a stop).
The definitions follow Full-Duplex-Bench v1/v1.5 (Lin et al., 2025): a stop is a silence of 0.5
s (its ``get_timing.py`` merges the model's speech over gaps up to 0.5 s), a take-over is
speech of at least 1 s (its TOR), latencies run from the end of the user's speech to the
model's onset.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from duplexsim.core.conversation import YIELD_GAP_S
from duplexsim.core.partner import DISTRACTOR_WINDOW_S
from duplexsim.core.takeover import TAKEOVER_MIN_S

__all__ = [
    "PartnerRecord",
    "PartnerSummary",
    "ScoredTurn",
    "StepResult",
    "step_results",
    "summarise_steps",
]

Record = Mapping[str, Any]


@dataclass(frozen=True)
class StepResult:
    """One fired step and what the model did (fields by kind; None: does not apply)."""

    step: int
    kind: str
    at_s: float
    # interrupt
    stopped: bool | None = None
    stop_latency_s: float | None = None
    answered: bool | None = None
    response_latency_s: float | None = None
    resumed: bool | None = None  # talked on through it: went on with the reply it was giving
    # backchannel
    kept_floor: bool | None = None
    floor_gap_s: float | None = None
    # next turn
    replied: bool | None = None
    latency_s: float | None = None
    overlap_s: float | None = None
    turn: int | None = None  # the user turn it made (interrupt, next turn)
    # distractor
    speaking_at_start: bool | None = None
    took_turn: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepResult:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def step_results(
    turns: Sequence[Record], events: Sequence[Record], speech: Sequence[Sequence[float]]
) -> list[StepResult]:
    """What the model did at each fired step of one session."""
    out = []
    spans = [(float(a), float(b)) for a, b in speech]
    for e in events:
        if not e.get("fired"):
            continue
        kind, at = str(e["partner"]), float(e["at_s"])
        if kind == "interrupt":
            out.append(_interrupt(e, turns, at))
        elif kind == "backchannel":
            out.append(_backchannel(e, turns, spans, at))
        elif kind == "next_turn":
            out.append(_next_turn(e, turns, at))
        elif kind == "distractor":
            out.append(_distractor(e, turns, spans, at))
    return out


def _interrupt(e: Record, turns: Sequence[Record], at: float) -> StepResult:
    """Stopped: the interrupted reply ended before the interruption's speech did, or within a
    yield gap of it; the stop latency runs from the interruption's start to the reply's last
    speech (0 if the model was in a pause it never left). Answered: the model spoke after it
    stopped; the response latency runs from the end of the interruption's speech."""
    reply, turn = turns[int(e["turn"])], turns[int(e["opens_turn"])]
    speech_end = turn["speech_end_s"] if turn["speech_end_s"] is not None else turn["end_s"]
    offset = reply["offset_s"]
    over = reply["end_reason"] is not None and offset is not None
    stopped = over and offset < speech_end + YIELD_GAP_S
    answered = turn["onset_s"] is not None
    return StepResult(
        int(e["step"]),
        "interrupt",
        at,
        stopped=stopped,
        stop_latency_s=max(0.0, offset - at) if stopped and offset is not None else None,
        answered=answered,
        response_latency_s=turn["latency_s"] if answered else None,
        resumed=not stopped,
        turn=int(e["opens_turn"]),
    )


def _backchannel(
    e: Record, turns: Sequence[Record], spans: list[tuple[float, float]], at: float
) -> StepResult:
    """Kept the floor: the model speaks on within a yield gap of the backchannel's end (it was
    speaking then, or took up its reply again that soon)."""
    end = float(e["clip_end_s"]) if "clip_end_s" in e else at
    reply = turns[int(e["turn"])]
    limit = reply["offset_s"]
    gap = None
    for a, b in spans:
        if a <= end < b:
            gap = 0.0
            break
        if a > end and (limit is None or a < limit):
            gap = a - end
            break
    kept = gap is not None and gap < YIELD_GAP_S
    return StepResult(int(e["step"]), "backchannel", at, kept_floor=kept, floor_gap_s=gap)


def _next_turn(e: Record, turns: Sequence[Record], at: float) -> StepResult:
    turn = turns[int(e["opens_turn"])]
    replied = turn["onset_s"] is not None
    return StepResult(
        int(e["step"]),
        "next_turn",
        at,
        replied=replied,
        latency_s=turn["latency_s"] if replied else None,
        overlap_s=turn["overlap_s"] if replied else None,
        turn=int(e["opens_turn"]),
    )


def _distractor(
    e: Record, turns: Sequence[Record], spans: list[tuple[float, float]], at: float
) -> StepResult:
    """Took the turn: the model, silent when the distractor began, started speech of at least
    1 s (a take-over) from its start to ``DISTRACTOR_WINDOW_S`` after its end, and that speech
    is no reply to a user turn whose speech had ended before it."""
    end = float(e.get("clip_end_s", at))
    speaking = any(a <= at < b for a, b in spans)
    took = not speaking and any(
        at <= a < end + DISTRACTOR_WINDOW_S and b - a >= TAKEOVER_MIN_S and not _a_reply(a, turns)
        for a, b in spans
    )
    return StepResult(int(e["step"]), "distractor", at, speaking_at_start=speaking, took_turn=took)


def _a_reply(start: float, turns: Sequence[Record]) -> bool:
    """Speech starting at ``start`` is the reply to a user turn whose speech ended before it
    (onsets are refined to the sample, speech on the VAD's frames: within a frame)."""
    for t in turns:
        onset, end = t["onset_s"], t["speech_end_s"]
        if onset is not None and abs(onset - start) <= 0.03 and (end is None or end <= onset):
            return True
    return False


@dataclass(frozen=True)
class ScoredTurn:
    """A next turn's reply, scored like a sample of its own (``<sample id>.turn<k>``) when its
    step names the emotion of a reference."""

    turn: int
    step: int
    emotion: str | None
    onset_s: float | None
    duration_s: float | None

    def key(self, sample_id: str) -> str:
        return f"{sample_id}.turn{self.turn}"


@dataclass(frozen=True)
class PartnerRecord:
    """What a session's partner did and what the model did at each step: a results row's
    ``partner`` column, as JSON."""

    steps: tuple[StepResult, ...]
    skipped: Mapping[str, int]  # kind -> steps that could not fire
    turns: tuple[ScoredTurn, ...]

    def to_json(self) -> str:
        return json.dumps(
            {
                "steps": [r.to_dict() for r in self.steps],
                "skipped": dict(self.skipped),
                "turns": [vars(t) for t in self.turns],
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> PartnerRecord:
        data = json.loads(text)
        return cls(
            tuple(StepResult.from_dict(r) for r in data.get("steps", ())),
            {str(k): int(v) for k, v in data.get("skipped", {}).items()},
            tuple(ScoredTurn(**t) for t in data.get("turns", ())),
        )

    @classmethod
    def of_session(
        cls,
        turns: Sequence[Record],
        events: Sequence[Record],
        speech: Sequence[Sequence[float]],
        emotions: Sequence[str | None],
    ) -> PartnerRecord:
        """``emotions``: each step's reference emotion (a next turn's; None elsewhere)."""
        skipped: dict[str, int] = {}
        for e in events:
            if not e.get("fired"):
                skipped[str(e["partner"])] = skipped.get(str(e["partner"]), 0) + 1
        steps = step_results(turns, events, speech)
        scored = []
        for r in steps:
            if r.kind == "next_turn" and r.turn is not None:
                t = turns[r.turn]
                emotion = emotions[r.step] if r.step < len(emotions) else None
                scored.append(ScoredTurn(r.turn, r.step, emotion, t["onset_s"], t["duration_s"]))
        return cls(tuple(steps), skipped, tuple(scored))


@dataclass(frozen=True)
class PartnerSummary:
    """One task's partner steps over a run (rates over the steps that fired)."""

    task: str
    interrupts: int = 0
    stopped: int = 0
    stop_latency_s: float | None = None  # median over the stops
    answered: int = 0
    response_latency_s: float | None = None  # median over the answers
    resumed: int = 0
    backchannels: int = 0
    kept_floor: int = 0
    next_turns: int = 0
    replied: int = 0
    turn_latency_s: float | None = None  # median over the replies
    turn_overlap_s: float | None = None  # mean over the replies
    distractors: int = 0
    took_turn: int = 0
    skipped: Mapping[str, int] = field(default_factory=dict)

    def rate(self, part: int, whole: int) -> float | None:
        return part / whole if whole else None

    def to_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["skipped"] = dict(self.skipped)
        out["stop_rate"] = self.rate(self.stopped, self.interrupts)
        out["answer_rate"] = self.rate(self.answered, self.interrupts)
        out["resume_rate"] = self.rate(self.resumed, self.interrupts)
        out["kept_floor_rate"] = self.rate(self.kept_floor, self.backchannels)
        out["reply_rate"] = self.rate(self.replied, self.next_turns)
        out["took_turn_rate"] = self.rate(self.took_turn, self.distractors)
        return out


def summarise_steps(
    by_task: Mapping[str, Iterable[StepResult]], skipped: Mapping[str, Mapping[str, int]]
) -> list[PartnerSummary]:
    """One summary per task in name order. Latencies are medians (a stop that never came is
    no latency: the stop rate says how many); sessions whose timing was not valid should be left
    out of ``by_task`` for latencies by the caller."""
    out = []
    for task in sorted(set(by_task) | set(skipped)):
        r = list(by_task.get(task, ()))
        ints = [x for x in r if x.kind == "interrupt"]
        bcs = [x for x in r if x.kind == "backchannel"]
        nts = [x for x in r if x.kind == "next_turn"]
        dis = [x for x in r if x.kind == "distractor"]
        out.append(
            PartnerSummary(
                task=task,
                interrupts=len(ints),
                stopped=sum(bool(x.stopped) for x in ints),
                stop_latency_s=_median(x.stop_latency_s for x in ints),
                answered=sum(bool(x.answered) for x in ints),
                response_latency_s=_median(x.response_latency_s for x in ints),
                resumed=sum(bool(x.resumed) for x in ints),
                backchannels=len(bcs),
                kept_floor=sum(bool(x.kept_floor) for x in bcs),
                next_turns=len(nts),
                replied=sum(bool(x.replied) for x in nts),
                turn_latency_s=_median(x.latency_s for x in nts),
                turn_overlap_s=_mean(x.overlap_s for x in nts),
                distractors=len(dis),
                took_turn=sum(bool(x.took_turn) for x in dis),
                skipped=dict(skipped.get(task, {})),
            )
        )
    return out


def _median(values: Iterable[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def _mean(values: Iterable[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got else None
