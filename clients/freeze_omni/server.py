"""The Freeze-Omni fake server: ``fake.ServerProtocol`` served over WebSocket by the kit.

It listens at ``/socket.io/`` for Engine.IO 4 WebSocket connections, so python-socketio's own
client connects to it as it would to the demo server. ``max_users`` answers connections past
that many open ones with ``too_many_users``, as the demo server's ``--max_users`` does.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.declare import Request, Session, Untimed, WebSocketFake
from duplexsim.clients.fakekit.fakeserver import RunningServer, serve_fake
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.freeze_omni.fake import PATH, ServerProtocol

__all__ = ["start_server"]


async def start_server(
    behaviour_factory: Callable[[int], Behaviour],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Faults | None = None,
    max_users: int | None = None,
    ping_interval_s: float = 25.0,
    ping_timeout_s: float = 20.0,
) -> RunningServer:
    """Serve Freeze-Omni's events; each connection gets a fresh 16 kHz behaviour."""
    faults = faults or Faults()
    ids = itertools.count(1)
    users = 0

    def accept(request: Request) -> Session:
        nonlocal users
        full = max_users is not None and users >= max_users
        users += 0 if full else 1
        protocol = ServerProtocol(
            behaviour_factory,
            faults,
            sid=f"freeze-omni-{next(ids)}",
            full=full,
            ping_interval_s=ping_interval_s,
            ping_timeout_s=ping_timeout_s,
        )

        def ended() -> None:
            nonlocal users
            users -= 0 if full else 1

        return Session(Untimed(protocol.receive), protocol.open(request.path), ended=ended)

    fake = WebSocketFake(accept, path=PATH)
    return await serve_fake(fake, host=host, port=port, faults=faults)
