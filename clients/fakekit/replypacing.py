"""How the hosted fakes pace a reply's audio, as the real services do: ``BURST_S`` of it the
moment the reply starts, the rest generated ``SPEEDUP`` times faster than the session's timeline
moves, in chunks of ``chunk_s``. Pure arithmetic on media time (input samples), shared by every
fake that sends replies ahead of real time (openai-realtime, gemini-live, hume-evi, nova-sonic)
so that they cannot drift apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["BURST_S", "CHUNK_S", "SPEEDUP", "PacedReply", "lead_in"]

CHUNK_S = 0.1  # audio per output message
BURST_S = 1.0  # reply audio sent the moment a reply starts ...
SPEEDUP = 4.0  # ... then generated this many times faster than real time
# (BURST_S + SPEEDUP * elapsed) / chunk_s can come out a rounding error above a whole number of
# chunks at the very position where that chunk falls due: that must not send one more
_EPSILON = 1e-9


def lead_in(at: int, c0: int, rate: int, out_rate: int) -> bytes:
    """PCM16 silence at ``out_rate`` from ``c0`` (the start of the input chunk a reply goes out
    with) to ``at`` (its first sample): led by it, the reply lands at exactly ``at`` on the
    client's timeline."""
    return bytes(2 * round(max(at - c0, 0) * out_rate / rate))


@dataclass
class PacedReply:
    """One reply's PCM16 chunks and how many of them have gone out."""

    chunks: list[bytes]
    start: int  # input sample from which generation is timed
    end: int  # input sample at which the reply has played out on the client
    rate: int  # input samples per second: the timeline's
    chunk_s: float = CHUNK_S
    sent: int = 0

    @classmethod
    def split(
        cls, pcm: bytes, out_rate: int, *, start: int, end: int, rate: int, chunk_s: float = CHUNK_S
    ) -> PacedReply:
        """``pcm`` (at ``out_rate``) in chunks of ``chunk_s``; the last one may be shorter."""
        step = 2 * round(chunk_s * out_rate)
        chunks = [pcm[i : i + step] for i in range(0, len(pcm), step)]
        return cls(chunks, start, end, rate, chunk_s)

    @property
    def generated(self) -> bool:
        """Every chunk has gone out."""
        return self.sent >= len(self.chunks)

    @property
    def bytes_sent(self) -> int:
        return sum(len(chunk) for chunk in self.chunks[: self.sent])

    def take_due(self, position: int) -> range:
        """The indices of the chunks generated once the timeline reaches ``position`` (input
        samples) and not sent yet; from now on they count as sent."""
        elapsed_s = max(0, position - self.start) / self.rate
        due = math.ceil((BURST_S + SPEEDUP * elapsed_s) / self.chunk_s - _EPSILON)
        taken = range(self.sent, max(self.sent, min(len(self.chunks), due)))
        self.sent = taken.stop
        return taken

    def next_due(self) -> int:
        """The timeline position at which the next chunk is generated; once all have been, the
        reply's ``end``."""
        if self.generated:
            return self.end
        step_s = max(0.0, self.chunk_s * (self.sent + 1) - BURST_S) / SPEEDUP
        return self.start + math.ceil(step_s * self.rate)
