"""The Nova Sonic fake server: ``fake.ServerProtocol`` served over HTTP/2 by the kit, one stream
per connection, the request answered as Bedrock does (``fake_request``)."""

from __future__ import annotations

import functools
import itertools
import ssl
from collections.abc import Callable

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.declare import Http2Fake, Request, Session
from duplexsim.clients.fakekit.fakeserver import RunningServer, serve_fake
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.nova_sonic import fake_request
from duplexsim.clients.nova_sonic.fake import ServerProtocol

__all__ = ["start_server"]


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
    over TLS (ALPN ``h2``, as Bedrock does; the AWS SDK's own client takes nothing else)
    instead of cleartext with prior knowledge."""
    faults = faults or Faults()
    ids = itertools.count(1)

    def accept(request: Request) -> Session:
        auth = fake_request.authorization(request)
        assert auth is not None  # refuse turned away a request without one
        session_id = f"session-{next(ids)}"
        protocol = ServerProtocol(
            behaviour_factory, faults, session_id=session_id, secret=secret,
            region=auth["region"], seed_signature=auth["sig"],
        )  # fmt: skip
        return Session(protocol, headers=fake_request.response_headers(session_id))

    fake = Http2Fake(accept, refuse=functools.partial(fake_request.refuse, secret))
    return await serve_fake(fake, host=host, port=port, faults=faults, ssl_context=ssl_context)
