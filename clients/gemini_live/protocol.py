"""The Gemini Live client protocol without I/O: messages in, events or messages out; no sockets,
no clock. (The fake server's side is ``fake``.)

``ClientProtocol`` builds the client's messages and turns server messages into
``duplexsim.clients.base`` events stamped with the arrival time it is given and nothing else
(``errors`` maps closes and refusals). Model audio arrives faster than real time: the session
places it on its timeline (``OutputTrack``) and ends the turn once what was placed has played.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numpy.typing import NDArray

from duplexsim.clients.base import (
    AudioOut,
    ClientEvent,
    EndOfTurn,
    ErrorEvent,
    SpeechStarted,
    Transcript,
    UsageReport,
)
from duplexsim.clients.gemini_live import events as wire
from duplexsim.clients.gemini_live.errors import api_error, close_error, close_text
from duplexsim.core.audio import float_to_pcm16, pcm16_to_float
from duplexsim.core.errors import ConfigError, Disconnected, ProtocolError, SessionError
from duplexsim.core.redact import redact

__all__ = [
    "DEFAULT_MODEL",
    "INPUT_RATE",
    "OUTPUT_RATE",
    "PATHS",
    "ClientProtocol",
    "setup_from_options",
]

INPUT_RATE = wire.INPUT_RATE
OUTPUT_RATE = wire.OUTPUT_RATE
DEFAULT_MODEL = "gemini-3.8-live"
_SERVICE = "google.ai.generativelanguage.{}.GenerativeService.{}"
# every API version the SDK and the docs use (python-genai's default is its client's
# api_version); the Constrained method is the one ephemeral tokens open
PATHS = tuple(
    f"/ws/{_SERVICE.format(version, method)}"
    for method in ("BidiGenerateContent", "BidiGenerateContentConstrained")
    for version in ("v1beta", "v1", "v1alpha")
)

# ClientConfig.options this protocol understands, and their types
OPTIONS: dict[str, type] = {
    "automatic_activity_detection": bool,  # false: the client brackets turns (manual_commit)
    "activity_handling": str,  # START_OF_ACTIVITY_INTERRUPTS (default) | NO_INTERRUPTION
    "start_sensitivity": str,  # START_SENSITIVITY_HIGH | START_SENSITIVITY_LOW
    "end_sensitivity": str,  # END_SENSITIVITY_HIGH | END_SENSITIVITY_LOW
    "prefix_padding_ms": int,
    "silence_duration_ms": int,
    "output_transcription": bool,  # default true: transcripts of the model's speech
    "system_instruction": str,
    "language_code": str,
}


def setup_from_options(
    model: str | None, voice: str | None, options: Mapping[str, Any]
) -> wire.Setup:
    """The ``setup`` message for a profile's model, voice and options; ConfigError if bad."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ConfigError(
            f"gemini-live: unknown option(s) {', '.join(unknown)} (known: {', '.join(OPTIONS)})"
        )
    for key, value in options.items():
        want = OPTIONS[key]
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise ConfigError(f"gemini-live: option '{key}' must be {want.__name__}")
    name = model or DEFAULT_MODEL
    return wire.Setup(
        model=name if name.startswith("models/") else f"models/{name}",
        voice=voice,
        automatic_activity_detection=options.get("automatic_activity_detection", True),
        activity_handling=options.get("activity_handling"),
        start_sensitivity=options.get("start_sensitivity"),
        end_sensitivity=options.get("end_sensitivity"),
        prefix_padding_ms=options.get("prefix_padding_ms"),
        silence_duration_ms=options.get("silence_duration_ms"),
        output_transcription=options.get("output_transcription", True),
        system_instruction=options.get("system_instruction"),
        language_code=options.get("language_code"),
    )


