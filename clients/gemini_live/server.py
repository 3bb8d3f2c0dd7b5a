"""The Gemini Live fake server: a thin asyncio shell that moves frames to and from ServerProtocol.

It listens at the real path (``/ws/google.ai.generativelanguage.v1beta.GenerativeService.
BidiGenerateContent``). Faults act as on every fake, except ``rate_limit_first``: the real API
says "quota exceeded" by closing the socket with 1011 and RESOURCE_EXHAUSTED in the reason, so those
attempts are let through the upgrade and closed that way once their setup arrives.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.fakeserver import RunningServer, serve_session, serve_websockets
from duplexsim.clients.fakekit.faults import Faults, Rejection
from duplexsim.clients.gemini_live.protocol import PATHS, ServerProtocol
from duplexsim.clients.transport.wsconn import WsConnection

__all__ = ["start_server"]


async def start_server(
    behaviour_factory: Callable[[int], Behaviour],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Faults | None = None,
    api_key: str | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> RunningServer:
    """Serve the Gemini Live API; each connection gets a fresh 16 kHz behaviour.

    ``api_key``: the one key accepted (x-goog-api-key header or ``key=`` query); a wrong or
    missing key closes with 1008. None accepts any key and none (``serve-model`` and ``fake:``
    models run it that way: they have no key). ``ssl_context`` serves wss:// (python-genai
    connects with TLS only).
    """
    faults = faults or Faults()
    admission = _QuotaAdmission(faults)

    async def handler(ws: WsConnection) -> None:
        quota = admission.take_quota()
        protocol = ServerProtocol(behaviour_factory, faults, api_key=api_key, quota=quota)
        assert ws.request is not None
        opening = protocol.open(ws.request.path, ws.request.headers)
        await serve_session(ws, opening, protocol, faults)

    return await serve_websockets(
        handler, host=host, port=port, faults=admission, path=PATHS[0], ssl_context=ssl_context
    )


class _QuotaAdmission(Faults):
    """``faults`` as serve_websockets sees it: the same answers and counts, except that a
    rate-limited attempt is upgraded and marked, for the handler to close with RESOURCE_EXHAUSTED.
    (Attempts racing each other may swap which one gets the mark; the number is right.)"""

    def __init__(self, inner: Faults) -> None:
        super().__init__()
        self.inner = inner
        self.quota_due = 0

    def admit(self) -> Rejection | None:
        rejection = self.inner.admit()
        if rejection is not None and rejection.status == 429 and self.inner.refuse_status is None:
            self.quota_due += 1
            return None
        return rejection

    def take_quota(self) -> bool:
        if self.quota_due <= 0:
            return False
        self.quota_due -= 1
        return True
