"""The Nova Sonic fake server: cleartext HTTP/2 (prior knowledge) on loopback, one stream per
connection, moving bytes to and from ServerProtocol.

It answers ``POST /model/{modelId}/invoke-with-bidirectional-stream`` as Bedrock does: a request
without a SigV4 ``Authorization`` is refused 403 (``MissingAuthenticationTokenException``), one
whose signature does not match the secret, when the fake is given one, 403
(``InvalidSignatureException``); handshake faults answer with their status and
``x-amzn-ErrorType``. Then 200 with ``application/vnd.amazon.eventstream`` and the events.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import json
import re
import ssl
from collections.abc import Callable

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.fakeserver import RunningServer
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.fakekit.serveractions import Action, Close, Send, Stall
from duplexsim.clients.nova_sonic.fake import ServerProtocol
from duplexsim.clients.nova_sonic.h2io import (
    DataReceived,
    Event,
    H2Peer,
    RequestReceived,
    StreamEnded,
    StreamReset,
)
from duplexsim.clients.nova_sonic.sigv4 import Credentials, sign_request

__all__ = ["start_server"]

# the AWS SDK sends an empty query ("...-stream?"), which signs like none
_PATH = re.compile(
    r"^(?P<prefix>/[^?]*)?/model/(?P<model>[^/?]+)/invoke-with-bidirectional-stream(\?|$)"
)
_AUTH = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<akid>[^/]*)/(?P<date>\d{8})/(?P<region>[^/]+)/bedrock/"
    r"aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<sig>[0-9a-f]{64})$"
)
_ERROR_TYPES = {401: "AccessDeniedException", 403: "AccessDeniedException",
                429: "ThrottlingException", 503: "ServiceUnavailableException"}  # fmt: skip
_INTERNAL_ERROR = 2  # HTTP/2 error code
TICK_LATE_S = 0.0005


async def start_server(
    behaviour_factory: Callable[[int], Behaviour],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Faults | None = None,
    secret: str | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> RunningServer:
    """Serve the bidirectional stream; ``secret``: the secret access key every signature is
    checked against (None checks only that requests are signed). ``ssl_context``: serve HTTP/2
    over TLS
    (ALPN ``h2``, as Bedrock does; the AWS SDK's own client takes nothing else) instead of
    cleartext with prior knowledge."""
    faults = faults or Faults()
    ids = itertools.count(1)
    loop = asyncio.get_running_loop()
    if ssl_context is not None:
        ssl_context.set_alpn_protocols(["h2"])
    server = await loop.create_server(
        lambda: _Connection(behaviour_factory, faults, secret, f"session-{next(ids)}").peer,
        host,
        port,
        ssl=ssl_context,
    )
    bound = server.sockets[0].getsockname()[1]
    shown = f"[{host}]" if ":" in host else host

    async def close() -> None:
        server.close()
        await server.wait_closed()

    scheme = "https" if ssl_context is not None else "http"
    return RunningServer(host, int(bound), f"{scheme}://{shown}:{bound}", close)


class _Connection:
    def __init__(self, factory: Callable[[int], Behaviour], faults: Faults, secret: str | None,
                 session_id: str) -> None:  # fmt: skip
        self._factory, self._faults, self._secret, self._session = (
            factory,
            faults,
            secret,
            session_id,
        )
        self.peer = H2Peer(client_side=False, on_events=self._on_events, clock=_loop_time)
        self._protocol: ServerProtocol | None = None
        self._stream = 0
        self._stalled = False
        self._timer: asyncio.TimerHandle | None = None

    def _on_events(self, events: list[Event], arrival: float) -> None:
        for ev in events:
            if self._stalled:
                return
            if isinstance(ev, RequestReceived) and not self._stream:
                self._stream = ev.stream_id
                self._request({str(k): str(v) for k, v in ev.headers})
            elif isinstance(ev, DataReceived) and ev.stream_id == self._stream and self._protocol:
                self._carry_out(self._protocol.receive(ev.data, arrival))
                self._arm()
            elif isinstance(ev, StreamEnded | StreamReset) and ev.stream_id == self._stream:
                self._carry_out([Close(1000, "")])

    def _request(self, headers: dict[str, str]) -> None:
        path = _PATH.match(headers.get(":path", ""))
        if headers.get(":method") != "POST" or path is None:
            return self._refuse(404, "UnknownOperationException", "")
        auth = _AUTH.match(headers.get("authorization", ""))
        if auth is None:
            return self._refuse(
                403, "MissingAuthenticationTokenException", "Missing Authentication Token"
            )
        if self._secret is not None and not self._signed(headers, auth):
            return self._refuse(403, "InvalidSignatureException",
                                "The request signature we calculated does not match the signature you provided.")  # fmt: skip
        rejection = self._faults.admit()
        if rejection is not None:
            kind = _ERROR_TYPES.get(rejection.status, "InternalServerException")
            return self._refuse(rejection.status, kind, rejection.body.strip(), rejection.headers)
        self._protocol = ServerProtocol(
            self._factory, self._faults, session_id=self._session, secret=self._secret,
            region=auth["region"], seed_signature=auth["sig"],
        )  # fmt: skip
        fields = [(":status", "200"), ("content-type", "application/vnd.amazon.eventstream"),
                  ("x-amzn-requestid", self._session)]  # fmt: skip
        self.peer.conn.send_headers(self._stream, fields)
        self.peer.flush()

    def _signed(self, headers: dict[str, str], auth: re.Match[str]) -> bool:
        names = auth["signed"].split(";")
        added = {"host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"}
        try:
            when = datetime.datetime.strptime(headers["x-amz-date"], "%Y%m%dT%H%M%SZ")
        except (KeyError, ValueError):
            return False
        creds = Credentials(auth["akid"], self._secret or "", headers.get("x-amz-security-token"))
        signed = {n: headers.get(n, "") for n in names if n not in added}
        _, signature = sign_request(
            "POST", headers.get(":authority", ""), headers[":path"].partition("?")[0], signed, creds,
            auth["region"], when.replace(tzinfo=datetime.UTC),
        )  # fmt: skip
        return signature == auth["sig"]

    def _refuse(
        self, status: int, kind: str, message: str, extra: dict[str, str] | None = None
    ) -> None:
        fields = [(":status", str(status)), ("content-type", "application/json"),
                  ("x-amzn-errortype", kind), *((k.lower(), v) for k, v in (extra or {}).items())]  # fmt: skip
        self.peer.conn.send_headers(self._stream, fields)
        self.peer.send(self._stream, json.dumps({"message": message}).encode(), end=True)

    def _arm(self) -> None:
        """Tick the protocol when its wall clock next has something due (a reply going on
        while the client sends nothing)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        at = self._protocol.wake_at() if self._protocol is not None else None
        if at is not None and not self._stalled:
            # a hair late: ticked at exactly its time, the clock may fall a float rounding short
            # of the lapse, move nothing and re-arm the same time (a spin)
            loop = asyncio.get_running_loop()
            self._timer = loop.call_at(max(at, loop.time()) + TICK_LATE_S, self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self._protocol is not None and not self._stalled:
            self._carry_out(self._protocol.tick(_loop_time()))
            self._arm()

    def _carry_out(self, actions: list[Action]) -> None:
        delay = self._faults.extra_latency_s
        if delay > 0 and actions:
            asyncio.get_running_loop().call_later(delay, self._apply, actions)
        else:
            self._apply(actions)

    def _apply(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                data = (
                    action.message if isinstance(action.message, bytes) else action.message.encode()
                )
                self.peer.send(self._stream, data)
            elif isinstance(action, Close):
                if action.code == 1000:
                    self.peer.send(self._stream, b"", end=True)
                else:  # the server dropping the stream mid-way
                    self.peer.conn.reset_stream(self._stream, _INTERNAL_ERROR)
                    self.peer.flush()
                self._protocol = None
                if self._timer is not None:
                    self._timer.cancel()
            elif isinstance(action, Stall) and self.peer.transport is not None:
                self._stalled = True
                self.peer.transport.pause_reading()  # nothing read, nothing answered, pings too


def _loop_time() -> float:
    return asyncio.get_running_loop().time()
