"""The EVI client protocol without I/O: frames in, events out; no sockets, no clock.

The opening: the server's ``chat_metadata``, then our ``session_settings`` naming the raw audio
format; audio then streams as ``audio_input``. Replies come as 48 kHz WAV chunks faster than real
time, closed by ``assistant_end``. Hume's prosody scores (the 48 emotions of its expression
model) on ``user_message``, ``assistant_message`` and ``assistant_prosody`` become
ProviderEmotion events: the provider's own estimate, recorded beside duplexsim's scorer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.base import (
    AudioOut,
    ClientEvent,
    EndOfTurn,
    ErrorEvent,
    ProviderEmotion,
    SpeechStarted,
    SpeechStopped,
    Transcript,
)
from duplexsim.clients.hume_evi import events as wire
from duplexsim.clients.hume_evi.wav import parse_wav
from duplexsim.core.audio import float_to_pcm16, pcm16_to_float, resample
from duplexsim.core.errors import ProtocolError, RateLimited, RemoteError, SessionError
from duplexsim.core.redact import redact

__all__ = ["OUTPUT_RATE", "ClientProtocol", "evi_error"]

OUTPUT_RATE = 48000  # "The returned audio format is WAV and the sample rate is 48kHz" (SDK)
_LIMIT_WORDS = ("rate limit", "too many", "concurrent", "quota")
_AUTH_WORDS = ("api key", "api_key", "unauthori", "credential", "access token", "forbidden")
_RETRY_WORDS = ("internal", "unavailable", "timeout", "timed out", "overloaded")


def evi_error(err: wire.Error, secret: str | None = None) -> SessionError:
    """An ``error`` message as an error. Hume does not publish which codes mean what, so the
    kind is read from the slug and message."""
    message = redact(err.message, (secret,))
    text = f"EVI error {err.code} ({err.slug}): {message}"
    said = f"{err.slug} {message}".lower().replace("_", " ")
    if any(w in said for w in _LIMIT_WORDS):
        return RateLimited(text)
    if any(w in said for w in _AUTH_WORDS):
        return RemoteError(f"{text} (check the API key)", retryable=False, reason="auth")
    return RemoteError(text, retryable=any(w in said for w in _RETRY_WORDS))


class ClientProtocol:
    """``secret`` (the API key) is blanked out of every server text that goes into an error."""

    def __init__(self, settings: wire.SessionSettings, secret: str | None = None) -> None:
        self.settings = settings
        self.metadata: wire.ChatMetadata | None = None
        self._secret = secret

    @property
    def ready(self) -> bool:
        return self.metadata is not None

    def receive_opening(self, frame: str | bytes) -> list[str]:
        """The server's first message must be chat_metadata; the messages that answer it."""
        msg = wire.decode_server(frame)
        if isinstance(msg, wire.Error):
            raise evi_error(msg, self._secret)
        if not isinstance(msg, wire.ChatMetadata):
            raise ProtocolError(f"expected chat_metadata, got {type(msg).__name__}")
        self.metadata = msg
        return [wire.encode_client(self.settings)]

    def audio_frame(self, samples: NDArray[Any]) -> str:
        """The audio_input message of one frame (no state: can be made ahead of time)."""
        return wire.encode_client(wire.AudioInput(float_to_pcm16(samples)))

    def receive(self, frame: str | bytes, arrival: float) -> list[ClientEvent]:
        if not self.ready:
            raise ProtocolError("server message before chat_metadata")
        msg = wire.decode_server(frame)
        match msg:
            case wire.AudioOutput(wav=wav):
                return [AudioOut(_samples(wav), arrival)]
            case wire.AssistantEnd():
                return [EndOfTurn(arrival)]
            case wire.UserInterruption():
                return [SpeechStarted(arrival)]  # the user talked over the reply
            case wire.UserMessage(interim=False):
                # the server's VAD ended the user's turn; its scores are of the user's speech
                return [
                    SpeechStopped(arrival),
                    *_emotion(msg.scores, arrival, "user", "user_message"),
                ]
            case wire.AssistantMessage():
                said = [Transcript(msg.content, arrival, True)] if msg.content else []
                return said + _emotion(
                    msg.scores, arrival, "assistant", "assistant_message", msg.id
                )
            case wire.AssistantProsody():
                return _emotion(msg.scores, arrival, "assistant", "assistant_prosody", msg.id)
            case wire.Error():
                return [ErrorEvent(evi_error(msg, self._secret), arrival, fatal=True)]
        return []  # interim user messages, metadata, tool calls, the echoed settings


def _emotion(
    scores: wire.Scores | None,
    arrival: float,
    role: str,
    source: str,
    message_id: str | None = None,
) -> list[ClientEvent]:
    if not scores:
        return []
    return [ProviderEmotion(scores, arrival, role, source, message_id)]


def _samples(wav: bytes) -> NDArray[np.float32]:
    pcm, rate, channels = parse_wav(wav)
    x = pcm16_to_float(pcm)
    if channels == 2:
        x = x.reshape(-1, 2).mean(axis=1, dtype=np.float32)
    return x if rate == OUTPUT_RATE else resample(x, rate, OUTPUT_RATE)
