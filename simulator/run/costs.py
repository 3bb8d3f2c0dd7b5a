"""What a run cost: each sample's recorded usage times the run's price table.

Costs are never stored: they are computed wherever they are shown, from the usage in the results
and the price table the run recorded (``run_price``), so every output (summary, report, export)
shows the same figure on the same, stated basis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from duplexsim.core.prices import Cost, PriceTable, format_amount
from duplexsim.core.usage import USAGE_FIELDS, Usage
from duplexsim.run.store import ResultRow

__all__ = ["RunCost", "cost_text", "row_cost", "row_usage", "run_cost", "run_price"]

PRICE_KEY = "price"  # the run metadata's record of its price table
NO_TABLE = "unknown: the profile has no price table"


def run_price(meta: Mapping[str, Any]) -> PriceTable | None:
    """The price table a run recorded (None: none, or one that cannot be read)."""
    data = meta.get(PRICE_KEY)
    if not isinstance(data, Mapping):
        return None
    try:
        return PriceTable.from_dict(data)
    except ValueError:
        return None


def row_usage(row: ResultRow) -> Usage | None:
    """The row's usage; None for a row recorded before usage was (nothing measured)."""
    if row.audio_sent_s is None:
        return None
    # its own fields only: a whole row's deep copy (its turns, its reasons) costs milliseconds
    return Usage.from_mapping({name: getattr(row, name, None) for name in USAGE_FIELDS})


def row_cost(row: ResultRow, price: PriceTable | None) -> Cost:
    usage = row_usage(row)
    if price is None:
        return Cost(None, 0.0, ("no price table",))
    if usage is None:
        return Cost(None, 0.0, ("usage not recorded",))
    return price.cost(usage)


@dataclass(frozen=True)
class RunCost:
    total: Cost
    samples: int  # rows it covers (each one's attempts included)
    currency: str
    basis: str  # the prices, their date and source, in one line

    @property
    def per_sample(self) -> float | None:
        if self.total.amount is None or not self.samples:
            return None
        return self.total.amount / self.samples

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total.amount,
            "known_part": self.total.known,
            "unknown": list(self.total.unknown),
            "per_sample": self.per_sample,
            "samples": self.samples,
            "currency": self.currency,
            "basis": self.basis,
        }


def run_cost(rows: Sequence[ResultRow], price: PriceTable | None) -> RunCost:
    total = Cost(0.0, 0.0)
    for row in rows:
        total = total + row_cost(row, price)
    if price is None:
        return RunCost(total, len(rows), "", NO_TABLE)
    return RunCost(total, len(rows), price.currency, price.basis())


def cost_text(cost: Cost, currency: str) -> str:
    """A cost for a table cell: the amount, ">= the known part" where some is unknown, or "?"."""
    if cost.amount is not None:
        return format_amount(cost.amount, currency)
    if cost.known > 0:
        return f">= {format_amount(cost.known, currency)}"
    return "?"
