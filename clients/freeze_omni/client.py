"""FreezeOmniClient: the asyncio shell around ClientProtocol. It moves frames and stamps arrivals.

It speaks Engine.IO 4 over the WebSocket transport directly (as python-socketio's client does
with ``transports=["websocket"]``), on the same WebSocket shell as every other client, so frames
are stamped when read and a hung server is found by WebSocket pings. The profile's URL is the
server's address (``http://host:port``, ``https://``, ``ws://`` or ``wss://``); the Socket.IO
path defaults to ``/socket.io/``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from numpy.typing import NDArray
from websockets.exceptions import ConnectionClosed

from duplexsim.clients.base import Capabilities, ClientConfig, ClientEvent, WireMessage
from duplexsim.clients.freeze_omni.events import INPUT_RATE, OUTPUT_RATE
from duplexsim.clients.freeze_omni.protocol import ClientProtocol
from duplexsim.clients.transport.wsclient import WebSocketClient, close_text, message_size
from duplexsim.clients.transport.wsconn import WsConnection
from duplexsim.core.errors import ConfigError, ConnectError

__all__ = ["FreezeOmniClient", "socketio_url"]

FRAME_MS = 20
OPTIONS: dict[str, type] = {"prompt": str}  # the system prompt, sent as prompt_text
_SCHEMES = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}


def socketio_url(url: str) -> str:
    """The Engine.IO WebSocket URL for a server address."""
    parts = urlsplit(url)
    scheme = _SCHEMES.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise ConfigError(f"freeze-omni: '{url}' is not an http(s):// or ws(s):// address")
    path = parts.path if parts.path not in ("", "/") else "/socket.io/"
    query = "&".join(q for q in (parts.query, "EIO=4&transport=websocket") if q)
    return urlunsplit((scheme, parts.netloc, path, query, ""))


def _check_options(options: Mapping[str, Any]) -> None:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ConfigError(f"freeze-omni: unknown option(s) {', '.join(unknown)} (known: prompt)")
    for key, value in options.items():
        if not isinstance(value, OPTIONS[key]):
            raise ConfigError(f"freeze-omni: option '{key}' must be {OPTIONS[key].__name__}")


class FreezeOmniClient(WebSocketClient):
    protocol = "freeze-omni"
    instructions_option = "prompt"

    def __init__(self, config: ClientConfig) -> None:
        super().__init__(config)
        _check_options(config.options)
        self._proto = ClientProtocol(config.options.get("prompt"))

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            input_rate=INPUT_RATE,
            output_rate=OUTPUT_RATE,
            frame_ms=FRAME_MS,
            faster_than_realtime=True,  # one segment (hundreds of ms) per input message
            end_of_turn_signal=False,
            server_vad=True,
        )

    def endpoint(self) -> str:
        return socketio_url(self.config.url)

    async def handshake(self, ws: WsConnection) -> None:
        try:
            async with asyncio.timeout(self.config.connect_timeout_s):
                while not self._proto.ready:
                    frame = await ws.recv()
                    self.bytes_received += message_size(frame)
                    for answer in self._proto.handshake(frame):
                        await self.send_message(answer)
        except TimeoutError:
            raise ConnectError(
                f"the conversation did not start within {self.config.connect_timeout_s:g} s"
            ) from None
        except ConnectionClosed as exc:
            raise ConnectError(f"connection closed during the opening: {close_text(exc)}") from None

    async def send_audio(self, samples: NDArray[Any]) -> None:
        await self.send_encoded(self._proto.audio_frame(samples))

    def encode_audio(self, frames: NDArray[Any]) -> list[str]:
        return [self._proto.audio_frame(row) for row in frames]

    async def send_encoded(self, message: WireMessage) -> None:
        for owed in self._proto.take_pending():
            await self.send_message(owed)
        await self.send_message(message)

    def parse(self, message: str | bytes, arrival: float) -> list[ClientEvent]:
        return self._proto.receive(message, arrival)
