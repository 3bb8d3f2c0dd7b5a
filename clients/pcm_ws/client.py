"""PcmWsClient: the asyncio shell around ClientProtocol. It moves frames and stamps arrivals."""

from __future__ import annotations

import asyncio
from typing import Any

from numpy.typing import NDArray
from websockets.exceptions import ConnectionClosed

from duplexsim.clients.base import Capabilities, ClientConfig, ClientEvent, WireMessage
from duplexsim.clients.pcm_ws.protocol import ClientProtocol
from duplexsim.clients.transport.wsclient import WebSocketClient, close_text, message_size
from duplexsim.clients.transport.wsconn import WsConnection
from duplexsim.core.errors import ConnectError, ProtocolError

__all__ = ["PcmWsClient"]

FRAME_MS = 20


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
            # the protocol's contract: each frame answered as it arrives, on media time
            answers_each_frame=True,
        )

    async def handshake(self, ws: WsConnection) -> None:
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
        await self.send_encoded(self._proto.audio_message(samples))

    def encode_audio(self, frames: NDArray[Any]) -> list[bytes]:
        return self._proto.audio_messages(frames)

    async def send_encoded(self, message: WireMessage) -> None:
        await self.send_message(message)

    def parse(self, message: str | bytes, arrival: float) -> list[ClientEvent]:
        if isinstance(message, str):
            return self._proto.receive_text(message, arrival)
        return self._proto.receive_binary(message, arrival)
