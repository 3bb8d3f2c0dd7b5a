"""OpenAIRealtimeClient: the asyncio shell around ClientProtocol. It moves frames and stamps
arrivals; the API key goes in the dialect's auth header and nowhere else.

One class per dialect, each only naming its dialect (``dialects``): the registry maps protocol
names to them, and the session sees nothing but their capabilities."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from numpy.typing import NDArray
from websockets.exceptions import ConnectionClosed

from duplexsim.clients.base import Capabilities, ClientConfig, ClientEvent, WireMessage
from duplexsim.clients.openai_realtime import dialects
from duplexsim.clients.openai_realtime import events as wire
from duplexsim.clients.openai_realtime.config import RealtimeOptions
from duplexsim.clients.openai_realtime.protocol import ClientProtocol, endpoint_url
from duplexsim.clients.transport.wsclient import WebSocketClient, close_text, message_size
from duplexsim.clients.transport.wsconn import WsConnection
from duplexsim.core.errors import ConnectError, ProtocolError

__all__ = [
    "AzurePreviewRealtimeClient",
    "AzureRealtimeClient",
    "AzureVoiceLiveClient",
    "OpenAIRealtimeClient",
    "QwenOmniRealtimeClient",
    "XaiRealtimeClient",
]

FRAME_MS = 20  # 960 bytes of PCM, 1.3 kB of JSON: small chunks keep server VAD responsive


class OpenAIRealtimeClient(WebSocketClient):
    max_message = 2**24  # a session.updated with tools can be large
    protocol = "openai-realtime"
    instructions_option = "instructions"
    dialect: ClassVar[dialects.Dialect] = dialects.OPENAI
    metering = dialects.OPENAI.metering

    def __init__(self, config: ClientConfig) -> None:
        super().__init__(config)
        self.options = RealtimeOptions.from_options(config.options, config.voice, self.dialect)
        secrets = (config.api_key,) if config.api_key else ()
        self._proto = ClientProtocol(self.options, secrets=secrets)

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            input_rate=self.options.sample_rate,
            output_rate=self.options.output_rate,
            frame_ms=FRAME_MS,
            faster_than_realtime=True,
            end_of_turn_signal=True,
            server_vad=not self.options.manual,
            manual_commit=self.options.manual,
        )

    @property
    def rate_limits(self) -> tuple[wire.RateLimit, ...]:
        """The latest ``rate_limits.updated`` (sent at the start of every response)."""
        return self._proto.rate_limits

    @property
    def protocol_state(self) -> ClientProtocol:
        """VAD marks with the server's audio positions, unknown event types, the session."""
        return self._proto

    def endpoint(self) -> str:
        return endpoint_url(self.config.url, self.config.model, self.dialect)

    def auth_headers(self) -> dict[str, str] | None:
        key = self.config.api_key
        return self.dialect.auth_headers(key) if key else None

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "dialect": self.dialect.name}

    async def handshake(self, ws: WsConnection) -> None:
        """session.created -> session.update -> session.updated, within connect_timeout_s."""
        timeout = self.config.connect_timeout_s
        try:
            async with asyncio.timeout(timeout):
                while not self._proto.ready:
                    message = await ws.recv()
                    self.bytes_received += message_size(message)
                    if not isinstance(message, str):
                        raise ProtocolError("expected a JSON event, got a binary frame")
                    for reply in self._proto.receive_handshake(message):
                        await ws.send(reply)
                        self.bytes_sent += len(reply)
        except TimeoutError:
            waiting = "session.created" if self._proto.state == "opening" else "session.updated"
            raise ConnectError(f"no {waiting} within {timeout:g} s") from None
        except ConnectionClosed as exc:
            raise ConnectError(f"connection closed during set-up: {close_text(exc)}") from None

    async def send_audio(self, samples: NDArray[Any]) -> None:
        await self.send_message(self._proto.audio_message(samples))

    def encode_audio(self, frames: NDArray[Any]) -> list[str]:
        return [self._proto.audio_message(row) for row in frames]

    async def send_encoded(self, message: WireMessage) -> None:
        await self.send_message(message if isinstance(message, str) else message.decode())

    async def commit_turn(self) -> None:
        for message in self._proto.commit_messages():
            await self.send_message(message)

    def parse(self, message: str | bytes, arrival: float) -> list[ClientEvent]:
        if not isinstance(message, str):
            raise ProtocolError("expected a JSON event, got a binary frame")
        return self._proto.receive_text(message, arrival)


class XaiRealtimeClient(OpenAIRealtimeClient):
    protocol = "xai-realtime"
    dialect = dialects.XAI
    metering = dialects.XAI.metering


class AzureRealtimeClient(OpenAIRealtimeClient):
    protocol = "azure-realtime"
    dialect = dialects.AZURE
    metering = dialects.AZURE.metering


class AzurePreviewRealtimeClient(OpenAIRealtimeClient):
    protocol = "azure-realtime-preview"
    dialect = dialects.AZURE_PREVIEW
    metering = dialects.AZURE_PREVIEW.metering


class AzureVoiceLiveClient(OpenAIRealtimeClient):
    protocol = "azure-voice-live"
    dialect = dialects.VOICE_LIVE
    metering = dialects.VOICE_LIVE.metering


class QwenOmniRealtimeClient(OpenAIRealtimeClient):
    protocol = "qwen-omni-realtime"
    dialect = dialects.QWEN
    metering = dialects.QWEN.metering
