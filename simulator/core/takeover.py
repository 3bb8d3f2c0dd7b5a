"""Full-Duplex-Bench's timing figures, per task: take-over rate and response latency.

As Full-Duplex-Bench (Lin et al., 2025) defines them, with our voice activity standing in for its
time-aligned ASR words:

- Take-over (TOR = 1) when the model speaks for at least 1 s: its evaluation scripts count an
  output whose words span under 1 s (and are at most 3 words) as no take-over, a backchannel.
  A sample where the model never spoke is TOR = 0.
- Take-over rate = mean TOR over the task's completed samples. On pause-handling tasks lower is
  better (the model should let the speaker finish); on turn-taking tasks higher is better.
- Latency = model speech onset - end of the speaker's turn, negative values clamped to 0,
  averaged over the samples with TOR = 1 only.

Infrastructure failures are left out, as from every aggregate, and sessions whose timing is not
valid (our own sends or reads ran late) from the latency.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["TAKEOVER_MIN_S", "TaskTiming", "TimedSample", "task_timings"]

TAKEOVER_MIN_S = 1.0
NO_TASK = "all"


@dataclass(frozen=True)
class TimedSample:
    task: str | None
    status: str  # "ok", "no-reply" or "failed"
    reply_duration_s: float | None
    latency_s: float | None
    timing_valid: bool = True  # our sends and reads kept their budget: its latency counts


@dataclass(frozen=True)
class TaskTiming:
    task: str
    samples: int  # completed samples (failures left out)
    takeovers: int
    latency_s: float | None  # mean over take-overs, clamped at 0; None without any

    @property
    def takeover_rate(self) -> float | None:
        return self.takeovers / self.samples if self.samples else None

    def to_dict(self) -> dict[str, object]:
        return {
            "task": self.task,
            "samples": self.samples,
            "takeovers": self.takeovers,
            "takeover_rate": self.takeover_rate,
            "latency_s": self.latency_s,
        }


def is_takeover(s: TimedSample) -> bool:
    return s.status == "ok" and (s.reply_duration_s or 0.0) >= TAKEOVER_MIN_S


def task_timings(samples: Iterable[TimedSample]) -> list[TaskTiming]:
    """One TaskTiming per task in name order (samples without a task under ``"all"``)."""
    by_task: dict[str, list[TimedSample]] = {}
    for s in samples:
        if s.status != "failed":
            by_task.setdefault(s.task or NO_TASK, []).append(s)
    out = []
    for task in sorted(by_task):
        taken = [s for s in by_task[task] if is_takeover(s)]
        latencies = [
            max(0.0, s.latency_s) for s in taken if s.latency_s is not None and s.timing_valid
        ]
        mean = sum(latencies) / len(latencies) if latencies else None
        out.append(TaskTiming(task, len(by_task[task]), len(taken), mean))
    return out
