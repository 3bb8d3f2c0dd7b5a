"""MoshiClient: the asyncio shell around ClientProtocol. It moves messages and stamps arrivals.

Connects to ``{url}/api/chat`` (the URL may already end in /api/chat), with every option as a query
parameter (PersonaPlex: ``text_prompt``, ``voice_prompt``; ``ClientConfig.voice`` fills
``voice_prompt`` when the options do not), waits for the handshake, then streams. Moshi answers
each 80 ms of input with 80 ms of output, so the session must keep sending, silence included.

Timing: audio is stamped on arrival. The Opus path adds a fixed ``CODEC_DELAY_S`` (13 ms) to a
measured reply latency: the encoder lookahead, 6.5 ms on the way in and 6.5 ms on the way out,
which a real Moshi deployment has too (see ``duplexsim.clients.moshi.codec``). Capabilities cannot say so;
``describe()`` records it. Sending frames shorter than 80 ms adds up to one frame of delay more, as
the stream is cut into 80 ms frames; the session sends ``frame_ms`` = 80 and avoids that.

An API key, if given, goes in the ``kyutai-api-key`` header (Kyutai's servers) and as a bearer
token (proxies in front of a server); never in the URL or a message.
"""

from __future__ import annotations

import asyncio
from typing import Any

from numpy.typing import NDArray
from websockets.exceptions import ConnectionClosed

from duplexsim.clients.base import Capabilities, ClientConfig, ClientEvent
from duplexsim.clients.moshi.codec import FRAME, OPUS_DELAY_SAMPLES, RATE
from duplexsim.clients.moshi.protocol import ClientProtocol, chat_url, query_params
from duplexsim.clients.transport.wsclient import WebSocketClient, close_text, message_size
from duplexsim.clients.transport.wsconn import WsConnection
from duplexsim.core.errors import ConnectError

__all__ = ["CODEC_DELAY_S", "FRAME_MS", "MoshiClient"]

FRAME_MS = FRAME * 1000 // RATE  # 80
CODEC_DELAY_S = 2 * OPUS_DELAY_SAMPLES / RATE  # 0.013: Opus lookahead, client->server and back


class MoshiClient(WebSocketClient):
    protocol = "moshi"

    def __init__(self, config: ClientConfig) -> None:
        super().__init__(config)
        self._url = chat_url(config.url, query_params(config.options, config.voice))
        self._proto = ClientProtocol()

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            input_rate=RATE,
            output_rate=RATE,
            frame_ms=FRAME_MS,
            faster_than_realtime=False,  # one output frame per input frame, paced by our input
            end_of_turn_signal=False,
            server_vad=False,
            continuous_output=True,
        )

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "codec_delay_s": CODEC_DELAY_S}

    def endpoint(self) -> str:
        return self._url

    def auth_headers(self) -> dict[str, str] | None:
        key = self.config.api_key  # kyutai's moshi-server checks its own header
        return {"kyutai-api-key": key, "Authorization": f"Bearer {key}"} if key else None

    async def handshake(self, ws: WsConnection) -> None:
        # PersonaPlex runs its system prompts first (seconds) and reads client messages while it
        # does, so nothing may be sent before the handshake
        timeout = self.config.connect_timeout_s
        try:
            async with asyncio.timeout(timeout):
                message = await ws.recv()
        except TimeoutError:
            raise ConnectError(f"no handshake within {timeout:g} s") from None
        except ConnectionClosed as exc:
            raise ConnectError(
                f"connection closed before the handshake: {close_text(exc)}"
            ) from None
        self.bytes_received += message_size(message)
        self._proto.receive_handshake(message)

    async def send_audio(self, samples: NDArray[Any]) -> None:
        data = self._proto.audio_message(samples)
        if data is None:
            return  # less than a whole 80 ms frame so far
        await self.send_message(data)

    def parse(self, message: str | bytes, arrival: float) -> list[ClientEvent]:
        return self._proto.receive(message, arrival)
