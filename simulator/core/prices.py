"""Prices as data: what a provider bills a session for, in the units it bills in, dated and
sourced; and the cost of a session's usage under them.

A profile's ``[price]`` table (docs/profiles.md) names each quantity the provider bills and its
price: per million tokens (``per_million_tokens``: input_audio, input_text, cached_audio,
cached_text, output_audio, output_text) or per minute (``per_minute``: connected, audio_sent,
audio_received). A price written "unknown" is billed at a price nobody has recorded here: a
session that used some of it has an unknown cost, never a cost of 0. A quantity the table does
not name is not billed. Cached input is part of the input counts; where the table prices cached
tokens, they are billed at that price and only the rest at the input price.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from duplexsim.core.usage import Usage

__all__ = ["UNKNOWN", "Cost", "PriceTable", "Rate", "format_amount"]

UNKNOWN = "unknown"
# table -> (units one price is for, its keys -> the usage field each prices)
_UNITS: dict[str, tuple[float, dict[str, str]]] = {
    "per_million_tokens": (
        1e6,
        {
            "input_audio": "input_audio_tokens",
            "input_text": "input_text_tokens",
            "cached_audio": "cached_audio_tokens",
            "cached_text": "cached_text_tokens",
            "output_audio": "output_audio_tokens",
            "output_text": "output_text_tokens",
        },
    ),
    "per_minute": (
        60.0,
        {
            "connected": "connected_s",
            "audio_sent": "audio_sent_s",
            "audio_received": "audio_received_s",
        },
    ),
}
_HEAD = ("currency", "date", "source")
_CACHED = {"input_audio_tokens": "cached_audio_tokens", "input_text_tokens": "cached_text_tokens"}


@dataclass(frozen=True)
class Rate:
    table: str  # "per_million_tokens" | "per_minute"
    key: str  # "input_audio", "connected", ...
    price: float | None  # None: billed, at a price not known here

    @property
    def field(self) -> str:
        return _UNITS[self.table][1][self.key]

    @property
    def per(self) -> float:
        return _UNITS[self.table][0]


@dataclass(frozen=True)
class Cost:
    """``amount`` None when part of it is unknown (``unknown`` names those parts); ``known``
    is what the known parts come to (a lower bound then)."""

    amount: float | None
    known: float
    unknown: tuple[str, ...] = ()

    def __add__(self, other: Cost) -> Cost:
        unknown = tuple(dict.fromkeys(self.unknown + other.unknown))
        known = self.known + other.known
        return Cost(None if unknown else known, known, unknown)

    def times(self, factor: float) -> Cost:
        known = self.known * factor
        return Cost(None if self.unknown else known, known, self.unknown)


ZERO = Cost(0.0, 0.0)


@dataclass(frozen=True)
class PriceTable:
    rates: tuple[Rate, ...] = ()
    currency: str = "USD"
    date: str | None = None  # when the figures were read
    source: str = ""

    def cost(self, usage: Usage) -> Cost:
        """What ``usage`` costs. A token quantity the provider did not report counts as 0 when it
        reported others (it split its count without it), as unknown when it reported none."""
        priced = {rate.field for rate in self.rates}
        known, unknown = 0.0, []
        for rate in self.rates:
            amount = self._quantity(usage, rate.field, priced)
            if amount is None:
                unknown.append(f"{rate.field} (not reported)")
            elif amount > 0 and rate.price is None:
                unknown.append(f"{rate.field} (price unknown)")
            elif amount > 0:
                known += amount / rate.per * (rate.price or 0.0)
        return Cost(None if unknown else known, known, tuple(unknown))

    @staticmethod
    def _quantity(usage: Usage, field: str, priced: set[str]) -> float | None:
        value = getattr(usage, field)
        if value is None:
            if field.endswith("_s") or field.startswith("cached_"):
                return 0.0  # never connected / nothing cached
            return 0.0 if usage.tokens_reported else None
        cached = _CACHED.get(field)
        if cached in priced:  # the cached part is billed at its own price
            value -= getattr(usage, cached) or 0
        return float(max(value, 0))

    @property
    def unknown_prices(self) -> tuple[str, ...]:
        return tuple(rate.field for rate in self.rates if rate.price is None)

    def basis(self) -> str:
        """One line: the prices per unit, their date and their source."""
        groups = []
        for table in _UNITS:
            rates = [r for r in self.rates if r.table == table]
            if rates:
                unit = "per 1M tokens" if table == "per_million_tokens" else "per minute"
                priced = ", ".join(
                    f"{r.key.replace('_', ' ')} {UNKNOWN if r.price is None else format(r.price, 'g')}"
                    for r in rates
                )
                groups.append(f"{unit}: {priced}")
        parts = "; ".join(groups) or "nothing billed per call"
        when = f"as of {self.date}" if self.date else "undated"
        source = f", {self.source}" if self.source else ""
        return f"{self.currency} {parts} ({when}{source})"

    def describe(self) -> dict[str, Any]:
        """The table as a profile writes it (and a run records it)."""
        out: dict[str, Any] = {"currency": self.currency, "date": self.date, "source": self.source}
        for rate in self.rates:
            out.setdefault(rate.table, {})[rate.key] = UNKNOWN if rate.price is None else rate.price
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PriceTable:
        """From a profile's ``[price]`` (or a run's record of it); ValueError names the field."""
        if not isinstance(data, Mapping):
            raise ValueError("price: must be a table")
        unknown = sorted(set(data) - set(_HEAD) - set(_UNITS))
        if unknown:
            raise ValueError(f"price: unknown field(s) {', '.join(unknown)}")
        for key in _HEAD:
            value = data.get(key)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"price.{key}: must be a string")
        rates = [rate for table in _UNITS for rate in _rates(table, data.get(table, {}))]
        return cls(
            tuple(rates),
            currency=str(data.get("currency") or "USD"),
            date=str(data["date"]) if data.get("date") else None,
            source=str(data.get("source") or ""),
        )


def _rates(table: str, data: Any) -> list[Rate]:
    if not isinstance(data, Mapping):
        raise ValueError(f"price.{table}: must be a table")
    keys = _UNITS[table][1]
    wrong = sorted(set(data) - set(keys))
    if wrong:
        raise ValueError(
            f"price.{table}: unknown quantity {', '.join(wrong)} (known: {', '.join(keys)})"
        )
    rates = []
    for key in keys:
        if key not in data:
            continue
        value = data[key]
        if value == UNKNOWN:
            rates.append(Rate(table, key, None))
        elif (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value >= 0
        ):
            rates.append(Rate(table, key, float(value)))
        else:
            raise ValueError(
                f'price.{table}.{key}: must be a price >= 0 or "{UNKNOWN}", not {value!r}'
            )
    return rates


def format_amount(value: float, currency: str = "") -> str:
    """A price or cost for people: enough digits for cents and fractions of them."""
    if value >= 1 or value == 0:
        text = f"{value:,.2f}"
    elif value >= 0.001:
        text = f"{value:.4f}"
    else:
        text = f"{value:.2e}"
    return f"{text} {currency}" if currency else text
