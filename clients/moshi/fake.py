"""The moshi fake server's protocol without I/O: client messages in, ``Action``s out.

``ServerProtocol`` decodes the client's Ogg/Opus stream, feeds a reference behaviour one 80 ms
frame at a time and answers each frame with one 80 ms output frame (Moshi's pacing: output rate
equals input rate, no input means no output), applying the media-time faults. ``Flavour`` picks
which real server the fake imitates (sources: ``protocol``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from numpy.typing import NDArray

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.faults import Faults, MediaFaults
from duplexsim.clients.fakekit.serveractions import Action, Close, Send, Stall
from duplexsim.clients.moshi import events as wire
from duplexsim.clients.moshi.codec import (
    FRAME,
    RATE,
    FrameBuffer,
    OggOpusDecoder,
    OggOpusEncoder,
    split_pages,
)
from duplexsim.core.errors import ProtocolError

__all__ = [
    "FLAVOURS",
    "PERSONAPLEX_VOICES",
    "Action",
    "Close",
    "Flavour",
    "Send",
    "ServerProtocol",
    "Stall",
]

_NOT_OGG = b"NotOgg: this is not an Ogg page, whatever the kind byte says"  # malformed audio


@dataclass(frozen=True)
class Flavour:
    """Which real server the fake imitates."""

    name: str
    handshake_extra: bytes = b""  # after the kind byte; Python servers send none
    metadata: Mapping[str, Any] | None = None  # Rust: a kind-4 JSON message after the handshake
    packet_samples: int = FRAME  # Rust backend: 960-sample Opus packets, one message each
    header_message: bool = False  # Rust moshi-server: Ogg header pages in a message of their own
    required_params: tuple[str, ...] = ()  # PersonaPlex reads these query parameters, or fails
    voices: frozenset[str] | None = None  # PersonaPlex: voice_prompt files it has (None: any)
    silent_steps: int = 0  # steps answered with nothing (real Moshi: 1, LMGen's max_delay)


PERSONAPLEX_VOICES = frozenset(
    f"{name}.pt"
    for name in [
        *(f"NATF{i}" for i in range(4)),
        *(f"NATM{i}" for i in range(4)),
        *(f"VARF{i}" for i in range(5)),
        *(f"VARM{i}" for i in range(5)),
    ]
)

FLAVOURS: dict[str, Flavour] = {
    "moshi": Flavour("moshi"),
    "rust": Flavour(
        "rust",
        handshake_extra=bytes(8),  # u32 protocol version 0, u32 model version 0
        metadata={"instance_name": "duplexsim-fake", "text_temperature": 0.8, "text_topk": 250},
        packet_samples=960,
        header_message=True,
    ),
    "personaplex": Flavour(
        "personaplex", required_params=("text_prompt", "voice_prompt"), voices=PERSONAPLEX_VOICES
    ),
}


class ServerProtocol:
    """One fake-server connection: handshake, then one output frame per 80 ms input frame."""

    def __init__(
        self,
        behaviour_factory: Callable[[int], Behaviour],
        faults: Faults | None = None,
        *,
        flavour: Flavour | None = None,
        query: Mapping[str, str] | None = None,
        reply_text: tuple[str, ...] = (" Hello", " there."),
    ) -> None:
        self._factory = behaviour_factory
        self._injected = MediaFaults(faults or Faults())
        self.flavour = flavour or FLAVOURS["moshi"]
        self.query = dict(query or {})
        self._reply_text = reply_text
        self._behaviour: Behaviour | None = None
        self._decoder = OggOpusDecoder()
        self._encoder = OggOpusEncoder(frame=self.flavour.packet_samples)
        self._frames = FrameBuffer(FRAME)
        self._pieces: list[str] = []  # text tokens still to send for this reply, one per step
        self._steps = 0  # 80 ms input frames received
        self._sent_header = False
        self._done = False  # closed or stalled: ignore everything

    @property
    def received_s(self) -> float:
        return self._steps * FRAME / RATE

    def open(self) -> list[Action]:
        """After the upgrade: the handshake, or a close where PersonaPlex would fail instead."""
        problem = self._check_query()
        if problem is not None:
            self._done = True
            return [Close(1011, problem)]
        self._behaviour = self._factory(RATE)
        actions: list[Action] = [Send(wire.encode(wire.Handshake(self.flavour.handshake_extra)))]
        if self.flavour.metadata is not None:
            actions.append(Send(wire.encode(wire.Metadata(dict(self.flavour.metadata)))))
        return actions

    def _check_query(self) -> str | None:
        # PersonaPlex reads request.query[...] and fails after the upgrade (KeyError or
        # FileNotFoundError), so the client sees the connection end before any handshake
        for name in self.flavour.required_params:
            if name not in self.query:
                return f"missing query parameter '{name}'"
        voice = self.query.get("voice_prompt")
        voices = self.flavour.voices
        if voices is not None and voice is not None and voice not in voices:
            return f"voice prompt '{voice[:40]}' not found"
        return None

    def receive(self, message: str | bytes) -> list[Action]:
        """One client message. Like the real servers, ignore text frames, empty messages and any
        kind but audio; undecodable audio ends the connection."""
        if self._done or self._behaviour is None:
            return []
        if isinstance(message, str) or not message or message[0] != wire.Kind.AUDIO:
            return []
        try:
            pcm = self._decoder.decode(message[1:])
        except ProtocolError as exc:
            self._done = True
            return [Close(1011, exc.message[:120])]
        actions: list[Action] = []
        for frame in self._frames.push(pcm):
            actions += self._step(self._behaviour, frame)
            if self._done:
                break
        return actions

    def _step(self, behaviour: Behaviour, frame: NDArray[Any]) -> list[Action]:
        self._steps += 1
        fault = self._media_faults()
        if fault:
            return fault
        step = behaviour.push(frame)
        if step.reply_started:
            self._pieces = list(self._reply_text)
        if self._steps <= self.flavour.silent_steps:
            return self._malformed()
        actions = [Send(wire.encode(wire.Audio(ogg))) for ogg in self._encode(step.audio)]
        if self._pieces:  # like Moshi, a step's text token follows its audio
            actions.append(Send(wire.encode(wire.Text(self._pieces.pop(0)))))
        return actions + self._malformed()

    def _encode(self, audio: NDArray[Any]) -> list[bytes]:
        """One step's audio -> the Ogg bytes of each message to send."""
        size = self.flavour.packet_samples
        out = [self._encoder.encode_frame(audio[i : i + size]) for i in range(0, audio.size, size)]
        out = [ogg for ogg in out if ogg]
        if self.flavour.header_message and not self._sent_header and out:
            self._sent_header = True
            pages = split_pages(out[0])
            rest = b"".join(pages[2:])
            out[0:1] = [b"".join(pages[:2]), *([rest] if rest else [])]  # the headers alone
        return out

    def _media_faults(self) -> list[Action]:
        actions = self._injected.stop(self.received_s)
        self._done |= self._injected.finished
        return actions

    def _malformed(self) -> list[Action]:
        actions = self._injected.malformed(
            self.received_s, lambda: wire.encode(wire.Audio(_NOT_OGG))
        )
        self._done |= self._injected.finished
        return actions