class ClientProtocol:
    """One client connection's protocol state. ``secret`` (the API key) is blanked out of every
    text that came from the server before it goes into an error."""

    def __init__(self, setup: wire.Setup, secret: str | None = None) -> None:
        self.setup = setup
        self.session_id: str | None = None
        self.ready = False
        self.went_away: wire.GoAway | None = None
        self._secret = secret
        self._activity = "before"  # VAD off: "before" the user's turn, "open", then "closed"

    @property
    def manual(self) -> bool:
        """Activity detection is off: the client sends activityStart/activityEnd itself."""
        return not self.setup.automatic_activity_detection

    def setup_message(self) -> str:
        return wire.encode_client(self.setup)

    def receive_setup_reply(self, data: str | bytes) -> None:
        """The server's first message must be setupComplete."""
        parts = wire.decode_server(data)
        for part in parts:
            if isinstance(part, wire.ApiError):
                raise self._api_error(part)
        if not parts or not isinstance(parts[0], wire.SetupComplete):
            got = type(parts[0]).__name__ if parts else "a message with nothing known in it"
            raise ProtocolError(f"expected setupComplete, got {got}")
        self.session_id = parts[0].session_id
        self.ready = True

    def audio_messages(self, samples: NDArray[Any]) -> list[str]:
        """16 kHz float samples -> realtimeInput.audio; with detection off, the first audio
        opens the user's turn with activityStart. Audio after the turn's end (the silence the
        session streams while the model replies) opens no new turn: that would be a barge-in."""
        return [*self.audio_prefix(), self.audio_frame(samples)]

    def audio_frame(self, samples: NDArray[Any]) -> str:
        """The realtimeInput.audio message of one frame (no state: can be made ahead of time)."""
        return wire.encode_client(wire.AudioIn(float_to_pcm16(samples), INPUT_RATE))

    def audio_prefix(self) -> list[str]:
        """What must go before the next audio message: activityStart before the first, when
        detection is off."""
        if self.manual and self._activity == "before":
            self._activity = "open"
            return [wire.encode_client(wire.ActivityStart())]
        return []

    def commit_messages(self) -> list[str]:
        """The end of the user's turn: activityEnd, when detection is off and the turn is open."""
        if not (self.manual and self._activity == "open"):
            return []
        self._activity = "closed"
        return [wire.encode_client(wire.ActivityEnd())]

    def receive(self, data: str | bytes, arrival: float) -> list[ClientEvent]:
        if not self.ready:
            raise ProtocolError("server message before setupComplete")
        events: list[ClientEvent] = []
        for part in wire.decode_server(data):
            events += self._event(part, arrival)
        return events

    def _event(self, part: wire.ServerPart, arrival: float) -> list[ClientEvent]:
        match part:
            case wire.ModelAudio(pcm=pcm, rate=rate):
                if rate != OUTPUT_RATE:
                    raise ProtocolError(f"model audio at {rate} Hz; expected {OUTPUT_RATE}")
                return [AudioOut(pcm16_to_float(pcm), arrival)]
            case wire.OutputTranscription(text=text, finished=finished):
                return [Transcript(text, arrival, finished)] if text or finished else []
            case wire.Interrupted():
                # the server heard the user start talking over the reply (barge-in)
                return [SpeechStarted(arrival)]
            case wire.TurnComplete():
                # Not generationComplete: that only says generation is done. turnComplete ends
                # the turn (the server may hold it until real-time playback is over); the
                # session ends the reply no earlier than the end of what it placed
                return [EndOfTurn(arrival)]
            case wire.GoAway(time_left=left):
                self.went_away = part
                soon = Disconnected(f"server sent goAway (time left {left or 'unknown'})")
                return [ErrorEvent(soon, arrival, fatal=False)]
            case wire.ApiError():
                return [ErrorEvent(self._api_error(part), arrival, fatal=True)]
            case wire.UsageMetadata():
                return [UsageReport(part.usage, arrival, source="usageMetadata")]
            case wire.SetupComplete():
                raise ProtocolError("a second setupComplete")
        return []  # generationComplete, model text, input transcription: nothing to report

    def close_error(self, code: int | None, reason: str) -> SessionError | None:
        """The error for the server closing the connection; None for a plain normal close."""
        text = self._redact(reason)
        if self.went_away is not None:
            return Disconnected(
                f"server closed the connection after goAway: {close_text(code, text)}"
            )
        return close_error(code, text, during_setup=not self.ready)

    def _api_error(self, err: wire.ApiError) -> SessionError:
        return api_error(err.code, err.status, self._redact(err.message))

    def _redact(self, text: str) -> str:
        return redact(text, (self._secret,))
