"""The end-of-run summary: how many sessions replied, how fast, and what failed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from duplexsim.core.textable import render_table
from duplexsim.run.store import ResultRow

__all__ = ["RunSummary", "render_summaries", "summarise_rows"]


@dataclass(frozen=True)
class RunSummary:
    label: str
    samples: int
    replied: int
    no_reply: int
    failed: int
    faithful: int  # completed sessions whose model heard the stream as sent (every metric)
    precise: int  # ... whose own timing also kept its budget (latency comes from these)
    latency_n: int  # replies the latency figures are computed from
    truncated: int  # replies cut short (max length, deadline, a server that closed mid-reply)
    latency_p50_ms: float | None
    latency_p90_ms: float | None
    reply_median_s: float | None
    overlapped: int
    send_p99_ms: float | None
    send_max_ms: float | None
    failures: dict[str, int]
    retried: int = 0  # samples that took more than one attempt (each one a paid session)

    @property
    def completed(self) -> int:
        return self.samples - self.failed

    @property
    def reply_rate(self) -> float | None:
        completed = self.replied + self.no_reply
        return self.replied / completed if completed else None


def _pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def summarise_rows(label: str, rows: Sequence[ResultRow]) -> RunSummary:
    ok = [r for r in rows if r.status == "ok"]
    completed = [r for r in rows if r.status != "failed"]
    # a latency whose session broke its timing budget cannot be vouched for: left out, counted
    latencies = [r.latency_s * 1000 for r in ok if r.latency_s is not None and r.precise]
    durations = [r.reply_duration_s for r in ok if r.reply_duration_s is not None]
    sends = [r for r in rows if r.send_p99_ms is not None]
    return RunSummary(
        label=label,
        samples=len(rows),
        replied=len(ok),
        no_reply=sum(r.status == "no-reply" for r in rows),
        failed=sum(r.status == "failed" for r in rows),
        faithful=sum(r.faithful for r in completed),
        precise=sum(r.precise for r in completed),
        latency_n=len(latencies),
        truncated=sum(1 for r in ok if r.truncated),
        latency_p50_ms=_pct(latencies, 50),
        latency_p90_ms=_pct(latencies, 90),
        reply_median_s=_pct(durations, 50),
        overlapped=sum(1 for r in ok if (r.overlap_s or 0) > 0),
        send_p99_ms=max((r.send_p99_ms or 0.0 for r in sends), default=None),
        send_max_ms=max((r.send_max_ms or 0.0 for r in sends), default=None),
        failures=dict(Counter(r.end_reason for r in rows if r.status == "failed")),
        retried=sum(r.attempts > 1 for r in rows),
    )


def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def render_summaries(summaries: Sequence[RunSummary]) -> str:
    headers = [
        "run",
        "samples",
        "replied",
        "no reply",
        "failed",
        "reply rate",
        "input fidelity",
        "precision",
        "retried",
        "truncated",
        "latency n",
        "latency p50 ms",
        "latency p90 ms",
        "reply s (median)",
        "overlaps",
        "send p99 ms (worst)",
        "send max ms",
    ]
    rows = [
        [
            s.label,
            s.samples,
            s.replied,
            s.no_reply,
            s.failed,
            _num(None if s.reply_rate is None else 100 * s.reply_rate, "{:.0f}%"),
            f"{s.faithful}/{s.completed}",
            f"{s.precise}/{s.completed}",
            s.retried,
            s.truncated,
            s.latency_n,
            _num(s.latency_p50_ms),
            _num(s.latency_p90_ms),
            _num(s.reply_median_s, "{:.2f}"),
            s.overlapped,
            _num(s.send_p99_ms, "{:.2f}"),
            _num(s.send_max_ms, "{:.2f}"),
        ]
        for s in summaries
    ]
    text = render_table(headers, rows)
    failures = [
        f"{s.label}: " + ", ".join(f"{k} x{v}" for k, v in sorted(s.failures.items()))
        for s in summaries
        if s.failures
    ]
    if failures:
        text += "\n\nfailed sessions by reason:\n  " + "\n  ".join(failures)
    unfaithful = [s for s in summaries if s.faithful < s.completed]
    if unfaithful:
        text += (
            "\n\nevery metric leaves out sessions whose model did not hear the stream as a "
            "client sends it (input fidelity lost): "
            + ", ".join(f"{s.label} leaves out {s.completed - s.faithful}" for s in unfaithful)
        )
    imprecise = [s for s in summaries if s.precise < s.faithful]
    if imprecise:
        text += (
            "\n\nlatency comes from sessions whose own timing kept its budget only (the "
            "others count for every emotion metric): "
            + ", ".join(f"{s.label} leaves out {s.faithful - s.precise}" for s in imprecise)
        )
    return text
