"""The pcm-ws client protocol without I/O: server frames in, ``duplexsim.clients.base`` events
out, stamped with the arrival time it is given; no sockets, no clock. (The fake server's side is
``fake``.)"""

from __future__ import annotations

from typing import Any

from numpy.typing import NDArray

from duplexsim.clients.base import (
    AudioOut,
    ClientEvent,
    EndOfTurn,
    ErrorEvent,
    SpeechStarted,
    SpeechStopped,
    Transcript,
)
from duplexsim.clients.pcm_ws import events as wire
from duplexsim.core.audio import DigitalSilence
from duplexsim.core.errors import ProtocolError, RemoteError

__all__ = ["ClientProtocol"]


class ClientProtocol:
    def __init__(self, sample_rate: int, frame_ms: int = 20) -> None:
        self.sample_rate = sample_rate
        self.frame_ms = frame_ms
        self.session_id: str | None = None
        self._zeros = DigitalSilence()

    def hello_message(self) -> str:
        return wire.encode(wire.Hello(sample_rate=self.sample_rate, frame_ms=self.frame_ms))

    def receive_hello_ack(self, text: str) -> wire.HelloAck:
        """The server's first message; an error message becomes RemoteError."""
        msg = wire.decode(text)
        if isinstance(msg, wire.Error):
            raise _remote_error(msg)
        if not isinstance(msg, wire.HelloAck):
            raise ProtocolError(f"expected 'hello_ack', got '{type(msg).__name__}'")
        if msg.sample_rate != self.sample_rate:
            raise ProtocolError(f"server acked {msg.sample_rate} Hz, we asked {self.sample_rate}")
        self.session_id = msg.session_id
        return msg

    def receive_text(self, text: str, arrival: float) -> list[ClientEvent]:
        msg = wire.decode(text)
        match msg:
            case wire.SpeechStarted():
                return [SpeechStarted(arrival)]
            case wire.SpeechStopped():
                return [SpeechStopped(arrival)]
            case wire.EndOfTurn():
                return [EndOfTurn(arrival)]
            case wire.Transcript(text=said, final=final):
                return [Transcript(said, arrival, final)]
            case wire.Error():
                return [ErrorEvent(_remote_error(msg), arrival, fatal=True)]
            case wire.ReplyStarted():
                return []  # the reply's onset is measured from its audio, not announced
        raise ProtocolError(f"unexpected '{type(msg).__name__}' message after the handshake")

    def receive_binary(self, data: bytes, arrival: float) -> list[ClientEvent]:
        if self.session_id is None:
            raise ProtocolError("audio before 'hello_ack'")
        silence = self._zeros.decoded(data)  # most of a continuous stream
        if silence is not None:
            return [AudioOut(silence, arrival, silent=True)]
        return [AudioOut(wire.decode_audio(data), arrival)]

    def audio_message(self, samples: NDArray[Any]) -> bytes:
        return wire.encode_audio(samples)

    def audio_messages(self, frames: NDArray[Any]) -> list[bytes]:
        """``audio_message`` of each row of ``frames``."""
        return wire.encode_audio_frames(frames)


def _remote_error(msg: wire.Error) -> RemoteError:
    return RemoteError(f"server error {msg.code}: {msg.message}", retryable=msg.retryable)
