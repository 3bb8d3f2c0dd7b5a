"""Where a fake server stands on the session's timeline, in input samples (pure: times are given).

A real service generates on wall-clock time: a model keeps talking after the user stops sending.
A fake that moved only when input arrived would freeze mid-reply when its client fell quiet. Here
the input is the clock while it flows (so a reply's first sample lands exactly where a behaviour
put it, however the input is chunked or however fast it is fed), and once no input has arrived
for ``LAPSE_S`` the wall clock carries the timeline on from the last arrival.

A reply due inside that lapse goes out at its end, up to ``LAPSE_S`` late. The lapse is long
enough that a client streaming in real time never reaches it, even on a loaded machine whose
event loop stalls for a few hundred milliseconds; a server that hears silence in place of missing
input (``FILL_LAPSE_S``) waits longer still, since taking a late client for a stopped one would
shift its timeline.
"""

from __future__ import annotations

__all__ = ["FILL_LAPSE_S", "LAPSE_S", "MediaClock"]

LAPSE_S = 0.5  # no input for this long: the wall clock takes over
FILL_LAPSE_S = 1.0  # the same, for servers that then hear silence for the input not sent
# ``at + lapse - at`` can fall a rounding error short of ``lapse``: a wake-up at the time ``when``
# gave must find the lapse over, or the caller re-arms the same instant for ever
_EPSILON_S = 1e-9


class MediaClock:
    """Input samples received, and the timeline position they and the wall clock give."""

    def __init__(self, rate: int, lapse_s: float = LAPSE_S) -> None:
        if rate <= 0 or lapse_s <= 0:
            raise ValueError("rate and lapse_s must be positive")
        self.rate = rate
        self.lapse_s = lapse_s
        self.received = 0  # input samples, plus any the server filled in itself
        self._anchor: tuple[float, int] | None = None  # (time, received) of the last arrival
        self._reached = 0  # the furthest position reported: the timeline never runs back

    def heard(self, samples: int, now: float | None) -> int:
        """``samples`` more input arrived at ``now`` (None: no clock, media time only); returns
        where they start."""
        c0 = self.received
        self.received += samples
        if now is not None:
            self._anchor = (now, self.received)
        return c0

    def filled(self, samples: int) -> int:
        """The server itself supplied ``samples`` (silence for input that never came); they do
        not move the last arrival. Returns where they start."""
        c0 = self.received
        self.received += samples
        return c0

    def position(self, now: float | None) -> int:
        """The timeline position at ``now``: the input received, or where the wall clock has
        carried it since input lapsed."""
        if now is not None and self._anchor is not None:
            at, base = self._anchor
            if now - at >= self.lapse_s - _EPSILON_S:
                self._reached = max(self._reached, base + int((now - at) * self.rate))
        self._reached = max(self._reached, self.received)
        return self._reached

    def when(self, sample: int) -> float | None:
        """The time at which the position reaches ``sample`` if no more input arrives; None
        before any timed input (nothing moves without a clock)."""
        if self._anchor is None:
            return None
        at, base = self._anchor
        if sample <= self._reached:
            return at
        # half a sample more, so that rounding never leaves the position one short
        return at + max(self.lapse_s, (sample - base + 0.5) / self.rate)
