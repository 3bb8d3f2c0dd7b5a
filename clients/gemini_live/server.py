"""The Gemini Live fake server: ``fake.ServerProtocol`` served over WebSocket by the kit.

It listens at the real path (``/ws/google.ai.generativelanguage.v1beta.GenerativeService.
BidiGenerateContent``). Faults act as on every fake, except ``rate_limit_first``: the real API
says "quota exceeded" by closing the socket with 1011 and RESOURCE_EXHAUSTED in the reason, so those
attempts are let through the upgrade and closed that way once their setup arrives.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.declare import Request, Session, WebSocketFake
from duplexsim.clients.fakekit.fakeserver import RunningServer, serve_fake
from duplexsim.clients.fakekit.faults import Faults, Rejection
from duplexsim.clients.gemini_live.fake import ServerProtocol
from duplexsim.clients.gemini_live.protocol import PATHS

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
    quota = _Quota()

    def accept(request: Request) -> Session:
        protocol = ServerProtocol(behaviour_factory, faults, api_key=api_key, quota=quota.take())
        return Session(protocol, protocol.open(request.path, request.headers))

    fake = WebSocketFake(accept, path=PATHS[0], refuse=quota.admit)
    return await serve_fake(fake, host=host, port=port, faults=faults, ssl_context=ssl_context)


class _Quota:
    """The handshake faults, except that a rate-limited attempt is upgraded and marked, for its
    session to close with RESOURCE_EXHAUSTED. (Attempts racing each other may swap which one gets
    the mark; the number is right.)"""

    def __init__(self) -> None:
        self.due = 0

    def admit(self, request: Request, faults: Faults) -> Rejection | None:
        rejection = faults.admit()
        if rejection is not None and rejection.status == 429 and faults.refuse_status is None:
            self.due += 1
            return None
        return rejection

    def take(self) -> bool:
        if self.due <= 0:
            return False
        self.due -= 1
        return True
