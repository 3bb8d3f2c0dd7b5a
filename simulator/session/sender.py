"""The sender: frames go out on an absolute schedule (frame n due at T0 + n frames), each send
timed against its due time and recorded, so a late frame shows in the session's figures.

A send that never returns (a peer that stopped reading) is recorded when the session ends, as
late as that: ``record_unfinished``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.base import DuplexClient, WireMessage
from duplexsim.core.errors import SessionError
from duplexsim.core.records import EventRecords
from duplexsim.core.timeline import Schedule

__all__ = ["Sender"]

SentTap = Callable[[NDArray[np.float32], float], None]


class Sender:
    def __init__(
        self,
        client: DuplexClient,
        frame_s: float,
        clock: Callable[[], float],
        records: EventRecords,
        on_sent: SentTap | None = None,
    ) -> None:
        self.client = client
        self.schedule = Schedule(frame_s)
        self.clock = clock
        self.records = records
        self.on_sent = on_sent
        self.t0 = 0.0  # the timeline's origin on the clock (``start``)
        self.frames_sent = 0
        self._sending: tuple[int, float, float, int] | None = None  # (n, due, woke, samples)

    def start(self) -> float:
        """T0: the next whole tick of the clock."""
        self.t0 = Schedule.start(self.clock())
        return self.t0

    @property
    def frame_s(self) -> float:
        return self.schedule.frame_s

    def media_s(self) -> float:
        """The media time sent: where the frames sent so far end on the timeline."""
        return self.schedule.due(self.frames_sent)

    async def send(self, n: int, chunk: NDArray[np.float32], message: WireMessage | None) -> float:
        """Send frame ``n`` once it is due; returns the clock when the send returned. A send
        that fails (``SessionError``) did not go out: nothing was late."""
        due = self.t0 + self.schedule.due(n)
        delay = due - self.clock()
        if delay > 0:
            await asyncio.sleep(delay)
        woke = self.clock()
        self._sending = (n, due, woke, chunk.size)
        try:
            if message is None:
                await self.client.send_audio(chunk)
            else:
                await self.client.send_encoded(message)
        except SessionError:
            self._sending = None
            raise
        self._sending = None
        sent = self.clock()  # after the send returned: the send's own cost is in the error
        self.frames_sent = n + 1
        self.records.add_send(n, sent - self.t0, due - self.t0, chunk.size, woke - self.t0)
        if self.on_sent is not None:
            self.on_sent(chunk, due - self.t0)
        return sent

    def record_unfinished(self) -> None:
        """A send still under way (the session ended around it) is recorded as late as now."""
        if self._sending is not None:
            n, due, woke, size = self._sending
            now = self.clock()
            self.records.add_send(n, now - self.t0, due - self.t0, size, woke - self.t0)
            self._sending = None
