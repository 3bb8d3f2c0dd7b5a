"""The fake OpenAI-family server: ``fake.ServerProtocol`` served over WebSocket by the kit, in any
dialect.

It serves at the dialect's path (``/v1/realtime`` for OpenAI and xAI, ``/openai/v1/realtime`` for
Azure OpenAI, ``/openai/realtime`` for its preview API versions, ``/voice-live/realtime`` for Azure
Voice Live, ``/api-ws/v1/realtime`` for DashScope)
and checks the handshake before the upgrade, in this order: injected faults (``Faults.admit``),
the path (404), the key where the dialect sends it (401: missing, empty, or not ``api_key`` when
one is set; by default any non-empty key passes) and, when asked, the model (400)
(``fake.check_handshake``).
An ``OpenAI-Beta`` header is let through and answered like the real server answers it: an
``error`` event with code ``beta_api_shape_disabled``, then a close.
"""

from __future__ import annotations

import functools
import itertools
import ssl
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.declare import Request, Session, WebSocketFake, faults_then
from duplexsim.clients.fakekit.fakeserver import RunningServer, serve_fake
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.openai_realtime import dialects
from duplexsim.clients.openai_realtime.fake import ServerProtocol, check_handshake

__all__ = [
    "PATH",
    "start_azure",
    "start_azure_preview",
    "start_qwen",
    "start_server",
    "start_voice_live",
    "start_xai",
]

PATH = dialects.OPENAI.path


async def start_server(
    behaviour_factory: Callable[[int], Behaviour],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Faults | None = None,
    api_key: str | None = None,
    dialect: str = "openai",
    beta_names: bool = False,
    require_model: bool = False,
    ssl_context: ssl.SSLContext | None = None,
) -> RunningServer:
    """Serve one dialect (``dialects.DIALECTS``); each connection gets a fresh behaviour at the
    session's input rate.

    ``beta_names`` sends the retired beta event names (``response.audio.delta`` ...) to exercise
    a client's aliases (beta-shaped dialects always do). ``require_model`` refuses a handshake
    without the model (HTTP 400) as OpenAI does; off by default, since ``fake:`` profiles name
    no model. ``ssl_context`` serves wss://.
    """
    faults = faults or Faults()
    d = dialects.dialect(dialect)
    ids = itertools.count(1)

    def accept(request: Request) -> Session:
        protocol = ServerProtocol(
            behaviour_factory,
            faults,
            dialect=d,
            beta_names=beta_names,
            beta_header="OpenAI-Beta" in request.headers,
            model=dict(parse_qsl(urlsplit(request.path).query)).get(d.model_param),
            session_id=f"sess_fake_{next(ids)}",
        )
        return Session(protocol, protocol.opening())

    refuse = faults_then(functools.partial(check_handshake, d, api_key, require_model))
    fake = WebSocketFake(accept, path=d.path, refuse=refuse)
    return await serve_fake(fake, host=host, port=port, faults=faults, ssl_context=ssl_context)


def dialect_server(dialect: str) -> Callable[..., Awaitable[RunningServer]]:
    """``start_server`` for one dialect, as the registry names a fake per protocol."""
    dialects.dialect(dialect)  # a bad name fails here, not per connection

    async def start(behaviour_factory: Callable[[int], Behaviour], **kwargs: Any) -> RunningServer:
        return await start_server(behaviour_factory, dialect=dialect, **kwargs)

    return start


start_xai = dialect_server("xai")
start_azure = dialect_server("azure")
start_azure_preview = dialect_server("azure-preview")
start_voice_live = dialect_server("voice-live")
start_qwen = dialect_server("qwen")
