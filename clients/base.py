"""The interface every model client implements, its typed events and declared capabilities.

The session drives a client through four calls (connect, send_audio, events, aclose) and branches
only on ``Capabilities``, never on which protocol it is talking to.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from duplexsim.core.errors import SessionError
from duplexsim.core.redact import redact
from duplexsim.core.retry import ProviderLimit
from duplexsim.core.usage import Usage

__all__ = [
    "AudioOut",
    "Capabilities",
    "ClientConfig",
    "ClientEvent",
    "DuplexClient",
    "EndOfTurn",
    "ErrorEvent",
    "Metering",
    "ProviderEmotion",
    "RateLimits",
    "SpeechStarted",
    "SpeechStopped",
    "Transcript",
    "UsageReport",
    "WireMessage",
]

Clock = Callable[[], float]
WireMessage = str | bytes  # one message as a protocol puts it on the wire


@dataclass(frozen=True)
class Capabilities:
    input_rate: int  # Hz of the PCM the client wants in send_audio
    output_rate: int  # Hz of AudioOut.samples
    frame_ms: int = 20  # preferred send granularity
    faster_than_realtime: bool = False  # output may arrive in bursts ahead of playback
    end_of_turn_signal: bool = False  # emits EndOfTurn when a reply is complete
    server_vad: bool = False  # the server detects the user's turns itself
    manual_commit: bool = False  # needs commit_turn() after the user's turn
    continuous_output: bool = False  # the server streams audio all the time, silence included
    # how late one input frame may reach the model's receiver and still be heard as sent (input
    # fidelity; docs/metrics.md): over TCP a receiver absorbs a retransmission (Linux's 200 ms
    # minimum timeout plus the round trip) and the hosted APIs buffer input whole; a WebRTC
    # jitter buffer plays out against a target of tens of milliseconds
    input_jitter_ms: float = 250.0
    # each input frame is answered by one output frame (``frame_ms`` of audio) as it arrives,
    # and replies are decided on the input's media time, with no wall-clock timer: a reply's
    # onset can then have waited only on the input frame its first frame answers (the latency
    # window's sends, docs/metrics.md). Consulted only where the run knows the server's stalls
    # (a fake it started): what this protocol's fake does, whatever a hosted server does
    answers_each_frame: bool = False


@dataclass(frozen=True)
class Metering:
    """How a provider meters a session, declared for estimates made before a run. Token rates
    are per second of audio, where the provider publishes one; None where it does not (an
    estimate then learns the rate from an earlier run of the model, or says it cannot)."""

    # what usage the provider sends: "per-response" and "per-turn" reports add up,
    # "running-total" ones replace each other, "none": only our own measured seconds
    reports: str = "none"
    input_audio_tokens_per_s: float | None = None
    # the input billed: "context" (the user's speech: server VAD commits only speech) or
    # "stream" (everything sent, the silence after the context included)
    input_basis: str = "context"
    output_audio_tokens_per_s: float | None = None


@dataclass(frozen=True)
class ClientConfig:
    """Everything a client needs to connect. ``api_key`` is never written anywhere."""

    url: str
    model: str | None = None
    voice: str | None = None
    api_key: str | None = field(default=None, repr=False)
    options: Mapping[str, Any] = field(default_factory=dict)
    clock: Clock = time.monotonic  # stamps arrivals; injected so tests and replay control time
    connect_timeout_s: float = 10.0


@dataclass(frozen=True, slots=True)
class AudioOut:
    samples: np.ndarray  # float32 mono at Capabilities.output_rate
    arrival: float  # clock() when the bytes arrived
    offset_s: float | None = None  # where the server says this chunk belongs on the input timeline
    silent: bool = False  # the protocol saw digital silence (all-zero PCM): nothing to check


@dataclass(frozen=True, slots=True)
class Transcript:
    text: str
    arrival: float
    final: bool = False


@dataclass(frozen=True, slots=True)
class SpeechStarted:
    arrival: float


@dataclass(frozen=True, slots=True)
class SpeechStopped:
    arrival: float


@dataclass(frozen=True, slots=True)
class EndOfTurn:
    arrival: float


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    error: SessionError
    arrival: float
    fatal: bool = True  # a fatal error ends the session; others are recorded and streaming goes on


@dataclass(frozen=True, slots=True)
class ProviderEmotion:
    """The provider's own emotion estimate (e.g. Hume's prosody scores), kept beside ours."""

    scores: Mapping[str, float]  # the provider's names and scale, as it sent them
    arrival: float
    role: str = "assistant"  # whose speech: "assistant" (the reply) or "user"
    source: str = ""  # which of the provider's messages carried it
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class UsageReport:
    """What the provider says a response, a turn or the session so far used."""

    usage: Usage
    arrival: float
    cumulative: bool = False  # a running total for the session (replaces the last), not a delta
    source: str = ""  # the message that carried it


@dataclass(frozen=True, slots=True)
class RateLimits:
    """The provider's rate limits as it just said them (an event, or the handshake's headers)."""

    limits: tuple[ProviderLimit, ...]
    arrival: float
    source: str = ""


ClientEvent = (
    AudioOut
    | Transcript
    | SpeechStarted
    | SpeechStopped
    | EndOfTurn
    | ErrorEvent
    | ProviderEmotion
    | UsageReport
    | RateLimits
)


class DuplexClient(ABC):
    """One connection to one model for one session."""

    protocol: ClassVar[str]
    pollable: ClassVar[bool] = False  # offers poll_events (else events() only)
    metering: ClassVar[Metering] = Metering()  # how its provider meters a session
    # the option that holds the model's system prompt or instructions (None: it takes none), where
    # a session gives them (a partner model's, ``run --partner``)
    instructions_option: ClassVar[str | None] = None

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.clock: Clock = config.clock  # stamps arrivals; the session hands over its own
        self.bytes_sent = 0
        self.bytes_received = 0

    def use_clock(self, clock: Clock) -> None:
        """Stamp arrivals with ``clock`` (the session's, before ``connect``): one clock for the
        sends, the arrivals and the timeline."""
        self.clock = clock

    @property
    @abstractmethod
    def capabilities(self) -> Capabilities: ...

    @abstractmethod
    async def connect(self) -> None:
        """Open the connection and finish the handshake; raises SessionError subclasses."""

    @abstractmethod
    async def send_audio(self, samples: np.ndarray) -> None:
        """Send float32 mono samples at ``capabilities.input_rate``."""

    def encode_audio(self, frames: np.ndarray) -> Sequence[WireMessage] | None:
        """Each row of ``frames`` (float32, ``capabilities.input_rate``) as the message
        ``send_audio`` would make of it, for ``send_encoded``: fixed input is encoded before
        streaming starts, so the per-frame path only writes. None where a frame's encoding depends
        on the frames before it (Opus) or audio does not go out as messages (WebRTC)."""
        return None

    async def send_encoded(self, message: WireMessage) -> None:
        """Send one message from ``encode_audio`` as ``send_audio`` would send its frame."""
        raise NotImplementedError(f"{type(self).__name__} does not pre-encode audio")

    @abstractmethod
    def events(self) -> AsyncIterator[ClientEvent]:
        """Events as they arrive; ends when the connection closes."""

    def poll_events(self) -> tuple[list[ClientEvent], bool]:
        """The events that arrived since the last call, without waiting, and whether the stream
        has ended (where ``pollable``): a session drains them once per frame instead of waking a
        task for every message. Arrival times are those of the bytes, as in ``events()``."""
        raise NotImplementedError(f"{type(self).__name__} only streams its events")

    def watch_liveness(self, stall_timeout_s: float) -> None:  # noqa: B027 - optional hook
        """Called before ``connect``: where the transport can probe the server (WebSocket
        pings), a server that answers nothing for ``stall_timeout_s`` ends the stream with a
        "stalled" error. A hung server that sends no audio otherwise reads as a model that
        chose not to reply."""

    def timeline_started(self, t0: float) -> None:  # noqa: B027 - optional hook
        """The session's T0 (clock value when frame 0 is due); replay aligns its events to it."""

    async def commit_turn(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Tell the server the user's turn is over (only where ``manual_commit``)."""

    @abstractmethod
    async def aclose(self) -> None: ...

    def describe(self) -> dict[str, Any]:
        """Settings safe to record (no secrets)."""
        return {
            "protocol": self.protocol,
            "url": redact(self.config.url, (self.config.api_key,)),
            "model": self.config.model,
            "voice": self.config.voice,
            "options": dict(self.config.options),
        }
