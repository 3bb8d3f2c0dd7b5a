"""A streaming client's events, taken as a pollable client's are: once per frame, without waiting.

The session has one receive path (``poll_events``); a client that only offers ``events()`` gets a
task that moves its events into a list as they come. Events carry the time their bytes arrived,
so when the session handles them changes nothing in their timing.
"""

from __future__ import annotations

import asyncio

from duplexsim.clients.base import ClientEvent, DuplexClient

__all__ = ["EventPump"]


class EventPump:
    def __init__(self, client: DuplexClient) -> None:
        self._client = client
        self._events: list[ClientEvent] = []
        self._task: asyncio.Task[None] | None = None
        self.wake = asyncio.Event()  # set when something arrived (a session may wait on it)

    def start(self) -> None:
        self._task = asyncio.create_task(self._pump())

    async def _pump(self) -> None:
        async for event in self._client.events():
            self._events.append(event)
            self.wake.set()
        self.wake.set()

    def poll_events(self) -> tuple[list[ClientEvent], bool]:
        """The events since the last call, and whether the stream has ended; a failure of the
        client's stream is raised here."""
        events, self._events = self._events, []
        self.wake.clear()
        task = self._task
        ended = task is not None and task.done()
        if ended and task is not None and not task.cancelled():
            task.result()  # raises the stream's own failure
        return events, ended

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
