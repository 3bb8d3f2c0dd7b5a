"""The end-of-run summary: how many sessions replied, how fast, what failed, what it cost and how
long it waited on the provider's limits."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from duplexsim.core.prices import PriceTable, format_amount
from duplexsim.core.shown import for_terminal
from duplexsim.core.textable import render_table
from duplexsim.run.costs import RunCost, cost_text, run_cost
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
    cost: RunCost | None = None
    provider_wait_s: float = 0.0  # sessions' starts held by the provider's limits, summed
    provider_wait_max_s: float = 0.0  # ... and the longest one sample waited
    rate_limited: int = 0  # attempts the provider refused for its rate limits
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


def summarise_rows(
    label: str, rows: Sequence[ResultRow], price: PriceTable | None = None
) -> RunSummary:
    """``price``: the run's price table (None: none, its cost is unknown)."""
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
        cost=run_cost(rows, price),
        provider_wait_s=sum(r.provider_wait_s or 0.0 for r in rows),
        provider_wait_max_s=max((r.provider_wait_s or 0.0 for r in rows), default=0.0),
        rate_limited=sum(r.rate_limited or 0 for r in rows),
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
        "cost",
        "cost / sample",
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
            *_cost_cells(s.cost),
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
    return text + _cost_notes(summaries) + _provider_notes(summaries)


def _cost_cells(cost: RunCost | None) -> list[str]:
    if cost is None:
        return ["-", "-"]
    per = cost.per_sample
    return [cost_text(cost.total, cost.currency), "-" if per is None else format_amount(per)]


def _cost_notes(summaries: Sequence[RunSummary]) -> str:
    """The basis of each run's cost, and why a cost is unknown where it is."""
    lines = []
    for s in summaries:
        if s.cost is None:
            continue
        why = ""
        if s.cost.total.unknown:
            why = " -- unknown: " + ", ".join(s.cost.total.unknown[:4])
        lines.append(
            for_terminal(f"{s.label}: {s.cost.basis}{why}")
        )  # a run's record: outside text
    if not lines:
        return ""
    return "\n\ncost = usage x price (every attempt of a sample billed):\n  " + "\n  ".join(lines)


def _provider_notes(summaries: Sequence[RunSummary]) -> str:
    lines = [
        f"{s.label}: {s.provider_wait_s:.1f} s in all (longest sample {s.provider_wait_max_s:.1f} s), "
        f"{s.rate_limited} attempt{'s' if s.rate_limited != 1 else ''} refused for rate limits"
        for s in summaries
        if s.provider_wait_s > 0 or s.rate_limited
    ]
    if not lines:
        return ""
    return (
        "\n\nwaited on the provider's limits (starts paced under what remains, back-off after "
        "a refusal):\n  " + "\n  ".join(lines)
    )
