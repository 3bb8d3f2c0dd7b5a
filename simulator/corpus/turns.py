"""Turns of a two-speaker call and the pairs MIRRORING is built from. Pure: arrays and times in,
frozen dataclasses out; no files, no clock.

- Each channel's voiced frames (VAD) become segments, bridging pauses shorter than
  ``min_pause_s``; segments shorter than ``min_turn_s`` are not turns (clicks, "mm").
- A segment that lies wholly inside a longer segment of the other speaker is a backchannel: it
  neither forms a turn nor splits the other speaker's turn. Two identical segments (the same
  start and end on both channels: crosstalk, bleed) are one turn, kept on the louder channel
  (channel 0 when the loudness is not known or equal); the other counts as a backchannel.
- The rest, ordered by start, form the conversation: a speaker's consecutive segments with no
  turn of the other speaker between them are one turn, so turns alternate speakers.
- Adjacent pairs are consecutive turns (both directions: channel 0 then 1, and 1 then 0). A
  candidate pair is an adjacent pair whose second turn starts at or after the first one's end
  and within ``max_gap_s`` of it; an overlapping reply (negative gap) is not a candidate.
- A context may start only at a pause boundary: ``lead_s`` before speech resumes after a
  silence of both channels of at least ``boundary_pause_s``, or at the call's start; and only at
  or before the start of the turn it leads to, so it holds that whole turn.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.vad import Segment, segments

__all__ = [
    "Conversation",
    "Pair",
    "Turn",
    "TurnConfig",
    "adjacent_pairs",
    "boundaries",
    "candidate_pairs",
    "context_start",
    "conversation",
    "loudness_rule",
    "merge_turns",
    "silences",
    "speaker_segments",
]

BoolArray = NDArray[np.bool_]
FloatArray = NDArray[np.float64]
Louder = Callable[[Segment], int]  # which channel (0 or 1) is louder over a segment
_EPS = 1e-9


@dataclass(frozen=True)
class TurnConfig:
    min_pause_s: float = 0.5  # shorter silences inside one channel are bridged
    min_turn_s: float = 0.5  # shorter bridged segments are not turns
    max_gap_s: float = 5.0  # a candidate reply starts within this of the first turn's end
    context_s: float = 10.0  # the context's target length, ending at A's turn end
    max_context_s: float | None = None  # the longest context allowed (default 1.5 x context_s)
    boundary_pause_s: float = 0.3  # a silence of both channels this long is a pause boundary
    lead_s: float = 0.2  # a context starts this long before speech resumes after the pause
    max_reference_s: float = 30.0  # B's reference (and every scored clip) is cut to this

    def __post_init__(self) -> None:
        for name in ("min_turn_s", "context_s", "boundary_pause_s", "max_reference_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("min_pause_s", "max_gap_s", "lead_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.lead_s > self.boundary_pause_s:
            raise ValueError(
                f"lead_s ({self.lead_s}) must not exceed boundary_pause_s ({self.boundary_pause_s})"
            )
        if self.max_context_s is not None and self.max_context_s < self.context_s:
            raise ValueError(
                f"max_context_s ({self.max_context_s}) must be >= context_s ({self.context_s})"
            )

    @property
    def context_limit_s(self) -> float:
        return self.max_context_s if self.max_context_s is not None else 1.5 * self.context_s


@dataclass(frozen=True)
class Turn:
    index: int  # position in the call's conversation
    speaker: int  # channel: 0 or 1
    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class Pair:
    a: Turn  # the turn that is answered
    b: Turn  # the next turn, by the other speaker

    @property
    def gap_s(self) -> float:
        return self.b.start_s - self.a.end_s


@dataclass(frozen=True)
class Conversation:
    turns: tuple[Turn, ...]
    boundaries: tuple[float, ...]  # where a context may start, ascending
    duration_s: float
    backchannels: int  # segments dropped because they lie inside the other speaker's segment
    short_segments: int  # segments dropped as shorter than min_turn_s


def speaker_segments(
    flags: BoolArray, frame_s: float, cfg: TurnConfig
) -> tuple[list[Segment], int]:
    """One channel's segments (pauses under ``min_pause_s`` bridged), and how many were too
    short to be turns (those are left out)."""
    found = segments(flags, frame_s, min_gap_s=cfg.min_pause_s)
    kept = [s for s in found if s.duration_s >= cfg.min_turn_s - 1e-9]
    return kept, len(found) - len(kept)


def merge_turns(
    by_speaker: Sequence[Sequence[Segment]], louder: Louder | None = None
) -> tuple[list[Turn], int]:
    """The conversation's turns from each speaker's segments, and how many segments were
    backchannels (wholly inside a longer segment of the other speaker). Of two identical
    segments, one on each channel, only the one on the channel ``louder`` names is kept
    (channel 0 without ``louder``). Ties in start go to speaker 0."""
    if len(by_speaker) != 2:
        raise ValueError(f"a conversation has two speakers, got {len(by_speaker)}")
    tagged: list[tuple[float, int, Segment]] = []
    backchannels = 0
    for speaker, own in enumerate(by_speaker):
        other = by_speaker[1 - speaker]
        for seg in own:
            if any(_dropped(seg, o, speaker, louder) for o in other):
                backchannels += 1
            else:
                tagged.append((seg.start_s, speaker, seg))
    tagged.sort(key=lambda t: (t[0], t[1]))
    turns: list[Turn] = []
    for _, speaker, seg in tagged:
        if turns and turns[-1].speaker == speaker:
            last = turns[-1]
            turns[-1] = Turn(last.index, speaker, last.start_s, max(last.end_s, seg.end_s))
        else:
            turns.append(Turn(len(turns), speaker, seg.start_s, seg.end_s))
    return turns, backchannels


def _dropped(seg: Segment, other: Segment, speaker: int, louder: Louder | None) -> bool:
    """Whether ``seg`` (of ``speaker``) gives way to the other speaker's segment ``other``."""
    if not (other.start_s <= seg.start_s + _EPS and seg.end_s <= other.end_s + _EPS):
        return False  # not inside
    if other.start_s < seg.start_s - _EPS or seg.end_s < other.end_s - _EPS:
        return True  # strictly inside: a backchannel
    keep = louder(seg) if louder is not None else 0  # identical: the louder channel keeps it
    return keep != speaker


