"""The moshi fake server: ``fake.ServerProtocol`` served over WebSocket by the kit.

It serves ``/api/chat`` only and records each connection's query parameters. ``flavour`` picks the
server it imitates (``duplexsim.clients.moshi.fake.FLAVOURS``: "moshi", the Python server; "rust", with
its 9-byte handshake, metadata and 40 ms packets; "personaplex", which needs ``text_prompt`` and a
known ``voice_prompt``). ``exclusive`` takes the real servers' global lock (one conversation at a
time, later clients wait for their handshake); ``handshake_delay_s`` stands for PersonaPlex's
system prompts, run before the handshake.

Unlike the hosted services' fakes, this one is paced by its input, as the real servers are: they
make one output frame for each input frame heard (kyutai's ``moshi/server.py`` receive loop), so a
client that stops sending stops the model.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qsl, urlsplit

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.declare import Request, Session, Untimed, WebSocketFake
from duplexsim.clients.fakekit.fakeserver import RunningServer, serve_fake
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.moshi.fake import FLAVOURS, Flavour, ServerProtocol
from duplexsim.clients.moshi.protocol import CHAT_PATH
from duplexsim.core.errors import ConfigError

__all__ = ["MoshiServer", "start_server"]


class MoshiServer(RunningServer):
    """A running fake with the query parameters of every connection it accepted, in order."""

    def __init__(self, running: RunningServer, queries: list[dict[str, str]]) -> None:
        super().__init__(running.host, running.port, running.url, running.aclose)
        self.queries = queries

    async def __aenter__(self) -> MoshiServer:
        return self


async def start_server(
    behaviour_factory: Callable[[int], Behaviour],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Faults | None = None,
    flavour: str | Flavour = "moshi",
    exclusive: bool = False,
    handshake_delay_s: float = 0.0,
) -> MoshiServer:
    """Serve moshi's /api/chat; each connection gets a fresh behaviour at 24 kHz."""
    faults = faults or Faults()
    kind = _flavour(flavour)
    queries: list[dict[str, str]] = []

    def accept(request: Request) -> Session:
        target = urlsplit(request.path)
        if target.path.rstrip("/") != CHAT_PATH:
            return Session.turned_away(
                1008, f"no route {target.path[:60]!r}: this server serves {CHAT_PATH}"
            )
        query = dict(parse_qsl(target.query, keep_blank_values=True))
        queries.append(query)
        protocol = ServerProtocol(behaviour_factory, faults, flavour=kind, query=query)
        return Session(Untimed(protocol.receive), protocol.open())

    fake = WebSocketFake(accept, exclusive=exclusive, opening_delay_s=handshake_delay_s)
    running = await serve_fake(fake, host=host, port=port, faults=faults)
    return MoshiServer(running, queries)


def _flavour(flavour: str | Flavour) -> Flavour:
    if isinstance(flavour, Flavour):
        return flavour
    try:
        return FLAVOURS[flavour]
    except KeyError:
        known = ", ".join(FLAVOURS)
        raise ConfigError(f"unknown moshi flavour '{flavour}' (known: {known})") from None
