"""HumeEviClient: the asyncio shell around ClientProtocol. It moves frames and stamps arrivals.

The API key goes in the ``X-Hume-Api-Key`` header, as the ``hume`` SDK sends it, never in the
URL (the API also takes ``api_key=`` in the query; that would put it in every log of the URL).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from numpy.typing import NDArray
from websockets.exceptions import ConnectionClosed

from duplexsim.clients.base import Capabilities, ClientConfig, ClientEvent, Metering, WireMessage
from duplexsim.clients.hume_evi import events as wire
from duplexsim.clients.hume_evi.protocol import OUTPUT_RATE, ClientProtocol
from duplexsim.clients.transport.wsclient import WebSocketClient, close_text, message_size
from duplexsim.clients.transport.wsconn import WsConnection
from duplexsim.core.errors import ConfigError, ConnectError

__all__ = ["DEFAULT_URL", "HumeEviClient"]

DEFAULT_URL = "wss://api.hume.ai/v0/evi/chat"
FRAME_MS = 20  # Hume's advice: 20 ms buffers
# ClientConfig.options this protocol understands, and their types
OPTIONS: dict[str, type] = {
    "sample_rate": int,  # of the raw PCM sent (session_settings.audio.sample_rate)
    "system_prompt": str,
    "config_id": str,  # an EVI configuration (prompt, voice, language model)
    "config_version": int,
}


def _checked(options: Mapping[str, Any]) -> Mapping[str, Any]:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ConfigError(
            f"hume-evi: unknown option(s) {', '.join(unknown)} (known: {', '.join(OPTIONS)})"
        )
    for key, value in options.items():
        want = OPTIONS[key]
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise ConfigError(f"hume-evi: option '{key}' must be {want.__name__}")
    rate = options.get("sample_rate", 16000)
    if not 8000 <= rate <= 48000:
        raise ConfigError(f"hume-evi: sample_rate {rate} is outside 8000-48000")
    return options


class HumeEviClient(WebSocketClient):
    protocol = "hume-evi"
    metering = Metering("none")  # billed by the connected minute; no usage message on the wire
    instructions_option = "system_prompt"

    def __init__(self, config: ClientConfig) -> None:
        super().__init__(config)
        options = _checked(config.options)
        self._rate = int(options.get("sample_rate", 16000))
        settings = wire.SessionSettings(
            self._rate, 1, options.get("system_prompt"), voice_id=config.voice
        )
        self._proto = ClientProtocol(settings, secret=config.api_key)

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            input_rate=self._rate,
            output_rate=OUTPUT_RATE,
            frame_ms=FRAME_MS,
            faster_than_realtime=True,
            end_of_turn_signal=True,  # assistant_end
            server_vad=True,
        )

    def endpoint(self) -> str:
        parts = urlsplit(self.config.url or DEFAULT_URL)
        extra = {
            k: self.config.options[k]
            for k in ("config_id", "config_version")
            if k in self.config.options
        }
        query = "&".join(q for q in (parts.query, urlencode(extra)) if q)
        return urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))

    def auth_headers(self) -> dict[str, str] | None:
        key = self.config.api_key
        return {"X-Hume-Api-Key": key} if key else None

    async def handshake(self, ws: WsConnection) -> None:
        try:
            async with asyncio.timeout(self.config.connect_timeout_s):
                frame = await ws.recv()
        except TimeoutError:
            raise ConnectError(
                f"no chat_metadata within {self.config.connect_timeout_s:g} s"
            ) from None
        except ConnectionClosed as exc:
            raise ConnectError(
                f"connection closed before chat_metadata: {close_text(exc)}"
            ) from None
        self.bytes_received += message_size(frame)
        for message in self._proto.receive_opening(frame):
            await self.send_encoded(message)

    async def send_audio(self, samples: NDArray[Any]) -> None:
        await self.send_encoded(self._proto.audio_frame(samples))

    def encode_audio(self, frames: NDArray[Any]) -> list[str]:
        return [self._proto.audio_frame(row) for row in frames]

    async def send_encoded(self, message: WireMessage) -> None:
        await self.send_message(message)

    def parse(self, message: str | bytes, arrival: float) -> list[ClientEvent]:
        return self._proto.receive(message, arrival)
