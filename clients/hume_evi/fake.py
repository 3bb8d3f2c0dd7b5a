"""The EVI fake server's protocol without I/O: client frames in, ``Action``s out.

It opens with ``chat_metadata``, takes ``session_settings`` (raw linear16 needs its format) and
then ``audio_input``, runs a reference behaviour on media time (input samples received), and
answers each user turn as EVI does: ``user_message`` (the turn's span in ms and prosody scores),
``assistant_message``, ``audio_output`` WAV chunks at 48 kHz, ``assistant_prosody`` and
``assistant_end``. A reply that starts at sample s of a chunk covering [c0, c1) goes out when that
chunk arrives, led by s - c0 of silence, so its first sample lands at exactly s; the rest follows
faster than real time (``BURST_S`` at once, then ``SPEEDUP`` x). Time is the session's timeline:
the input while it flows, the wall clock once it stops (``duplexsim.clients.fakekit.mediaclock``; the shell calls
``tick`` at ``wake_at``), so a reply goes on to assistant_end when the client stops sending, as
the real service's does. User speech during a reply interrupts it (``user_interruption``, Unix ms from ``start_unix_ms`` plus media time).

The prosody scores are the fake's stand-in for Hume's expression model: a function of the
audio's loudness only (louder: more Excitement, quieter: more Calmness), for wire tests.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.declare import Request
from duplexsim.clients.fakekit.faults import Faults, MediaFaults, Rejection
from duplexsim.clients.fakekit.mediaclock import MediaClock
from duplexsim.clients.fakekit.replypacing import PacedReply, lead_in
from duplexsim.clients.fakekit.serveractions import Action, Send
from duplexsim.clients.hume_evi import events as wire
from duplexsim.clients.hume_evi.protocol import OUTPUT_RATE
from duplexsim.clients.hume_evi.wav import encode_wav
from duplexsim.core.audio import float_to_pcm16, pcm16_to_float, resample
from duplexsim.core.errors import ProtocolError

__all__ = ["PATH", "ServerProtocol", "check_key", "prosody_scores"]

PATH = "/v0/evi/chat"
RECENT_S = 30.0  # input kept for scoring the user's turn


def check_key(api_key: str | None, request: Request) -> Rejection | None:
    """HTTP 401 for a handshake without a key (the ``X-Hume-Api-Key`` header, or ``api_key`` /
    ``access_token`` in the query), or, when the fake has ``api_key``, another one."""
    query = parse_qs(urlsplit(request.path).query)
    given = (
        request.headers.get("X-Hume-Api-Key")
        or query.get("api_key", [""])[0]
        or query.get("access_token", [""])[0]
    )
    if given and (api_key is None or given == api_key):
        return None
    body = json.dumps({"message": "Websocket initialized with invalid credentials."})
    return Rejection(401, {}, body + "\n")  # never echo what was sent


def prosody_scores(x: NDArray[np.float32]) -> dict[str, float]:
    """All 48 emotions, from loudness alone (see the module's note)."""
    rms = float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) if x.size else 0.0
    arousal = min(max((20 * math.log10(max(rms, 1e-6)) + 40) / 30, 0.0), 1.0)
    scores = dict.fromkeys(wire.EMOTIONS, 0.02)
    scores.update(Calmness=1 - arousal, Excitement=arousal, Interest=0.2 + 0.5 * arousal)
    scores["Tiredness"] = 0.5 * (1 - arousal)
    return {k: round(v, 4) for k, v in scores.items()}


@dataclass
class _Playback:
    id: str
    reply: PacedReply  # 48 kHz PCM16 from its start; user speech before its end interrupts it
    scores: dict[str, float]


