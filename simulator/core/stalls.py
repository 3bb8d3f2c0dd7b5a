"""When an event loop could not hear its sockets: its stalls, kept for the latency check.

A stall is an interval in which a process's event loop did not poll its sockets: it was running
callbacks (a busy iteration), or it was not scheduled when its timer was due (a late wake-up).
Bytes that arrive inside a stall are read, and stamped, only at its end; a frame due inside it is
sent only after it. So the longest stall overlapping the instants that decide a session's latency
bounds what the loop added to that latency; ``eventloop.FineTimeoutSelector`` records its own, and
a co-located fake server reports its own to the run that started it (``duplexsim.run.fakes``).

Times are the loop clock's (``time.monotonic``, shared by every process on the machine). Only
stalls of at least ``MIN_STALL_S`` are kept, for ``KEEP_S``, and at most ``MAX_STALLS`` of them:
the log never grows without bound, however busy the machine.
"""

from __future__ import annotations

from collections import deque

__all__ = ["KEEP_S", "MAX_STALLS", "MIN_STALL_S", "StallLog", "parse_stall_line", "stall_line"]

MIN_STALL_S = 0.0005  # shorter ones are the cost of an ordinary iteration: not worth a record
KEEP_S = 900.0  # longer than any session's deadline: a finished session finds its window here
MAX_STALLS = 200_000  # about 10 MB at most; the oldest go first


class StallLog:
    """Stalls in time order: (start, end) in the loop clock's seconds."""

    def __init__(self, keep_s: float = KEEP_S, max_stalls: int = MAX_STALLS) -> None:
        self.keep_s = keep_s
        self._stalls: deque[tuple[float, float]] = deque(maxlen=max_stalls)
        self.noted = 0  # stalls recorded since the start (the deque may have let some go)

    def __len__(self) -> int:
        return len(self._stalls)

    def note(self, start: float, end: float) -> None:
        """The loop stalled from ``start`` to ``end`` (ignored when shorter than MIN_STALL_S)."""
        if end - start < MIN_STALL_S:
            return
        stalls = self._stalls
        if stalls and start < stalls[-1][1]:  # overlaps the last one (a late wake in a busy span)
            start = min(start, stalls[-1][0])
            end = max(end, stalls.pop()[1])
        stalls.append((start, end))
        self.noted += 1
        while stalls and stalls[0][1] < end - self.keep_s:
            stalls.popleft()

    def worst(self, lo: float, hi: float) -> float:
        """The longest stall overlapping [lo, hi], in seconds (0.0: none)."""
        worst = 0.0
        for start, end in reversed(self._stalls):
            if end < lo:
                break
            if start <= hi:
                worst = max(worst, end - start)
        return worst

    def busy_before(self, at: float, gap: float) -> float:
        """How long the loop had been busy when ``at`` came: from the start of the stalls that
        run into ``at``, each no more than ``gap`` after the one before (between them the loop
        ran only short iterations, each of which may have put a callback ahead of a read), in
        seconds (0.0: none reaches ``at``)."""
        start = None
        for s, e in reversed(self._stalls):
            if s > at:
                continue
            if e < (at if start is None else start) - gap:
                break
            start = s if start is None else min(start, s)
        return 0.0 if start is None else at - start

    def since(self, after: float) -> list[tuple[float, float]]:
        """The stalls that ended after ``after``, oldest first (for passing them on)."""
        out: list[tuple[float, float]] = []
        for stall in reversed(self._stalls):
            if stall[1] <= after:
                break
            out.append(stall)
        out.reverse()
        return out


def stall_line(start: float, end: float) -> str:
    """One stall as a line of text (how a fake server reports its stalls on stdout)."""
    return f"stall {start:.6f} {end:.6f}"


def parse_stall_line(line: str) -> tuple[float, float] | None:
    """The stall a ``stall_line`` holds; None for any other line (never raises)."""
    parts = line.split()
    if len(parts) != 3 or parts[0] != "stall":
        return None
    try:
        start, end = float(parts[1]), float(parts[2])
    except ValueError:
        return None
    if not (0.0 <= start <= end) or end - start > KEEP_S or end == float("inf"):
        return None
    return start, end
