"""A session's events as the hot path records them: columns of numbers, not objects.

Every frame sent and every chunk received adds a row. Kept in ``array.array`` columns they cost
no allocation per row, the garbage collector never walks them (a list of 1,500 tuples per session
is 300,000 items to visit in a full collection at 200 sessions), and they pickle as raw bytes to
the process that writes the bundle. ``log()`` spells them out as event dicts there.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from typing import Any

__all__ = ["EventRecords", "chunk_holding", "merged_log"]


class EventRecords:
    def __init__(self) -> None:
        # sends: frame number, time the send returned, time due, time the sender woke for it
        # (seconds since T0; woke - due is the event loop's lag), samples
        self.send_n = array("q")
        self.send_t = array("d")
        self.send_due = array("d")
        self.send_woke = array("d")
        self.send_samples = array("q")
        # received audio: arrival, samples, where placed, declared offset (NaN: none), silent
        self.recv_t = array("d")
        self.recv_samples = array("q")
        self.recv_placed = array("d")
        self.recv_offset = array("d")
        self.recv_silent = array("b")
        # anything else: (audio chunks received before it, time, event)
        self.logged: list[tuple[int, float, dict[str, Any]]] = []

    def add_send(
        self, n: int, t: float, due: float, samples: int, woke: float | None = None
    ) -> None:
        self.send_n.append(n)
        self.send_t.append(t)
        self.send_due.append(due)
        self.send_woke.append(t if woke is None else woke)
        self.send_samples.append(samples)

    def add_received(
        self, t: float, samples: int, placed: float, offset: float | None, silent: bool
    ) -> None:
        self.recv_t.append(t)
        self.recv_samples.append(samples)
        self.recv_placed.append(placed)
        self.recv_offset.append(math.nan if offset is None else offset)
        self.recv_silent.append(silent)

    def add_event(self, t: float, event: dict[str, Any]) -> None:
        self.logged.append((len(self.recv_t), t, event))

    def send_errors(self) -> list[float]:
        """Time the send returned minus time due, per frame (seconds)."""
        return [t - due for t, due in zip(self.send_t, self.send_due, strict=True)]

    def loop_lags(self) -> list[float]:
        """Time the sender woke minus time due, per frame (seconds): the event loop's lag."""
        return [w - due for w, due in zip(self.send_woke, self.send_due, strict=True)]

    def stamp_of(self, position_s: float, rate: int) -> float:
        """When the audible chunk that holds timeline position ``position_s`` was stamped (the
        position itself where no chunk holds it); ``rate``: the output's."""
        i = self.chunk_of(position_s, rate)
        return position_s if i is None else self.recv_t[i]

    def chunk_of(self, position_s: float, rate: int) -> int | None:
        """The number of the audible chunk received that holds timeline position
        ``position_s`` (None: none does); ``rate``: the output's."""
        return chunk_holding(
            self.recv_placed, self.recv_samples, self.recv_silent, position_s, rate
        )

    @property
    def sends(self) -> list[tuple[int, float, float, int]]:
        """(n, t, due, samples) per frame sent."""
        return list(zip(self.send_n, self.send_t, self.send_due, self.send_samples, strict=True))

    @property
    def received(self) -> list[tuple[float, int, float, float | None, bool]]:
        """(t, samples, placed at, offset or None, silent) per chunk received."""
        return [
            (t, k, placed, None if math.isnan(offset) else offset, bool(silent))
            for t, k, placed, offset, silent in zip(
                self.recv_t,
                self.recv_samples,
                self.recv_placed,
                self.recv_offset,
                self.recv_silent,
                strict=True,
            )
        ]

    def log(self, side: str = "") -> list[dict[str, Any]]:
        """Every event, sends and received audio included, in time order (ties in arrival
        order: a message read together with audio keeps its place among the chunks). ``side``
        prefixes the audio's directions (a partner model's: ``partner-send``, ``partner-recv``)."""
        return [e for _, _, e in self._log(side)]

    def _log(self, side: str) -> list[tuple[float, float, dict[str, Any]]]:
        send, recv = f"{side}send", f"{side}recv"
        sends = [
            (t, -1.0, {"t": round(t, 6), "dir": send, "kind": "audio", "n": n,
                       "due": round(due, 6), "woke": round(w, 6), "samples": k})
            for (n, t, due, k), w in zip(self.sends, self.send_woke, strict=True)
        ]  # fmt: skip
        audio = [
            (t, float(i), {"t": round(t, 6), "dir": recv, "kind": "audio", "samples": k,
                           "placed_s": round(placed, 6), "offset_s": offset, "silent": silent})
            for i, (t, k, placed, offset, silent) in enumerate(self.received)
        ]  # fmt: skip
        others = [(t, before - 0.5, e) for before, t, e in self.logged]
        return sorted([*sends, *audio, *others], key=lambda item: (item[0], item[1]))


def merged_log(*sides: tuple[EventRecords, str]) -> list[dict[str, Any]]:
    """The events of several sides of one session (each with its direction prefix), in time
    order; at one instant the first side's come first."""
    rows = [(t, i, order, e) for i, (r, side) in enumerate(sides) for t, order, e in r._log(side)]
    rows.sort(key=lambda row: (row[0], row[1], row[2]))
    return [e for *_, e in rows]


def chunk_holding(
    placed_s: Sequence[float],
    samples: Sequence[int],
    silent: Sequence[bool | int],
    position_s: float,
    rate: int,
) -> int | None:
    """The last audible chunk (by order received) placed over ``position_s`` (None: none is)."""
    for i in range(len(placed_s) - 1, -1, -1):
        start = placed_s[i]
        if not silent[i] and start <= position_s < start + samples[i] / rate:
            return i
    return None
