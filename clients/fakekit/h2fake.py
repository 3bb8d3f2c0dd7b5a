"""The kit's HTTP/2 transport: serves an ``Http2Fake``, one long request stream per connection,
moving the stream's bytes to and from the fake's pure protocol object.

Cleartext with prior knowledge on loopback, or TLS with ALPN ``h2`` (SDKs that speak nothing
else, as the AWS SDK's bidirectional stream client, can then be pointed at a fake). The first
request on a connection is the session's; ``extra_latency_s`` delays every answer.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterable

from duplexsim.clients.fakekit.declare import Conversation, Http2Fake, Request
from duplexsim.clients.fakekit.fakeserver import RunningServer
from duplexsim.clients.fakekit.faults import Faults, Rejection
from duplexsim.clients.fakekit.serveractions import Action, Close, Send, Stall, expand
from duplexsim.clients.fakekit.ticker import Ticker
from duplexsim.clients.transport.h2io import (
    DataReceived,
    Event,
    H2Peer,
    RequestReceived,
    StreamEnded,
    StreamReset,
)

__all__ = ["serve_http2_fake"]

_INTERNAL_ERROR = 2  # HTTP/2 error code


async def serve_http2_fake(
    fake: Http2Fake,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Faults,
    ssl_context: ssl.SSLContext | None = None,
) -> RunningServer:
    """Serve ``fake``: each request ``fake.refuse`` lets through is a session of what
    ``fake.accept`` makes of it."""
    loop = asyncio.get_running_loop()
    if ssl_context is not None:
        ssl_context.set_alpn_protocols(["h2"])
    server = await loop.create_server(
        lambda: _Connection(fake, faults).peer, host, port, ssl=ssl_context
    )
    bound = server.sockets[0].getsockname()[1]
    shown = f"[{host}]" if ":" in host else host

    async def close() -> None:
        server.close()
        await server.wait_closed()

    scheme = "https" if ssl_context is not None else "http"
    return RunningServer(host, int(bound), f"{scheme}://{shown}:{bound}", close)


class _Connection:
    """One connection: its first request's stream is the session."""

    def __init__(self, fake: Http2Fake, faults: Faults) -> None:
        self._fake = fake
        self._faults = faults
        self.peer = H2Peer(client_side=False, on_events=self._on_events, clock=_loop_time)
        self._conversation: Conversation | None = None
        self._ticker: Ticker | None = None
        self._stream = 0
        self._stalled = False

    def _on_events(self, events: list[Event], arrival: float) -> None:
        for ev in events:
            if self._stalled:
                return
            if isinstance(ev, RequestReceived) and not self._stream:
                self._stream = ev.stream_id
                self._request({str(k): str(v) for k, v in ev.headers})
            elif isinstance(ev, DataReceived) and ev.stream_id == self._stream:
                if self._conversation is not None:
                    self._carry_out(self._conversation.receive(ev.data, arrival))
                if self._ticker is not None:
                    self._ticker.arm()
            elif isinstance(ev, StreamEnded | StreamReset) and ev.stream_id == self._stream:
                self._carry_out([Close(1000, "")])

    def _request(self, headers: dict[str, str]) -> None:
        request = Request(headers.get(":method", ""), headers.get(":path", ""), headers)
        rejection = self._fake.refuse(request, self._faults)
        if rejection is not None:
            return self._refuse(rejection)
        session = self._fake.accept(request)
        fields = [(":status", "200"), *((k.lower(), v) for k, v in session.headers.items())]
        self.peer.conn.send_headers(self._stream, fields)
        self.peer.flush()
        self._conversation = session.conversation
        self._ticker = Ticker(session.conversation, self._tick)
        self._carry_out(list(session.opening))

    def _refuse(self, rejection: Rejection) -> None:
        fields = [(":status", str(rejection.status))]
        fields += [(k.lower(), v) for k, v in rejection.headers.items()]
        self.peer.conn.send_headers(self._stream, fields)
        self.peer.send(self._stream, rejection.body.encode(), end=True)

    def _tick(self, now: float) -> None:
        if self._conversation is not None and not self._stalled:
            self._carry_out(self._conversation.tick(now))

    def _carry_out(self, actions: list[Action]) -> None:
        delay = self._faults.extra_latency_s
        if delay > 0 and actions:
            asyncio.get_running_loop().call_later(delay, self._apply, actions)
        else:
            self._apply(actions)

    def _apply(self, actions: Iterable[Action]) -> None:
        for action in expand(actions):
            if isinstance(action, Send):
                data = action.message
                self.peer.send(self._stream, data if isinstance(data, bytes) else data.encode())
            elif isinstance(action, Close):
                self._end(action.code)
            elif isinstance(action, Stall) and self.peer.transport is not None:
                self._stalled = True
                self.peer.transport.pause_reading()  # nothing read, nothing answered, pings too
                self._stop_ticking()

    def _end(self, code: int) -> None:
        """End the stream (1000), or reset it (any other code: the server dropping it)."""
        if code == 1000:
            self.peer.send(self._stream, b"", end=True)
        else:
            self.peer.conn.reset_stream(self._stream, _INTERNAL_ERROR)
            self.peer.flush()
        self._conversation = None
        self._stop_ticking()

    def _stop_ticking(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()


def _loop_time() -> float:
    return asyncio.get_running_loop().time()
