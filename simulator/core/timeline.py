"""One clock for everything: the pacing schedule and placement of received audio on the timeline.

Timeline time is seconds since T0, the instant the first context frame was sent.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["SILENCE_PEAK", "OutputTrack", "Placement", "Schedule", "inaudible"]

# A chunk whose peak stays below -70 dBFS (about 10 LSB of PCM16) is silence for placement: a lossy
# codec never decodes digital silence to exact zeros (Opus leaves +-1 LSB), and that noise floor
# must not chain a continuous stream's chunks together as if they were speech.
SILENCE_PEAK = 10 ** (-70 / 20)
TICK_S = 0.001  # sessions start on whole milliseconds of the clock (``Schedule.start``)


def inaudible(samples: NDArray[np.float32]) -> bool:
    return not samples.size or (
        float(samples.max()) < SILENCE_PEAK and float(samples.min()) > -SILENCE_PEAK
    )


@dataclass(frozen=True)
class Schedule:
    """Frame n is due at T0 + n * frame_s; sending on due times, never relative sleeps, cannot drift."""

    frame_s: float

    def due(self, n: int) -> float:
        return n * self.frame_s

    @staticmethod
    def start(now: float, tick_s: float = TICK_S) -> float:
        """T0 for a session ready at ``now``: the next whole tick of the clock. Frames of whole
        ticks then fall due on shared instants, and the loop wakes once for all sessions due at
        an instant instead of once per session."""
        # rounded to a millionth of a tick first: a clock reading on a whole tick stays on it
        # instead of being pushed a tick later by the division's last bit
        return math.ceil(round(now / tick_s, 6)) * tick_s

    def frames_for(self, n_samples: int, frame_len: int) -> int:
        return -(-n_samples // frame_len)


@dataclass(frozen=True)
class Placement:
    start_s: float  # where the chunk was placed on the timeline
    arrival_s: float  # when it arrived, relative to T0
    n_samples: int
    offset_s: float | None  # the position the server declared, if any
    silent: bool = False  # below SILENCE_PEAK: it never holds back what follows

    @property
    def queued_s(self) -> float:
        """How long the chunk waited behind earlier audio (faster-than-real-time senders)."""
        return self.start_s - self.arrival_s


class OutputTrack:
    """The model's audio as a listener hears it: each chunk starts at
    max(arrival, end of the previous audible chunk), so bursts play back-to-back rather than
    overlap. Silence (a chunk below ``SILENCE_PEAK``; it is not written) never holds back what
    follows: a real-time stream that was late once (one slow frame) is placed at its arrivals
    again from its next silent frame on, instead of carrying that delay to the model's onset.

    An audible chunk that follows an audible one in the stream and arrives at most ``bridge_s``
    after that one's end is placed right after it: the gap is the transport's lateness, not the
    model's pause, and must neither split the reply nor drop its first piece (it was heard when it
    came). ``stream_end_s`` is how far the model's own stream has got: the audible end plus the
    silence it sent since, so a reply's end follows the model's audio time, not ours."""

    def __init__(self, rate: int, initial_s: float = 30.0, *, bridge_s: float = 0.1) -> None:
        self.rate = rate
        self.bridge = round(bridge_s * rate)
        self._buf = np.zeros(int(initial_s * rate), dtype=np.float32)
        self._audible_end = 0  # samples: end of the last chunk with any non-zero sample
        self._extent = 0  # samples: furthest placed position
        self._silent_after = 0  # samples of silence the stream sent since its last audible chunk
        self._audible_last = False  # the previous chunk in the stream was audible
        self.late_max_s = 0.0  # the most a bridged chunk was placed before its arrival
        self._received = 0  # samples the model's stream has sent, silence included
        # where each audible chunk starts on the timeline, and in the stream (ascending both)
        self._starts: list[int] = []
        self._stream_at: list[int] = []

    @property
    def stream_end_s(self) -> float:
        """The model's audio time on the timeline: the audible end and the silence sent since."""
        return (self._audible_end + self._silent_after) / self.rate

    def stream_after_s(self, position_s: float) -> float:
        """How much of the model's own stream came after timeline position ``position_s`` (a
        position in placed audio): its audio time since then, whatever gaps late arrival put
        on the timeline."""
        pos = round(position_s * self.rate)
        i = bisect.bisect_right(self._starts, pos) - 1
        if i < 0:
            return self._received / self.rate
        start = self._starts[i]
        end = self._starts[i + 1] if i + 1 < len(self._starts) else self._audible_end
        index = self._stream_at[i] + min(max(pos - start, 0), end - start)
        return (self._received - index) / self.rate

    @property
    def end_s(self) -> float:
        """End of the audible audio placed so far."""
        return self._audible_end / self.rate

    @property
    def end_samples(self) -> int:
        """Everything before this is final: later chunks are only ever placed after it."""
        return self._audible_end

    def segment(self, lo: int, hi: int) -> NDArray[np.float32]:
        """A view of samples [lo, hi) of the timeline (zeros where nothing was placed)."""
        self._grow(hi)
        return self._buf[lo:hi]

    def place(
        self,
        samples: NDArray[np.float32],
        arrival_s: float,
        offset_s: float | None = None,
        *,
        silent: bool = False,
    ) -> Placement:
        """Place a chunk; ``silent`` says it is known to be silence (else it is checked)."""
        arrival = round(max(arrival_s, 0.0) * self.rate)
        start = max(arrival, self._audible_end)
        silent = silent or inaudible(samples)
        if not silent and self._audible_last and arrival - self._audible_end <= self.bridge:
            start = self._audible_end  # late by at most bridge_s: continues the audible chunk
            self.late_max_s = max(self.late_max_s, (arrival - start) / self.rate)
        stop = start + samples.size
        self._grow(stop)
        if silent:
            self._silent_after += samples.size
        else:  # past the audible end the timeline is zeros already
            self._buf[start:stop] = samples
            self._audible_end = stop
            self._silent_after = 0
            self._starts.append(start)
            self._stream_at.append(self._received)
        self._received += samples.size
        self._audible_last = not silent
        self._extent = max(self._extent, stop)
        return Placement(start / self.rate, arrival_s, int(samples.size), offset_s, silent)

    def _grow(self, needed: int) -> None:
        if needed > self._buf.size:
            bigger = np.zeros(max(needed, 2 * self._buf.size), dtype=np.float32)
            bigger[: self._extent] = self._buf[: self._extent]
            self._buf = bigger

    def audio(self, min_duration_s: float = 0.0) -> NDArray[np.float32]:
        """Everything placed so far, zero-padded to at least ``min_duration_s``."""
        n = max(self._extent, round(min_duration_s * self.rate))
        self._grow(n)
        return self._buf[:n].copy()
