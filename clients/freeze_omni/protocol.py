"""The Freeze-Omni client protocol without I/O: frames in, events and frames out; no clock.

The opening: the server's Engine.IO ``open``, our Socket.IO ``connect`` and its answer, the system
prompt if the profile sets one (``prompt_text`` until ``prompt_success``), then
``recording-started``, which the server answers with ``stop_tts`` once it has reset the
conversation: from then on audio flows. The server pings (Engine.IO ``2``); the pong goes out
before the next audio frame, within one frame.

Freeze-Omni has no end-of-reply signal and its own VAD decides turns. Its output is paced by the
input: each ``audio`` message from the client lets the server send at most one decoded segment,
which is longer than a frame, so a reply arrives faster than real time. ``stop_tts`` means the
model stopped talking because it heard a new user turn (it also comes at the start, before any
reply); once reply audio has come it is reported as SpeechStarted.
"""

from __future__ import annotations

from typing import Any

from numpy.typing import NDArray

from duplexsim.clients.base import AudioOut, ClientEvent, ErrorEvent, SpeechStarted
from duplexsim.clients.freeze_omni import events as wire
from duplexsim.clients.freeze_omni import sio
from duplexsim.core.audio import float_to_pcm16, pcm16_to_float
from duplexsim.core.errors import (
    ConnectError,
    Disconnected,
    ProtocolError,
    RateLimited,
    SessionError,
)

__all__ = ["ClientProtocol"]

TOO_MANY = "server is serving its maximum number of users (too_many_users)"


class ClientProtocol:
    def __init__(self, prompt: str | None = None) -> None:
        self._prompt = prompt
        self._reader = sio.PacketReader()
        self._stage = "open"  # open -> connect -> prompt -> start -> ready
        self._pongs: list[str] = []
        self._heard = False  # reply audio came since the last stop_tts
        self.sid: str | None = None
        self.ping_interval_s: float | None = None

    @property
    def ready(self) -> bool:
        return self._stage == "ready"

    def handshake(self, frame: str | bytes) -> list[str]:
        """One frame of the opening; the frames to send in answer. Raises SessionError when
        the server refuses."""
        packet = self._reader.feed(frame)
        match self._stage, packet:
            case _, None:
                return []
            case _, sio.Ping():
                return [_frame(sio.Pong())]
            case "open", sio.Open(sid=sid, ping_interval_ms=interval):
                self.sid, self.ping_interval_s = sid, interval / 1000
                self._stage = "connect"
                return [_frame(sio.Connect())]
            case "connect", sio.Connect():
                return self._after_connect()
            case "connect", sio.ConnectError(message=message):
                raise ConnectError(f"server refused the Socket.IO connection: {message}")
            case _, sio.Event() as event:
                return self._opening_event(wire.server_message(event))
            case _, sio.Disconnect() | sio.Close():
                raise ConnectError("server ended the connection during the opening")
        raise ProtocolError(f"unexpected {type(packet).__name__} packet during the opening")

    def _after_connect(self) -> list[str]:
        if self._prompt is not None:
            self._stage = "prompt"
            return [wire.encode_client(wire.PromptText(self._prompt))]
        self._stage = "start"
        return [wire.encode_client(wire.RecordingStarted())]

    def _opening_event(self, msg: wire.ServerMessage) -> list[str]:
        match self._stage, msg:
            case _, wire.TooManyUsers():
                raise RateLimited(TOO_MANY)
            case "prompt", wire.PromptSuccess():
                self._stage = "start"
                return [wire.encode_client(wire.RecordingStarted())]
            case "start", wire.StopTts():
                self._stage = "ready"
        return []  # anything else before the conversation starts is not ours

    def audio_frame(self, samples: NDArray[Any]) -> str:
        """The ``audio`` event of one 16 kHz frame (no state: can be made ahead of time)."""
        return wire.audio_frame(float_to_pcm16(samples))

    def take_pending(self) -> list[str]:
        """Frames owed to the server (pongs), to go out before the next audio."""
        pongs, self._pongs = self._pongs, []
        return pongs

    def receive(self, frame: str | bytes, arrival: float) -> list[ClientEvent]:
        if not self.ready:
            raise ProtocolError("server frame before the conversation started")
        packet = self._reader.feed(frame)
        match packet:
            case None | sio.Pong():
                return []
            case sio.Ping():
                self._pongs.append(_frame(sio.Pong()))
                return []
            case sio.Event() as event:
                return self._event(wire.server_message(event), arrival)
            case sio.Disconnect() | sio.Close():
                gone = Disconnected("server ended the Socket.IO session")
                return [ErrorEvent(gone, arrival, fatal=True)]
        raise ProtocolError(f"unexpected {type(packet).__name__} packet mid-conversation")

    def _event(self, msg: wire.ServerMessage, arrival: float) -> list[ClientEvent]:
        match msg:
            case wire.ModelAudio(pcm=pcm):
                self._heard = True
                return [AudioOut(pcm16_to_float(pcm), arrival)]
            case wire.StopTts():
                heard, self._heard = self._heard, False
                return [SpeechStarted(arrival)] if heard else []
            case wire.TooManyUsers():
                return [ErrorEvent(RateLimited(TOO_MANY), arrival, fatal=True)]
            case wire.OutTime():
                error: SessionError = Disconnected("server timed the session out (out_time)")
                return [ErrorEvent(error, arrival, fatal=True)]
        return []  # prompt_success, events of no use to a listener


def _frame(packet: sio.Packet) -> str:
    (frame,) = sio.encode(packet)
    assert isinstance(frame, str)
    return frame
