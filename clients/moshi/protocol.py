"""The moshi client protocol without I/O: messages in, events or messages out; no sockets, no
clock. ``ClientProtocol`` turns server messages into ``duplexsim.clients.base`` events stamped
with the arrival time it is given, and the client's PCM into audio messages. (The fake server's
side is ``fake``.)

Sources (snapshots): ``kyutai-labs/moshi`` e6a55d2 ``moshi/moshi/server.py`` (Python server),
``rust/moshi-backend/src/stream_both.rs`` and ``rust/moshi-server/src/lm.rs`` (Rust servers);
``NVIDIA/personaplex`` 3428dfd ``moshi/moshi/server.py`` (PersonaPlex).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from numpy.typing import NDArray

from duplexsim.clients.base import AudioOut, ClientEvent, ErrorEvent, Transcript
from duplexsim.clients.moshi import events as wire
from duplexsim.clients.moshi.codec import OggOpusDecoder, OggOpusEncoder
from duplexsim.core.errors import ConfigError, ProtocolError, RemoteError

__all__ = ["CHAT_PATH", "ClientProtocol", "chat_url", "query_params"]

CHAT_PATH = "/api/chat"
_WS_SCHEMES = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}


def query_params(options: Mapping[str, Any], voice: str | None = None) -> dict[str, str]:
    """Options -> query parameters (PersonaPlex: ``text_prompt``, ``voice_prompt``, ``seed``; Rust
    servers: sampling settings). ``voice`` fills ``voice_prompt`` unless the options set it."""
    params: dict[str, str] = {}
    for key, value in options.items():
        if value is None:
            continue
        if isinstance(value, bool):
            params[key] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            params[key] = str(value)
        else:
            raise ConfigError(f"moshi option '{key}' must be a string or number, not {value!r}")
    if voice and "voice_prompt" not in params:
        params["voice_prompt"] = voice
    return params


def chat_url(url: str, params: Mapping[str, str]) -> str:
    """``{url}/api/chat?{params}``; a URL already ending in /api/chat is kept, http(s) -> ws(s)."""
    parts = urlsplit(url)
    scheme = _WS_SCHEMES.get(parts.scheme.lower())
    if scheme is None:
        raise ConfigError(f"moshi URL must be ws://, wss://, http:// or https://, not '{url}'")
    path = parts.path.rstrip("/")
    if not path.endswith(CHAT_PATH):
        path += CHAT_PATH
    query = urlencode([*parse_qsl(parts.query, keep_blank_values=True), *params.items()])
    return urlunsplit((scheme, parts.netloc, path, query, ""))


class ClientProtocol:
    """Handshake first, then the server's stream; the client's PCM in, audio messages out."""

    def __init__(self) -> None:
        self._encoder = OggOpusEncoder()
        self._decoder = OggOpusDecoder()
        self.handshake: wire.Handshake | None = None
        self.metadata: Any = None  # what a Rust server says about itself after the handshake

    def receive_handshake(self, message: str | bytes) -> wire.Handshake:
        """The server's first message; an error message becomes RemoteError."""
        msg = wire.decode(_binary(message))
        if isinstance(msg, wire.Error):
            raise RemoteError(f"server error before the handshake: {msg.message}")
        if not isinstance(msg, wire.Handshake):
            raise ProtocolError(f"expected the handshake (kind 0x00), got '{type(msg).__name__}'")
        self.handshake = msg
        return msg

    def receive(self, message: str | bytes, arrival: float) -> list[ClientEvent]:
        if self.handshake is None:
            raise ProtocolError("message before the handshake")
        if not message:
            return []  # Moshi's own clients skip empty messages
        msg = wire.decode(_binary(message))
        match msg:
            case wire.Audio(ogg=ogg):
                pcm = self._decoder.decode(ogg)
                return [AudioOut(pcm, arrival)] if pcm.size else []
            case wire.Text(text=text) | wire.ColoredText(text=text):
                return [Transcript(text, arrival)] if text else []
            case wire.Error(message=text):
                return [ErrorEvent(RemoteError(f"server error: {text}"), arrival, fatal=True)]
            case wire.Metadata(data=data):
                self.metadata = data
        return []  # control is unused in streaming mode; ping, handshake, image, codes: nothing

    def audio_message(self, samples: NDArray[Any]) -> bytes | None:
        """PCM at 24 kHz -> one audio message with every whole 80 ms frame so far, or None."""
        ogg = self._encoder.encode(samples)
        return wire.encode(wire.Audio(ogg)) if ogg else None


def _binary(message: str | bytes) -> bytes:
    if isinstance(message, str):
        raise ProtocolError(f"text frame {message[:40]!r}: moshi messages are all binary")
    return message
