"""PcmWsClient: the asyncio shell around ClientProtocol. It moves frames and stamps arrivals."""

from __future__ import annotations

import asyncio
from typing import Any

from numpy.typing import NDArray
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from clients.base import Capabilities, ClientConfig, ClientEvent
from clients.pcm_ws.protocol import ClientProtocol, handshake_error
from clients.wsclient import WebSocketClient, close_text, message_size
from simulator.core.errors import ConnectError, Disconnected, ProtocolError, SessionError

__all__ = ["PcmWsClient"]

FRAME_MS = 20
MAX_MESSAGE = 2**22
CLOSE_TIMEOUT_S = 2.0  # the session is over; a peer that never acks our close is not waited on


class PcmWsClient(WebSocketClient):
    protocol = "pcm-ws"

    def __init__(self, config: ClientConfig) -> None:
        super().__init__(config)
        self._rate = int(config.options.get("sample_rate", 16000))
        self._proto = ClientProtocol(self._rate, FRAME_MS)

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            input_rate=self._rate,
            output_rate=self._rate,
            frame_ms=FRAME_MS,
            faster_than_realtime=False,
            end_of_turn_signal=True,
            server_vad=True,
            continuous_output=True,  # one output frame per input frame, silence included
        )

    async def connect(self) -> None:
        key = self.config.api_key
        headers = {"Authorization": f"Bearer {key}"} if key else None
        try:
            self._ws = await connect(
                self.config.url,
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
            where = self._redact(self.config.url)
            reason = self._redact(str(exc) or type(exc).__name__)
            raise ConnectError(f"cannot connect to {where}: {reason}") from None
        try:
            await self._hello(self._ws)
        except SessionError:
            await self.aclose()
            raise

    async def _hello(self, ws: ClientConnection) -> None:
        hello = self._proto.hello_message()
        try:
            await ws.send(hello)
            async with asyncio.timeout(self.config.connect_timeout_s):
                reply = await ws.recv()
        except TimeoutError:
            raise ConnectError(f"no hello_ack within {self.config.connect_timeout_s:g} s") from None
        except ConnectionClosed as exc:
            raise ConnectError(f"connection closed during the hello: {close_text(exc)}") from None
        self.bytes_sent += len(hello.encode())
        self.bytes_received += message_size(reply)
        if not isinstance(reply, str):
            raise ProtocolError("expected 'hello_ack', got a binary frame")
        self._proto.receive_hello_ack(reply)

    async def send_audio(self, samples: NDArray[Any]) -> None:
        ws = self._connected()
        data = self._proto.audio_message(samples)
        try:
            await ws.send(data)
        except ConnectionClosed as exc:
            raise Disconnected(f"connection closed while sending: {close_text(exc)}") from None
        self.bytes_sent += len(data)

    def parse(self, message: str | bytes, arrival: float) -> list[ClientEvent]:
        if isinstance(message, str):
            return self._proto.receive_text(message, arrival)
        return self._proto.receive_binary(message, arrival)
