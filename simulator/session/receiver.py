"""The receive side of a session: what the client received since the last frame (stamped when its
bytes were read), handed on once per frame: audio to the reply tracker's timeline, everything to
the event log, all of it within what a server may send (a flood fails the session instead of
filling memory), and a continuous stream that falls silent for too long is a stall.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.base import (
    AudioOut,
    ClientEvent,
    EndOfTurn,
    ErrorEvent,
    ProviderEmotion,
    RateLimits,
    SpeechStarted,
    SpeechStopped,
    Transcript,
    UsageReport,
)
from duplexsim.core.errors import Disconnected
from duplexsim.core.intake import AHEAD_MARGIN_S, Intake
from duplexsim.core.records import EventRecords
from duplexsim.core.replytracker import ReplyTracker
from duplexsim.core.retry import ProviderLimit
from duplexsim.core.usage import UsageTally

__all__ = ["Inbox", "Receiver"]

Log = Callable[..., None]  # log(t, direction, kind, **fields)
PlacedTap = Callable[[NDArray[np.float32], float], None]
LimitsTap = Callable[[tuple[ProviderLimit, ...]], None]


class Inbox(Protocol):
    def poll_events(self) -> tuple[list[ClientEvent], bool]: ...


class Receiver:
    def __init__(
        self,
        inbox: Inbox,
        tracker: ReplyTracker,
        records: EventRecords,
        log: Log,
        *,
        max_reply_s: float,
        on_placed: PlacedTap | None = None,
        on_rate_limits: LimitsTap | None = None,
    ) -> None:
        self.inbox = inbox
        self.tracker = tracker
        self.records = records
        self.log = log
        self.on_placed = on_placed
        self.on_rate_limits = on_rate_limits  # hears the provider's limits as it says them
        self.usage = UsageTally()  # what the provider says the session used
        self.intake = Intake(tracker.track.rate, max_reply_s + AHEAD_MARGIN_S)
        self.t0 = 0.0
        self.last_rx = 0.0  # on the clock: when the last event's bytes were read
        self.rx_lag_max_s = 0.0  # the longest an event waited between its read and its handling

    def drain(self, now: float) -> bool:
        """Hand on everything received since the last call (``now``: the clock); whether the
        client's stream has ended."""
        events, ended = self.inbox.poll_events()
        if events:
            self.rx_lag_max_s = max(self.rx_lag_max_s, now - min(e.arrival for e in events))
        for event in events:
            self.on_event(event)
        return ended

    def check_stall(self, now: float, timeout_s: float) -> None:
        """A stream that sends its silence and has sent nothing for ``timeout_s`` is stalled."""
        if self.tracker.continuous and now - self.last_rx > timeout_s:
            raise Disconnected(
                f"server sent nothing for {timeout_s:.1f} s (stalled)", reason="stalled"
            )

    def on_event(self, event: ClientEvent) -> None:
        t = event.arrival - self.t0
        self.last_rx = event.arrival
        self.intake.message(t)
        if isinstance(event, AudioOut):
            self._on_audio(event, t)
        elif isinstance(event, EndOfTurn):
            self.log(t, "recv", "end_of_turn")
            self.tracker.end_of_turn(t)
        elif isinstance(event, Transcript):
            self.intake.text(len(event.text))
            self.log(t, "recv", "transcript", text=event.text, final=event.final)
        elif isinstance(event, SpeechStarted | SpeechStopped):
            started = isinstance(event, SpeechStarted)
            self.log(t, "recv", "speech_started" if started else "speech_stopped")
        elif isinstance(event, ProviderEmotion):
            self._on_provider_emotion(event, t)
        elif isinstance(event, UsageReport):
            self.usage.add(event.usage, cumulative=event.cumulative)
            counts = event.usage.counts()
            self.log(t, "recv", "usage", source=event.source, cumulative=event.cumulative, **counts)
        elif isinstance(event, RateLimits):
            limits = [asdict(limit) for limit in event.limits]
            self.log(t, "recv", "rate_limits", source=event.source, limits=limits)
            if self.on_rate_limits is not None:
                self.on_rate_limits(event.limits)
        elif isinstance(event, ErrorEvent):
            self._on_error(event, t)

    def _on_audio(self, event: AudioOut, t: float) -> None:
        samples = np.asarray(event.samples, dtype=np.float32)
        placed = self.tracker.place(samples, t, event.offset_s, silent=event.silent)
        rate = self.tracker.track.rate
        self.intake.audio(placed.n_samples, t, placed.start_s + placed.n_samples / rate)
        self.records.add_received(
            t, placed.n_samples, placed.start_s, event.offset_s, placed.silent
        )
        if self.on_placed is not None and not placed.silent:
            self.on_placed(samples, placed.start_s)

    def _on_provider_emotion(self, event: ProviderEmotion, t: float) -> None:
        self.intake.scores(event.scores)
        # recorded in events.jsonl as the provider said it, beside the scorer's own estimate
        scores: dict[str, Any] = {k: round(float(v), 6) for k, v in event.scores.items()}
        self.log(
            t, "recv", "provider_emotion",
            role=event.role, source=event.source, id=event.message_id, scores=scores,
        )  # fmt: skip

    def _on_error(self, event: ErrorEvent, t: float) -> None:
        err = event.error
        self.intake.text(len(err.message))
        self.log(
            t, "recv", "error",
            reason=err.reason, message=err.message, retryable=err.retryable, fatal=event.fatal,
        )  # fmt: skip
        if event.fatal:
            raise err
