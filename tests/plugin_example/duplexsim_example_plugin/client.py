"""The ``raw-pcm`` protocol: 16-bit little-endian mono PCM in binary WebSocket messages, both ways,
nothing else on the wire. The whole client a protocol needs: declare what it can do, connect,
send audio, turn what arrives into events stamped with the session's clock, close."""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException

from duplexsim.clients.base import AudioOut, Capabilities, ClientConfig, ClientEvent, DuplexClient
from duplexsim.core.errors import ConnectError, ProtocolError

__all__ = ["RawPcmClient"]


class RawPcmClient(DuplexClient):
    protocol = "raw-pcm"

    def __init__(self, config: ClientConfig) -> None:
        super().__init__(config)
        self._rate = int(config.options.get("sample_rate", 16000))
        self._ws: ClientConnection | None = None

    @property
    def capabilities(self) -> Capabilities:
        # the example server answers every frame with one frame: output never stops
        return Capabilities(self._rate, self._rate, frame_ms=20, continuous_output=True)

    async def connect(self) -> None:
        try:
            self._ws = await connect(
                self.config.url, open_timeout=self.config.connect_timeout_s, compression=None
            )
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise ConnectError(f"raw-pcm: cannot connect to {self.config.url}: {exc}") from None

    async def send_audio(self, samples: np.ndarray) -> None:
        assert self._ws is not None, "connect() first"
        pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes()
        self.bytes_sent += len(pcm)
        await self._ws.send(pcm)

    async def events(self) -> AsyncIterator[ClientEvent]:
        assert self._ws is not None, "connect() first"
        try:
            async for message in self._ws:
                arrival = self.config.clock()  # stamped on arrival, before any decoding
                if isinstance(message, str):
                    raise ProtocolError("raw-pcm: expected binary PCM, got a text message")
                self.bytes_received += len(message)
                pcm = np.frombuffer(message, dtype="<i2").astype(np.float32) / 32768.0
                yield AudioOut(pcm, arrival)
        except ConnectionClosed:
            return

    async def aclose(self) -> None:
        if self._ws is not None:
            await self._ws.close()
