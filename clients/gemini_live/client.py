"""GeminiLiveClient: the asyncio shell around ClientProtocol. It moves frames and stamps arrivals.

The API key goes in the ``x-goog-api-key`` header, as python-genai sends it (_api_client.py sets
the header; live.py connects to a URL without the key), so it is never part of a URL, a message or
a recording.
"""

from __future__ import annotations

import asyncio
from typing import Any

from numpy.typing import NDArray
from websockets.exceptions import ConnectionClosed

from duplexsim.clients.base import (
    Capabilities,
    ClientConfig,
    ClientEvent,
    Metering,
    WireMessage,
)
from duplexsim.clients.gemini_live.errors import redact_url
from duplexsim.clients.gemini_live.protocol import (
    INPUT_RATE,
    OUTPUT_RATE,
    ClientProtocol,
    setup_from_options,
)
from duplexsim.clients.transport.wsclient import WebSocketClient
from duplexsim.clients.transport.wsconn import WsConnection
from duplexsim.core.errors import ConnectError, Disconnected, SessionError

__all__ = ["DEFAULT_URL", "GeminiLiveClient"]

DEFAULT_URL = (
    "wss://generativelanguage.googleapis.com/ws/"
    "google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
)
FRAME_MS = 20  # 10-20 ms chunks are Google's "ultra-low latency" advice (ADK streaming guide)


class GeminiLiveClient(WebSocketClient):
    decode_text = False  # the server may send JSON as binary frames
    protocol = "gemini-live"
    # usageMetadata with each turn; "Gemini represents each second of audio as 32 tokens"
    # (ai.google.dev, Understand and count tokens), input and output alike
    metering = Metering("per-turn", 32.0, "context", 32.0)
    instructions_option = "system_instruction"

    def __init__(self, config: ClientConfig) -> None:
        super().__init__(config)
        setup = setup_from_options(config.model, config.voice, config.options)
        self._proto = ClientProtocol(setup, secret=config.api_key)

    @property
    def capabilities(self) -> Capabilities:
        auto = not self._proto.manual
        return Capabilities(
            input_rate=INPUT_RATE,
            output_rate=OUTPUT_RATE,
            frame_ms=FRAME_MS,
            faster_than_realtime=True,
            end_of_turn_signal=True,
            server_vad=auto,
            manual_commit=not auto,
        )

    def endpoint(self) -> str:
        return self.config.url or DEFAULT_URL

    def auth_headers(self) -> dict[str, str] | None:
        key = self.config.api_key  # the header the official SDK uses: never in the URL
        return {"x-goog-api-key": key} if key else None

    async def handshake(self, ws: WsConnection) -> None:
        setup = self._proto.setup_message()
        try:
            await ws.send(setup)
            self.bytes_sent += len(setup.encode())
            async with asyncio.timeout(self.config.connect_timeout_s):
                reply = await ws.recv(decode=False)
        except TimeoutError:
            raise ConnectError(
                f"no setupComplete within {self.config.connect_timeout_s:g} s"
            ) from None
        except ConnectionClosed as exc:
            raise self._closed(exc, "during setup") from None
        self.bytes_received += len(reply)
        self._proto.receive_setup_reply(reply)

    async def send_audio(self, samples: NDArray[Any]) -> None:
        await self._send(self._proto.audio_messages(samples))

    def encode_audio(self, frames: NDArray[Any]) -> list[str]:
        return [self._proto.audio_frame(row) for row in frames]

    async def send_encoded(self, message: WireMessage) -> None:
        text = message if isinstance(message, str) else message.decode()
        await self._send([*self._proto.audio_prefix(), text])

    async def commit_turn(self) -> None:
        await self._send(self._proto.commit_messages())

    async def _send(self, messages: list[str]) -> None:
        for message in messages:
            await self.send_message(message)

    def closed_while_sending(self, exc: ConnectionClosed) -> SessionError:
        return self._closed(exc, "while sending")

    def parse(self, message: str | bytes, arrival: float) -> list[ClientEvent]:
        return self._proto.receive(message, arrival)

    def closed_error(self, exc: ConnectionClosed) -> SessionError | None:
        frame = exc.rcvd
        return self._proto.close_error(frame.code if frame else None, frame.reason if frame else "")

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info["url"] = redact_url(self.config.url, self.config.api_key)
        return info

    def _closed(self, exc: ConnectionClosed, when: str) -> SessionError:
        frame = exc.rcvd
        error = self._proto.close_error(
            frame.code if frame else None, frame.reason if frame else ""
        )
        if error is not None:
            return error
        text = f"server closed the connection {when} (code 1000)"
        return Disconnected(text) if self._proto.ready else ConnectError(text)

    def _redact(self, text: str) -> str:
        return redact_url(text, self.config.api_key)
