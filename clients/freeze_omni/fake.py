"""The Freeze-Omni fake server's protocol without I/O: client frames in, ``Action``s out.

It answers as the demo server (``bin/server.py``) does: Engine.IO ``open`` first, the Socket.IO
connect, ``too_many_users`` when the server is full (then any event disconnects), ``stop_tts``
twice for ``recording-started``, ``prompt_success`` for ``prompt_text``. Each ``audio`` message
lets at most one reply segment out, as the real server pops one decoded segment per message, so
a reply arrives faster than real time but only while the client keeps sending.

Time is media time (16 kHz input samples received). After a chunk covering [c0, c1) arrives, the
client is at c0 on its timeline, so a reply starting at s in [c0, c1) goes out now, led by s - c0
of silence: its first sample lands at exactly s. User speech during a reply stops it: the rest is
dropped and ``stop_tts`` sent (the real server stops when its model decides to take the new turn,
a little later). Engine.IO pings go out every ``ping_interval_s`` of media; a ping unanswered for
``ping_timeout_s`` closes the connection, as Engine.IO does.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.faults import Faults, MediaFaults
from duplexsim.clients.fakekit.serveractions import Action, Close, Send
from duplexsim.clients.freeze_omni import events as wire
from duplexsim.clients.freeze_omni import sio
from duplexsim.core.audio import float_to_pcm16, pcm16_to_float, resample
from duplexsim.core.errors import ProtocolError

__all__ = ["PATH", "ServerProtocol"]

PATH = "/socket.io/"
RATE = wire.INPUT_RATE
FIRST_SEGMENT_S = 0.2  # the real decoder's first package is shorter than the rest
SEGMENT_S = 0.4


@dataclass
class _Playback:
    segments: list[bytes]  # 24 kHz PCM16
    sent: int = 0


class ServerProtocol:
    def __init__(
        self,
        behaviour_factory: Callable[[int], Behaviour],
        faults: Faults | None = None,
        *,
        sid: str = "freeze-omni-1",
        full: bool = False,
        ping_interval_s: float = 25.0,
        ping_timeout_s: float = 20.0,
    ) -> None:
        self._factory = behaviour_factory
        self._injected = MediaFaults(faults or Faults())
        self._sid = sid
        self._full = full
        self._ping_interval = round(ping_interval_s * RATE)
        self._ping_timeout = round(ping_timeout_s * RATE)
        self._reader = sio.PacketReader()
        self._stage = "open"  # open (waiting for connect) -> connected
        self._behaviour: Behaviour | None = None  # set by recording-started
        self._received = 0
        self._next_ping = self._ping_interval
        self._ping_sent_at: int | None = None
        self._seen: object = None
        self._pending: tuple[int, bytes] | None = None  # reply start, its 24 kHz PCM
        self._playing: _Playback | None = None
        self._done = False

    def open(self, path: str) -> list[Action]:
        """The Engine.IO open packet, or a close for a request no Engine.IO 4 server takes."""
        url = urlsplit(path)
        query = parse_qs(url.query)
        if url.path != PATH or query.get("transport") != ["websocket"]:
            return self._end(1008, "Transport unknown or bad path")
        if query.get("EIO") != [sio.ENGINE_IO_VERSION]:
            return self._end(1008, "Unsupported Engine.IO protocol version")
        interval, timeout = (
            round(1000 * x / RATE) for x in (self._ping_interval, self._ping_timeout)
        )
        return self._send(sio.Open(f"eio-{self._sid}", interval, timeout))

    def receive(self, frame: str | bytes) -> list[Action]:
        if self._done:
            return []
        try:
            packet = self._reader.feed(frame)
            return self._packet(packet) if packet is not None else []
        except ProtocolError as exc:
            return self._end(1002, exc.message[:100])

    def _packet(self, packet: sio.Packet) -> list[Action]:
        match self._stage, packet:
            case _, sio.Pong():
                self._ping_sent_at = None
                return []
            case _, sio.Close() | sio.Disconnect():
                return self._end(1000, "")
            case "open", sio.Connect():
                self._stage = "connected"
                actions = self._send(sio.Connect({"sid": self._sid}))
                if self._full:  # Flask-SocketIO accepts the socket, then says it is full
                    actions += self._send(sio.Event("too_many_users"))
                return actions
            case "connected", sio.Event() as event:
                return self._event(wire.client_message(event))
        raise ProtocolError(f"unexpected {type(packet).__name__} packet")

    def _event(self, msg: wire.ClientMessage | None) -> list[Action]:
        if msg is None:
            return []
        if self._full:  # the server's handlers disconnect a user it does not serve
            return self._send(sio.Disconnect()) + self._end(1000, "")
        match msg:
            case wire.RecordingStarted():
                self._reset()
                stop = self._send(sio.Event("stop_tts"))
                return stop + stop
            case wire.RecordingStopped():
                self._reset()
                return self._send(sio.Event("stop_tts"))
            case wire.PromptText():
                return self._send(sio.Event("prompt_success"))
            case wire.AudioIn(pcm=pcm):
                return self._audio(pcm16_to_float(pcm))
        return []

    def _reset(self) -> None:
        self._behaviour = self._factory(RATE)
        self._pending = self._playing = None
        self._seen = None

    def _audio(self, samples: NDArray[np.float32]) -> list[Action]:
        if self._behaviour is None:
            return []  # the demo server drops audio until recording-started
        c0 = self._received
        self._received += samples.size
        faulted = self._media_faults()
        if faulted:
            return faulted
        step = self._behaviour.push(samples)
        reply = self._behaviour.scheduled_reply
        if reply is not None and reply is not self._seen:
            self._seen = reply
            at, audio = reply
            self._pending = (at, float_to_pcm16(resample(audio, RATE, wire.OUTPUT_RATE)))
        actions: list[Action] = []
        if step.speech_started and self._playing is not None:
            self._playing = None  # the user talks over the reply: the model stops
            self._behaviour.interrupt()
            actions += self._send(sio.Event("stop_tts"))
        self._start_reply(c0)
        return actions + self._segment() + self._ping() + self._malformed()

    def _start_reply(self, c0: int) -> None:
        if self._pending is None or self._playing is not None or self._pending[0] >= self._received:
            return
        at, pcm = self._pending
        self._pending = None
        lead = bytes(2 * round(max(at - c0, 0) * wire.OUTPUT_RATE / RATE))
        pcm = lead + pcm
        first, step = (2 * round(s * wire.OUTPUT_RATE) for s in (FIRST_SEGMENT_S, SEGMENT_S))
        cuts = [0, *range(first, len(pcm), step), len(pcm)]
        self._playing = _Playback([pcm[a:b] for a, b in itertools.pairwise(cuts) if b > a])

    def _segment(self) -> list[Action]:
        p = self._playing
        if p is None:
            return []
        actions: list[Action] = [
            Send(m) for m in wire.encode_server(wire.ModelAudio(p.segments[p.sent]))
        ]
        p.sent += 1
        if p.sent == len(p.segments):
            self._playing = None
        return actions

    def _ping(self) -> list[Action]:
        if (
            self._ping_sent_at is not None
            and self._received - self._ping_sent_at > self._ping_timeout
        ):
            return self._end(1000, "ping timeout")
        if self._received < self._next_ping:
            return []
        self._next_ping += self._ping_interval
        if self._ping_sent_at is None:
            self._ping_sent_at = self._received
        return self._send(sio.Ping())

    def _media_faults(self) -> list[Action]:
        actions = self._injected.stop(self._received / RATE)
        self._done |= self._injected.finished
        return actions

    def _malformed(self) -> list[Action]:
        actions = self._injected.malformed(
            self._received / RATE, lambda: '42["stop_tts"'
        )  # truncated JSON
        self._done |= self._injected.finished
        return actions

    def _send(self, packet: sio.Packet) -> list[Action]:
        return [Send(frame) for frame in sio.encode(packet)]

    def _end(self, code: int, reason: str) -> list[Action]:
        self._done = True
        return [Close(code, reason)]
