"""The kit's entry: ``serve_fake`` serves a fake's declaration over the transport it names
(``declare``: WebSocket, HTTP/2 or WebRTC) and hands back a ``RunningServer``.

Fakes bind 127.0.0.1 by default: they exist for tests and demos, not for the network.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from types import TracebackType

from duplexsim.clients.fakekit.declare import Http2Fake, WebRTCFake, WebSocketFake
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.core.stalls import StallLog

__all__ = ["RunningServer", "serve_fake"]


class RunningServer:
    """A fake server listening on ``url``; close it with ``aclose`` or ``async with``.

    ``held``: where its answers wait off its loop (a WebRTC fake's codec threads), the spans in
    which it held an input frame before the answer to it went out; None where each answer
    leaves in the loop iteration that read its frame (its loop's stalls say it all). A run on
    this machine counts them with the server's stalls.
    """

    def __init__(
        self,
        host: str,
        port: int,
        url: str,
        close: Callable[[], Awaitable[None]],
        held: StallLog | None = None,
    ):
        self.host = host
        self.port = port
        self.url = url
        self.held = held
        self._close = close
        self._closed = False

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._close()

    async def __aenter__(self) -> RunningServer:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"RunningServer({self.url})"


async def serve_fake(
    fake: WebSocketFake | Http2Fake | WebRTCFake,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Faults | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> RunningServer:
    """Serve ``fake`` on ``host``:``port`` (0: any free port), injecting ``faults``; TLS with
    ``ssl_context`` (WebSocket and HTTP/2). The transports load on first use: HTTP/2 and WebRTC
    need their extras."""
    faults = faults or Faults()
    if isinstance(fake, WebSocketFake):
        from duplexsim.clients.fakekit.wsfake import serve_websocket_fake

        return await serve_websocket_fake(
            fake, host=host, port=port, faults=faults, ssl_context=ssl_context
        )
    if isinstance(fake, Http2Fake):
        from duplexsim.clients.fakekit.h2fake import serve_http2_fake

        return await serve_http2_fake(
            fake, host=host, port=port, faults=faults, ssl_context=ssl_context
        )
    if ssl_context is not None:
        raise ValueError("the WebRTC transport serves its signalling without TLS")
    from duplexsim.clients.fakekit.rtcfake import serve_webrtc_fake

    return await serve_webrtc_fake(fake, host=host, port=port, faults=faults)
