"""What a run is expected to cost before it starts: each sample's expected usage times the
profile's prices, times trials and the retries the policy allows.

A session streams its context, then silence while the model replies and the reply is heard out;
it is connected for all of that plus the handshake. What it is billed for follows from a few
figures, each learnt from earlier runs of the same model where there are any (their recorded
usage), else a default or what the protocol declares (``Metering``):

- the reply: the model audio a session receives (median of earlier sessions; default 6 s);
- the stream after the context (median; default: 1 s to answer, the reply, the hangover);
- the handshake (median of connected minus streamed time; default 0.5 s);
- tokens per second of the audio each count is billed on (the context, or everything streamed,
  for input; the reply for output): the provider's own rate where it publishes one, else the
  ratio of earlier runs' reported tokens to that audio;
- attempts per sample (mean of earlier runs; 1 by default, up to the policy's maximum).

A count nothing can estimate (no published rate, no earlier run) leaves the cost at "at least"
the rest, naming what is missing: never a guess of 0.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from duplexsim.clients.base import Metering
from duplexsim.core.benchmark import Sample
from duplexsim.core.errors import DuplexsimError
from duplexsim.core.prices import Cost, PriceTable, format_amount
from duplexsim.core.usage import TOKEN_FIELDS, Usage
from duplexsim.run.store import ResultRow, read_results

__all__ = ["Estimate", "Expectation", "earlier_rows", "estimate_run", "learn"]

DEFAULT_REPLY_S = 6.0
DEFAULT_ANSWER_S = 1.0  # how long a model takes to start replying, before any run says
DEFAULT_HANDSHAKE_S = 0.5
_DONE = ("ok", "no-reply")
_INPUT = ("input_audio_tokens", "input_text_tokens", "cached_audio_tokens", "cached_text_tokens")


@dataclass(frozen=True)
class Expectation:
    """What one session of the model is expected to use, and where each figure comes from."""

    reply_s: float
    tail_s: float  # streamed after the context
    handshake_s: float
    rates: Mapping[str, float | None]  # token count -> tokens per second of its basis
    input_basis: str  # "context" | "stream"
    attempts: float = 1.0
    learnt_from: int = 0  # earlier sessions the figures come from (0: defaults, declared rates)

    def usage(self, context_s: float) -> Usage:
        """One session over a context of ``context_s``; a count with no rate is None."""
        sent_s = context_s + self.tail_s
        basis = {"input": context_s if self.input_basis == "context" else sent_s}
        counts: dict[str, float | None] = {}
        for name in TOKEN_FIELDS:
            rate = self.rates.get(name)
            seconds = basis["input"] if name in _INPUT else self.reply_s
            counts[name] = None if rate is None else rate * seconds
        return Usage(
            **counts,  # type: ignore[arg-type]
            audio_sent_s=sent_s,
            audio_received_s=self.reply_s,
            connected_s=sent_s + self.handshake_s,
        )

    def source(self) -> str:
        if self.learnt_from:
            return f"learnt from {self.learnt_from} earlier session(s) of this model"
        return "defaults and the provider's published rates (no earlier run of this model)"


def earlier_rows(runs_dir: Path, model: str, protocol: str) -> list[ResultRow]:
    """Every recorded session of ``model`` over ``protocol`` under ``runs_dir`` that measured
    its usage."""
    rows: list[ResultRow] = []
    for run_dir in sorted({p.parent for p in runs_dir.glob("*/results*.sqlite")}):
        try:
            meta, found = read_results(run_dir)
        except (DuplexsimError, sqlite3.Error, OSError, ValueError):
            continue  # an unreadable run teaches nothing
        described = meta.get("model")
        if not isinstance(described, dict):
            continue
        if described.get("name") != model or described.get("protocol") != protocol:
            continue
        rows += [r for r in found if r.audio_sent_s is not None and r.context_s is not None]
    return rows


def learn(rows: Sequence[ResultRow], metering: Metering) -> Expectation:
    """The expectation from earlier sessions where there are any, else from defaults and the
    rates the protocol declares."""
    declared: dict[str, float | None] = dict.fromkeys(TOKEN_FIELDS)
    declared["input_audio_tokens"] = metering.input_audio_tokens_per_s
    declared["output_audio_tokens"] = metering.output_audio_tokens_per_s
    done = [r for r in rows if r.status in _DONE]
    if not done:
        tail = DEFAULT_ANSWER_S + DEFAULT_REPLY_S
        return Expectation(
            DEFAULT_REPLY_S, tail, DEFAULT_HANDSHAKE_S, declared, metering.input_basis
        )
    reply = statistics.median(r.audio_received_s or 0.0 for r in done)
    tail = statistics.median(max(0.0, (r.audio_sent_s or 0.0) - (r.context_s or 0.0)) for r in done)
    handshake = statistics.median(
        max(0.0, (r.connected_s or 0.0) - (r.audio_sent_s or 0.0)) for r in done
    )
    rates = {name: _rate(done, name, metering.input_basis) for name in TOKEN_FIELDS}
    rates = {k: v if v is not None else declared[k] for k, v in rates.items()}
    attempts = statistics.mean(r.attempts for r in rows)
    return Expectation(reply, tail, handshake, rates, metering.input_basis, attempts, len(done))


def _rate(rows: Sequence[ResultRow], name: str, input_basis: str) -> float | None:
    """Tokens per second of the audio ``name`` is billed on, over the sessions that reported
    tokens (a count missing from a report is 0 there, as in the bill)."""
    reported = [r for r in rows if any(getattr(r, f) is not None for f in TOKEN_FIELDS)]
    if not reported:
        return None
    tokens = sum(getattr(r, name) or 0 for r in reported)
    seconds = sum(_basis(r, name, input_basis) for r in reported)
    return tokens / seconds if seconds > 0 else None


def _basis(row: ResultRow, name: str, input_basis: str) -> float:
    if name not in _INPUT:
        return row.audio_received_s or 0.0
    return (row.context_s if input_basis == "context" else row.audio_sent_s) or 0.0


@dataclass(frozen=True)
class Estimate:
    samples: int
    trials: int
    max_attempts: int
    expectation: Expectation
    usage: Usage  # every session once
    cost: Cost | None  # with the attempts expected (None: no price table)
    worst: Cost | None  # every session retried to the policy's maximum
    per_sample: dict[str, Cost] = field(default_factory=dict)  # one attempt of each sample
    price: PriceTable | None = None

    @property
    def sessions(self) -> int:
        return self.samples * self.trials

    @property
    def tokens_per_session(self) -> float | None:
        """Expected tokens of one session (what a provider's token limit is spent by)."""
        counts = [getattr(self.usage, f) for f in TOKEN_FIELDS if not f.startswith("cached_")]
        known = [c for c in counts if c is not None]
        return sum(known) / self.sessions if known and self.sessions else None

    def lines(self, model: str) -> list[str]:
        """The estimate for people."""
        e = self.expectation
        n = self.sessions
        head = f"estimate for {model}: {n:,} session(s) ({self.samples:,} samples x {self.trials} trial(s))"
        usage = ", ".join(f"{_count(v)} {_LABELS[k]}" for k, v in self.usage.counts().items() if v)
        lines = [
            head,
            f"  per session: the context, {e.tail_s:.1f} s streamed after it, a reply of "
            f"{e.reply_s:.1f} s ({e.source()})",
            f"  expected usage: {usage or 'none'}",
        ]
        if self.cost is None or self.worst is None or self.price is None:
            lines.append("  expected cost: unknown (the profile has no price table)")
            return lines
        cur = self.price.currency
        lines.append(
            f"  expected cost: {_cost(self.cost, cur)} at {e.attempts:.2f} attempt(s) per "
            f"sample; up to {_cost(self.worst, cur)} if every one took {self.max_attempts}"
        )
        if self.cost.unknown:
            lines.append("  not in it: " + ", ".join(self.cost.unknown[:6]))
        lines.append(f"  prices: {self.price.basis()}")
        return lines


_LABELS = {
    **{f: f.replace("_", " ") for f in TOKEN_FIELDS},
    "audio_sent_s": "s of audio sent",
    "audio_received_s": "s of audio received",
    "connected_s": "s connected",
}


def _count(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:,.1f}"


def _cost(cost: Cost, currency: str) -> str:
    if cost.amount is not None:
        return format_amount(cost.amount, currency)
    if cost.known > 0:
        return f"at least {format_amount(cost.known, currency)}"
    return "unknown"


def estimate_run(
    samples: Iterable[Sample],
    expectation: Expectation,
    price: PriceTable | None,
    *,
    trials: int = 1,
    max_attempts: int = 1,
) -> Estimate:
    """The expected usage and cost of running ``samples`` ``trials`` times each."""
    total = Usage()
    per_sample: dict[str, Cost] = {}
    cost = Cost(0.0, 0.0)
    todo = list(samples)
    for sample in todo:
        usage = expectation.usage(sample.context_duration_s or 0.0)
        total = total + usage
        if price is not None:
            one = _priced(price, usage)
            per_sample[sample.id] = one
            cost = cost + one
    scaled: dict[str, Any] = {k: v * trials for k, v in total.counts().items()}
    total = Usage(**scaled)
    if price is None:
        return Estimate(len(todo), trials, max_attempts, expectation, total, None, None)
    return Estimate(
        len(todo),
        trials,
        max_attempts,
        expectation,
        total,
        cost.times(trials * expectation.attempts),
        cost.times(trials * max_attempts),
        per_sample,
        price,
    )


def _priced(price: PriceTable, usage: Usage) -> Cost:
    """The cost of an expected usage: a billed count with no estimate is named, not taken as 0."""
    # cached input without an estimate is taken as none cached: billed at the full input price
    missing = [
        r.field
        for r in price.rates
        if getattr(usage, r.field) is None and not r.field.startswith("cached_")
    ]
    cached = [r.field for r in price.rates if r.field.startswith("cached_")]
    usage = dataclasses.replace(usage, **{f: getattr(usage, f) or 0 for f in cached})
    filled = dataclasses.replace(usage, **dict.fromkeys(missing, 0))
    cost = price.cost(filled)
    if not missing:
        return cost
    unknown = cost.unknown + tuple(f"{f} (no rate: needs a run of this model)" for f in missing)
    return Cost(None, cost.known, unknown)
