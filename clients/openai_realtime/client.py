"""OpenAIRealtimeClient: the asyncio shell around ClientProtocol. It moves frames and stamps
arrivals; the API key goes in the Authorization header and nowhere else."""

from __future__ import annotations

import asyncio
from typing import Any

from numpy.typing import NDArray
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from clients.base import Capabilities, ClientConfig, ClientEvent
from clients.openai_realtime import events as wire
from clients.openai_realtime.config import RealtimeOptions
from clients.openai_realtime.protocol import ClientProtocol, endpoint_url, handshake_error
from clients.wsclient import WebSocketClient, close_text, message_size
from simulator.core.errors import ConnectError, Disconnected, ProtocolError, SessionError

__all__ = ["OpenAIRealtimeClient"]

FRAME_MS = 20  # 960 bytes of PCM, 1.3 kB of JSON: small chunks keep server VAD responsive
MAX_MESSAGE = 2**24  # a burst's delta is small, but a session.updated with tools can be large
CLOSE_TIMEOUT_S = 2.0


class OpenAIRealtimeClient(WebSocketClient):
    protocol = "openai-realtime"

    def __init__(self, config: ClientConfig) -> None:
        super().__init__(config)
        self.options = RealtimeOptions.from_options(config.options, config.voice)
        secrets = (config.api_key,) if config.api_key else ()
        self._proto = ClientProtocol(self.options, secrets=secrets)

    @property
    def capabilities(self) -> Capabilities:
        rate = self.options.sample_rate
        return Capabilities(
            input_rate=rate,
            output_rate=rate,
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

    async def connect(self) -> None:
        key = self.config.api_key
        headers = {"Authorization": f"Bearer {key}"} if key else None
        url = endpoint_url(self.config.url, self.config.model)
        try:
            self._ws = await connect(
                url,
                compression=None,
                open_timeout=self.config.connect_timeout_s,
                close_timeout=CLOSE_TIMEOUT_S,
                max_size=MAX_MESSAGE,
                max_queue=None,  # never push back on the server: that would skew arrival times
                additional_headers=headers,
            )
        except InvalidStatus as exc:
            raise handshake_error(exc.response.status_code, exc.response.headers) from None
        except (OSError, TimeoutError, WebSocketException) as exc:
            reason = self._redact(str(exc) or type(exc).__name__)
            raise ConnectError(f"cannot connect to {self._redact(url)}: {reason}") from None
        try:
            await self._handshake(self._ws)
        except SessionError:
            await self.aclose()
            raise

    async def _handshake(self, ws: ClientConnection) -> None:
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
        await self._send(self._proto.audio_message(samples))

    async def commit_turn(self) -> None:
        for message in self._proto.commit_messages():
            await self._send(message)

    async def _send(self, message: str) -> None:
        ws = self._connected()
        try:
            await ws.send(message)
        except ConnectionClosed as exc:
            raise Disconnected(f"connection closed while sending: {close_text(exc)}") from None
        self.bytes_sent += len(message)

    def parse(self, message: str | bytes, arrival: float) -> list[ClientEvent]:
        if not isinstance(message, str):
            raise ProtocolError("expected a JSON event, got a binary frame")
        return self._proto.receive_text(message, arrival)
