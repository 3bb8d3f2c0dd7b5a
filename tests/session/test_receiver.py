"""The receiver alone: what a client received is handed on once per frame, audio to the reply
tracker's timeline and the records, everything to the log, within what a server may send; a
fatal error and a stalled stream end the session; how long events waited is measured."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from duplexsim.clients.base import (
    AudioOut,
    ClientEvent,
    EndOfTurn,
    ErrorEvent,
    ProviderEmotion,
    SpeechStarted,
    Transcript,
)
from duplexsim.core.errors import Disconnected, ProtocolError, RemoteError
from duplexsim.core.records import EventRecords
from duplexsim.core.replytracker import ReplyTracker
from duplexsim.core.turns import EndReason, TurnSettings
from duplexsim.core.vad import VadConfig
from duplexsim.session.receiver import Receiver
from tests.helpers.signals import voiced_signal

RATE = 16000
T0 = 100.0  # the timeline's origin on the clock


class Inbox:
    def __init__(self, events: list[ClientEvent], ended: bool = False) -> None:
        self.events, self.ended = events, ended

    def poll_events(self) -> tuple[list[ClientEvent], bool]:
        events, self.events = self.events, []
        return events, self.ended


def receiver(events: list[ClientEvent], ended: bool = False, **kw: Any) -> Receiver:
    logged: list[tuple[Any, ...]] = []
    tracker = ReplyTracker(RATE, TurnSettings(), VadConfig(), continuous=kw.pop("continuous", True))
    tracker.context_ended(0.0)

    def log(t: float, direction: str, kind: str, **fields: Any) -> None:
        logged.append((round(t, 6), direction, kind, fields))

    r = Receiver(Inbox(events, ended), tracker, EventRecords(), log, max_reply_s=1.0, **kw)
    r.t0 = r.last_rx = T0
    r.logged = logged  # type: ignore[attr-defined]
    return r


def test_audio_goes_on_the_timeline_and_into_the_records() -> None:
    placed: list[float] = []
    voice = voiced_signal(0.1, RATE)
    silence = np.zeros(320, np.float32)
    r = receiver(
        [AudioOut(voice, T0 + 0.5), AudioOut(silence, T0 + 0.6, silent=True)],
        on_placed=lambda x, at: placed.append(at),
    )
    assert r.drain(T0 + 0.62) is False
    assert r.tracker.track.end_s == pytest.approx(0.6)
    assert list(r.records.recv_placed) == pytest.approx([0.5, 0.6])
    assert list(r.records.recv_silent) == [False, True]
    assert placed == [pytest.approx(0.5)]  # the tap hears audio, not silence
    assert r.rx_lag_max_s == pytest.approx(0.12)  # the first event waited 120 ms
    assert r.last_rx == T0 + 0.6


def test_events_are_logged_where_they_arrived_and_end_of_turn_reaches_the_tracker() -> None:
    events: list[ClientEvent] = [
        AudioOut(voiced_signal(0.3, RATE), T0 + 0.2),
        Transcript("hello", T0 + 0.3, final=True),
        SpeechStarted(T0 + 0.35),
        ProviderEmotion({"Joy": 0.5}, T0 + 0.4, source="prosody", message_id="m1"),
        ErrorEvent(RemoteError("busy, retry", retryable=True), T0 + 0.45, fatal=False),
        EndOfTurn(T0 + 0.5),
    ]
    r = receiver(events)
    r.drain(T0 + 0.5)
    kinds = [(t, kind) for t, _, kind, _ in r.logged]  # type: ignore[attr-defined]
    assert kinds == [
        (0.3, "transcript"), (0.35, "speech_started"), (0.4, "provider_emotion"),
        (0.45, "error"), (0.5, "end_of_turn"),
    ]  # fmt: skip
    assert r.logged[0][3] == {"text": "hello", "final": True}  # type: ignore[attr-defined]
    assert r.tracker.ended is EndReason.END_OF_TURN


def test_a_fatal_error_ends_the_session() -> None:
    r = receiver([ErrorEvent(RemoteError("gone"), T0 + 0.1)])
    with pytest.raises(RemoteError, match="gone"):
        r.drain(T0 + 0.1)


def test_a_flood_fails_the_session() -> None:
    much = np.full(RATE * 20, 0.1, np.float32)  # 20 s of audio at 0.1 s: beyond 1 s + margin
    with pytest.raises(ProtocolError, match="flood"):
        receiver([AudioOut(much, T0 + 0.1)]).drain(T0 + 0.1)


def test_a_continuous_stream_that_falls_silent_has_stalled() -> None:
    r = receiver([])
    r.check_stall(T0 + 5.0, 5.0)
    with pytest.raises(Disconnected, match="stalled") as err:
        r.check_stall(T0 + 5.01, 5.0)
    assert err.value.reason == "stalled"
    receiver([], continuous=False).check_stall(T0 + 60.0, 5.0)  # time passing is its silence


def test_the_end_of_the_stream_is_reported() -> None:
    assert receiver([], ended=True).drain(T0) is True