def loudness_rule(energy: Sequence[FloatArray], frame_s: float) -> Louder:
    """``louder`` for ``merge_turns`` from each channel's per-frame energy: the channel with
    more energy over the segment (channel 0 on a tie)."""

    def louder(seg: Segment) -> int:
        lo, hi = round(seg.start_s / frame_s), round(seg.end_s / frame_s)
        a, b = (float(np.sum(e[lo:hi], dtype=np.float64)) for e in energy)
        return 1 if b > a else 0

    return louder


def silences(voiced: BoolArray, frame_s: float, min_s: float) -> list[Segment]:
    """Runs of frames where nothing is voiced, at least ``min_s`` long (the leading run at the
    call's start is kept whatever its length)."""
    quiet = segments(~np.asarray(voiced, dtype=bool), frame_s)
    return [s for s in quiet if s.start_s == 0.0 or s.duration_s >= min_s - 1e-9]


def boundaries(quiet: Sequence[Segment], cfg: TurnConfig) -> tuple[float, ...]:
    """Where a context may start: the call's start, and ``lead_s`` before speech resumes after
    each silence (the call's leading silence included)."""
    points = {0.0}
    for s in quiet:
        points.add(max(s.start_s, s.end_s - cfg.lead_s))
    return tuple(sorted(points))


def conversation(
    flags: Sequence[BoolArray],
    frame_s: float,
    cfg: TurnConfig,
    energy: Sequence[FloatArray] | None = None,
) -> Conversation:
    """The call's conversation from the two channels' VAD frame flags (and their per-frame
    energy, which decides which of two identical segments is kept)."""
    if len(flags) != 2:
        raise ValueError(f"a call has two channels, got {len(flags)}")
    n = min(len(flags[0]), len(flags[1]))
    a, b = (np.asarray(f[:n], dtype=bool) for f in flags)
    seg_a, short_a = speaker_segments(a, frame_s, cfg)
    seg_b, short_b = speaker_segments(b, frame_s, cfg)
    louder = loudness_rule(energy, frame_s) if energy is not None else None
    turns, backchannels = merge_turns((seg_a, seg_b), louder)
    quiet = silences(a | b, frame_s, cfg.boundary_pause_s)
    return Conversation(
        turns=tuple(turns),
        boundaries=boundaries(quiet, cfg),
        duration_s=n * frame_s,
        backchannels=backchannels,
        short_segments=short_a + short_b,
    )


def adjacent_pairs(turns: Sequence[Turn]) -> list[Pair]:
    """Every pair of consecutive turns (they always belong to different speakers)."""
    return [Pair(a, b) for a, b in itertools.pairwise(turns) if a.speaker != b.speaker]


def candidate_pairs(turns: Sequence[Turn], max_gap_s: float) -> tuple[list[Pair], int, int]:
    """Adjacent pairs whose reply starts at or after the first turn's end and within
    ``max_gap_s`` of it; also how many were left out as overlapping and as too far apart."""
    kept: list[Pair] = []
    overlapping = too_far = 0
    for pair in adjacent_pairs(turns):
        gap = pair.gap_s
        if gap < -1e-9:
            overlapping += 1
        elif gap > max_gap_s + 1e-9:
            too_far += 1
        else:
            kept.append(pair)
    return kept, overlapping, too_far


def context_start(
    start_s: float, end_s: float, points: Sequence[float], cfg: TurnConfig
) -> float | None:
    """Where the context of the turn ``start_s``-``end_s`` starts: among the pause boundaries at
    or before ``start_s`` (so the context holds the whole turn) whose context, up to ``end_s``,
    is no longer than ``context_limit_s``, the one whose context length is closest to
    ``context_s`` (ties: the shorter context); None if there is none. A turn longer than
    ``context_s`` so gets the latest boundary at or before its start."""
    best: float | None = None
    best_key: tuple[float, float] | None = None
    for p in points:
        length = end_s - p
        if p > start_s + _EPS or length <= _EPS or length > cfg.context_limit_s + _EPS:
            continue
        key = (round(abs(length - cfg.context_s), 9), length)
        if best_key is None or key < best_key:
            best, best_key = p, key
    return best
