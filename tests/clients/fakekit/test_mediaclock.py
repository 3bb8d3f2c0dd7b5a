"""Fakes generate on the session's timeline: the input while it flows, the wall clock once it stops.

A client that stops sending after its turn (as the official SDKs' clients do) still gets the whole
reply and the end of turn, from ``tick`` at ``wake_at``; without ticks it would not (checked, so
the tests can fail). Pure: every time is an argument.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.fakekit.mediaclock import LAPSE_S, MediaClock
from duplexsim.clients.fakekit.serveractions import Action, Send, expand
from duplexsim.clients.gemini_live import events as gemini_wire
from duplexsim.clients.gemini_live.fake import ServerProtocol as GeminiServer
from duplexsim.clients.openai_realtime.fake import ServerProtocol as OpenAIServer
from duplexsim.clients.pcm_ws import events as pcm_wire
from duplexsim.clients.pcm_ws.fake import ServerProtocol as PcmServer
from duplexsim.core.audio import float_to_pcm16
from tests.helpers.signals import voiced_signal

FRAME_S = 0.02


def test_the_input_is_the_clock_while_it_flows() -> None:
    clock = MediaClock(16000)
    assert clock.when(100) is None and clock.position(5.0) == 0  # nothing timed yet
    assert clock.heard(320, now=10.0) == 0
    assert clock.position(10.0 + LAPSE_S / 2) == 320  # a frame's gap: still the input
    assert clock.heard(320, now=10.02) == 320
    assert clock.position(10.02) == 640


def test_the_wall_clock_carries_on_once_input_lapses() -> None:
    clock = MediaClock(16000)
    clock.heard(16000, now=1.0)
    assert clock.when(16000 + 800) == pytest.approx(1.0 + LAPSE_S)  # inside the lapse: at its end
    t = clock.when(16000 + 16000)
    assert t is not None and t == pytest.approx(2.0, abs=1e-4)
    assert clock.position(1.5) == 16000 + 8000
    assert clock.when(16000 + 800) == 1.0  # already reached: due at once
    assert clock.position(t) >= 32000
    clock.heard(320, now=2.1)  # input again: the timeline never runs back
    assert clock.position(2.1) >= 32000
    assert clock.filled(100) == 16320 and clock.received == 16420


@pytest.mark.parametrize("at", [0.1, 1234.567, 65535.715276955605])
def test_a_wake_up_at_when_moves_the_position(at: float) -> None:
    """Woken at exactly the time ``when`` gave, the position has moved past where it was: on a
    loop clock hours in, ``at + lapse - at`` is a rounding error short of the lapse, and a caller
    that re-armed the same instant would spin for ever."""
    clock = MediaClock(16000)
    clock.heard(320, now=at)
    for target in (321, 320 + 800, 320 + 16000):
        t = clock.when(target)
        assert t is not None and clock.position(t) >= target


def chunks(rate: int, speech_s: float, silence_s: float) -> list[np.ndarray]:
    x = np.concatenate([voiced_signal(speech_s, rate), np.zeros(round(silence_s * rate))])
    step = round(FRAME_S * rate)
    return [x[i : i + step].astype(np.float32) for i in range(0, x.size, step)]


def run(
    server: Any,
    messages: list[str | bytes],
    done: Callable[[list[str | bytes]], bool],
    *,
    ticks: bool,
    limit_s: float = 30.0,
) -> list[str | bytes]:
    """Feed ``messages`` in real time (one per frame), then stop sending and, with ``ticks``,
    tick the server at each ``wake_at`` until ``done`` says what was sent is complete."""
    sent: list[str | bytes] = []

    def collect(actions: list[Action]) -> None:
        sent.extend(a.message for a in expand(actions) if isinstance(a, Send))

    now = 0.0
    for message in messages:
        collect(server.receive(message, now))
        now += FRAME_S
    while ticks and not done(sent) and now < limit_s:
        wake = server.wake_at()
        assert wake is not None, "the server has nothing left to do, yet the turn is not over"
        now = max(now, wake)
        collect(server.tick(now))
    return sent


def openai_done(sent: list[str | bytes]) -> bool:
    return any(json.loads(m)["type"] == "response.done" for m in sent)


@pytest.mark.parametrize("ticks", [True, False])
def test_openai_reply_goes_on_when_the_client_stops_sending(ticks: bool) -> None:
    server = OpenAIServer(behaviour_factory("echo"))
    server.opening()
    frames = [
        json.dumps(
            {
                "type": "input_audio_buffer.append",
                "audio": base64.b64encode(float_to_pcm16(c)).decode(),
            }
        )
        for c in chunks(24000, 2.5, 0.9)  # the turn ends, the reply starts, the client stops
    ]
    sent = [json.loads(m) for m in run(server, list(frames), openai_done, ticks=ticks)]
    kinds = [e["type"] for e in sent]
    audio = sum(
        len(base64.b64decode(e["delta"]))
        for e in sent
        if e["type"] == "response.output_audio.delta"
    )
    assert "response.created" in kinds
    if not ticks:  # the old clock: the reply freezes where the input stopped
        assert "response.done" not in kinds
        return
    done = next(e for e in sent if e["type"] == "response.done")
    assert done["response"]["status"] == "completed"
    assert audio >= 2 * round(2.4 * 24000)  # the whole echo of the turn


def gemini_done(sent: list[str | bytes]) -> bool:
    return any(
        isinstance(p, gemini_wire.TurnComplete) for m in sent for p in gemini_wire.decode_server(m)
    )


@pytest.mark.parametrize("ticks", [True, False])
def test_gemini_turn_completes_when_the_client_stops_sending(ticks: bool) -> None:
    server = GeminiServer(behaviour_factory("echo"))
    setup = gemini_wire.encode_client(gemini_wire.Setup(model="models/gemini-3.8-live"))
    frames: list[str | bytes] = [setup] + [
        gemini_wire.encode_client(gemini_wire.AudioIn(float_to_pcm16(c), 16000))
        for c in chunks(16000, 2.5, 0.9)
    ]
    sent = run(server, frames, gemini_done, ticks=ticks)
    parts = [p for m in sent for p in gemini_wire.decode_server(m)]
    audio = sum(len(p.pcm) for p in parts if isinstance(p, gemini_wire.ModelAudio))
    assert audio > 0
    assert gemini_done(sent) is ticks
    if ticks:
        assert any(isinstance(p, gemini_wire.GenerationComplete) for p in parts)
        assert audio >= 2 * round(2.4 * 24000)


def pcm_done(sent: list[str | bytes]) -> bool:
    return any(
        isinstance(m, str) and isinstance(pcm_wire.decode(m), pcm_wire.EndOfTurn) for m in sent
    )


@pytest.mark.parametrize("ticks", [True, False])
def test_pcm_ws_model_talks_on_when_the_client_stops_sending(ticks: bool) -> None:
    server = PcmServer(behaviour_factory("echo"))
    hello = pcm_wire.encode(pcm_wire.Hello(sample_rate=16000, frame_ms=20))
    frames: list[str | bytes] = [hello] + [
        pcm_wire.encode_audio(c) for c in chunks(16000, 1.0, 0.9)
    ]
    sent = run(server, frames, pcm_done, ticks=ticks)
    assert pcm_done(sent) is ticks
    if ticks:  # one output frame for every frame of the timeline, heard or filled in
        audio = [m for m in sent if isinstance(m, bytes)]
        assert all(len(m) == 640 for m in audio) and len(audio) > len(frames) + 20


def test_gemini_audio_stream_end_ends_the_turn_without_more_audio() -> None:
    """audioStreamEnd (the microphone went off) lets the server hear the end of speech at once:
    the reply and turnComplete come though not one frame of silence was sent."""
    server = GeminiServer(behaviour_factory("echo"))
    setup = gemini_wire.encode_client(gemini_wire.Setup(model="models/gemini-3.8-live"))
    frames: list[str | bytes] = [setup] + [
        gemini_wire.encode_client(gemini_wire.AudioIn(float_to_pcm16(c), 16000))
        for c in chunks(16000, 2.5, 0.0)
    ]
    assert not gemini_done(run(server, list(frames), gemini_done, ticks=False))
    assert server.wake_at() is None  # nothing heard the turn end: nothing will come
    server = GeminiServer(behaviour_factory("echo"))
    frames.append(gemini_wire.encode_client(gemini_wire.AudioStreamEnd()))
    sent = run(server, frames, gemini_done, ticks=True)
    assert gemini_done(sent)