class ServerProtocol:
    def __init__(
        self,
        behaviour_factory: Callable[[int], Behaviour],
        faults: Faults | None = None,
        *,
        chat_id: str = "chat-1",
        start_unix_ms: int = 0,
    ) -> None:
        self._factory = behaviour_factory
        self._injected = MediaFaults(faults or Faults())
        self._chat_id = chat_id
        self._start_unix_ms = start_unix_ms
        self._behaviour: Behaviour | None = None
        self._rate = 0
        self._clock = MediaClock(16000)  # replaced at the rate session_settings names
        self._now: float | None = None  # when the message being answered arrived
        self._replies = 0
        self._seen: object = None
        # start, the reply at the input rate, the same at 48 kHz
        self._pending: tuple[int, NDArray[np.float32], NDArray[np.float32]] | None = None
        self._playing: _Playback | None = None
        self._recent: list[tuple[int, NDArray[np.float32]]] = []  # the last RECENT_S of input
        self._done = False

    def open(self) -> list[Action]:
        meta = wire.ChatMetadata(self._chat_id, f"group-{self._chat_id}", f"req-{self._chat_id}")
        return [Send(wire.encode_server(meta))]

    def receive(self, frame: str | bytes, now: float | None = None) -> list[Action]:
        """The actions answering one client message that arrived at ``now`` (None: no clock;
        the timeline then moves with the input alone)."""
        self._now = now
        if self._done:
            return []
        try:
            msg = wire.decode_client(frame)
            match msg:
                case wire.SessionSettings():
                    return self._settings(msg)
                case wire.AudioInput(pcm=pcm):
                    return self._audio(pcm)
        except ProtocolError as exc:
            return [self._error("E0101", "invalid_message", exc.message)]
        return []  # user_input, pause/resume, tool results: nothing for a reference model

    def _settings(self, msg: wire.SessionSettings) -> list[Action]:
        if msg.channels != 1 or not 8000 <= msg.sample_rate <= 48000:
            raise ProtocolError(
                f"this fake takes mono 8-48 kHz, not {msg.channels} channels at {msg.sample_rate} Hz"
            )
        if self._behaviour is None or msg.sample_rate != self._rate:
            self._rate = msg.sample_rate
            self._clock = MediaClock(msg.sample_rate)
            self._behaviour = self._factory(msg.sample_rate)
        return []

    def _audio(self, pcm: bytes) -> list[Action]:
        if self._behaviour is None:
            raise ProtocolError("audio_input of raw PCM before session_settings gave its format")
        if len(pcm) % 2:
            raise ProtocolError(f"audio_input of {len(pcm)} bytes: linear16 needs an even length")
        samples = pcm16_to_float(pcm)
        c0 = self._clock.heard(samples.size, self._now)
        self._remember(c0, samples)
        faulted = self._media_faults()
        if faulted:
            return faulted
        step = self._behaviour.push(samples)
        reply = self._behaviour.scheduled_reply
        if reply is not None and reply is not self._seen:
            self._seen = at, audio = reply  # resampled now, before it is due to play
            self._pending = (at, audio, resample(audio, self._rate, OUTPUT_RATE))
        actions: list[Action] = []
        if step.speech_started and self._playing is not None:
            self._playing = None
            self._behaviour.interrupt()
            ms = self._start_unix_ms + round(1000 * self._clock.received / self._rate)
            actions.append(Send(wire.encode_server(wire.UserInterruption(ms))))
        position = self._clock.position(self._now)
        actions += self._start_reply(c0, position) + self._generate(position) + self._malformed()
        return actions

    def tick(self, now: float) -> list[Action]:
        """What the wall clock has made due since the last message (a reply's start, its
        audio, assistant_end) when the client has stopped sending."""
        self._now = now
        if self._done or self._behaviour is None:
            return []
        position = self._clock.position(now)
        return self._start_reply(position, position) + self._generate(position)

    def wake_at(self) -> float | None:
        """When ``tick`` next has something to do if no input arrives; None for never."""
        if self._done:
            return None
        p = self._playing
        if p is None:
            return None if self._pending is None else self._clock.when(self._pending[0] + 1)
        return self._clock.when(p.reply.next_due())

    def _start_reply(self, c0: int, position: int) -> list[Action]:
        if self._pending is None or self._playing is not None or self._pending[0] >= position:
            return []
        assert self._behaviour is not None
        at, audio, out = self._pending
        self._pending = None
        self._replies += 1
        pcm = lead_in(at, c0, self._rate, OUTPUT_RATE) + float_to_pcm16(out)
        reply = PacedReply.split(pcm, OUTPUT_RATE, start=at, end=at + audio.size, rate=self._rate)
        reply_id = f"{self._chat_id}-reply-{self._replies}"
        self._playing = _Playback(reply_id, reply, prosody_scores(audio))
        said = f"{self._behaviour.name} reply, {audio.size / self._rate:.2f} s"
        messages: list[wire.ServerMessage] = [
            self._user_message(),
            wire.AssistantMessage(said, reply_id, self._playing.scores),
        ]
        return [Send(wire.encode_server(m)) for m in messages]

    def _user_message(self) -> wire.UserMessage:
        assert self._behaviour is not None
        if not self._behaviour.turns:  # a reply while the user talks (barge-in): no turn yet
            return wire.UserMessage("", 0, 0, scores=None)
        turn = self._behaviour.turns[-1]
        x = self._recent_audio(turn.onset, turn.end)
        begin, end = (round(1000 * s / self._rate) for s in (turn.onset, turn.end))
        return wire.UserMessage("", begin, end, scores=prosody_scores(x))

    def _remember(self, c0: int, samples: NDArray[np.float32]) -> None:
        self._recent.append((c0, samples))
        horizon = self._clock.received - round(RECENT_S * self._rate)
        while self._recent and self._recent[0][0] + self._recent[0][1].size <= horizon:
            self._recent.pop(0)

    def _recent_audio(self, lo: int, hi: int) -> NDArray[np.float32]:
        parts = [x[max(lo - c, 0) : hi - c] for c, x in self._recent if c < hi and c + x.size > lo]
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)

    def _generate(self, position: int) -> list[Action]:
        p = self._playing
        if p is None:
            return []
        r = p.reply
        if r.generated:  # all sent: playing out on the client until its end
            if position >= r.end:
                self._playing = None
            return []
        actions: list[Action] = [
            Send(
                wire.encode_server(wire.AudioOutput(p.id, i, encode_wav(r.chunks[i], OUTPUT_RATE)))
            )
            for i in r.take_due(position)
        ]
        if r.generated:
            ends: list[wire.ServerMessage] = [
                wire.AssistantProsody(p.id, p.scores),
                wire.AssistantEnd(),
            ]
            actions += [Send(wire.encode_server(m)) for m in ends]
        return actions

    def _media_faults(self) -> list[Action]:
        actions = self._injected.stop(self._clock.received / self._rate)
        self._done |= self._injected.finished
        return actions

    def _malformed(self) -> list[Action]:
        actions = self._injected.malformed(
            self._clock.received / self._rate, lambda: '{"type": "audio_output", "data"'
        )  # truncated JSON
        self._done |= self._injected.finished
        return actions

    def _error(self, code: str, slug: str, message: str) -> Action:
        return Send(wire.encode_server(wire.Error(code, slug, message)))
