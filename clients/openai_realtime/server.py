"""The fake openai-realtime server at ``/v1/realtime``: a thin asyncio shell around ServerProtocol.

The handshake is checked before the upgrade, in this order: injected faults (``Faults.admit``),
the path (404), ``Authorization: Bearer <key>`` (401: missing, empty, or not ``api_key`` when one
is set; by default any non-empty key passes) and, when asked, ``?model=`` (400).
An ``OpenAI-Beta`` header is let through and answered like the real server answers it: an
``error`` event with code ``beta_api_shape_disabled``, then a close.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import ssl
from collections.abc import Callable
from urllib.parse import parse_qsl, urlsplit

from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from clients.behaviours import Behaviour
from clients.fakeserver import DelayedOutbox, RunningServer, carry_out, converse, serve_websockets
from clients.faults import Faults
from clients.openai_realtime.server_protocol import ServerProtocol
from clients.wsconn import WsConnection

__all__ = ["PATH", "start_server"]

PATH = "/v1/realtime"


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
    """Serve openai-realtime; each connection gets a fresh behaviour at the session's input rate.

    ``dialect`` "xai" mimics xAI's Grok voice agent; ``beta_names`` sends the retired beta event
    names (``response.audio.delta`` ...) to exercise a client's aliases. ``require_model``
    refuses a handshake without ``?model=`` (HTTP 400) as OpenAI does; off by default, since
    ``fake:`` profiles name no model. ``ssl_context`` serves wss://.
    """
    faults = faults or Faults()
    ids = itertools.count(1)
    ServerProtocol(behaviour_factory, dialect=dialect)  # a bad dialect fails here, not per client

    def check(connection: WsConnection, request: Request) -> Response | None:
        url = urlsplit(request.path)
        if url.path.rstrip("/") != PATH:
            return _refuse(connection, 404, "invalid_request_error", "not_found", "Not found.")
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip() or (api_key and token != api_key):
            message = "Incorrect or missing API key."  # never echo what was sent
            return _refuse(connection, 401, "invalid_request_error", "invalid_api_key", message)
        query = dict(parse_qsl(url.query))
        if require_model and not (query.get("model") or query.get("call_id")):
            message = "Missing required parameter: 'model'."
            return _refuse(connection, 400, "invalid_request_error", "missing_model", message)
        return None

    async def handler(ws: WsConnection) -> None:
        assert ws.request is not None
        protocol = ServerProtocol(
            behaviour_factory,
            faults,
            dialect=dialect,
            beta_names=beta_names,
            beta_header="OpenAI-Beta" in ws.request.headers,
            model=dict(parse_qsl(urlsplit(ws.request.path).query)).get("model"),
            session_id=f"sess_fake_{next(ids)}",
        )
        outbox = DelayedOutbox(ws, faults.extra_latency_s)
        try:
            with contextlib.suppress(ConnectionClosed):
                if await carry_out(ws, protocol.opening(), outbox):
                    return
                await converse(ws, protocol, outbox)
        finally:
            outbox.cancel()

    return await serve_websockets(
        handler,
        host=host,
        port=port,
        faults=faults,
        path=PATH,
        check=check,
        ssl_context=ssl_context,
    )


def _refuse(connection: WsConnection, status: int, kind: str, code: str, message: str) -> Response:
    body = json.dumps({"error": {"type": kind, "code": code, "message": message, "param": None}})
    response = connection.respond(status, body + "\n")
    del response.headers["Content-Type"]
    response.headers["Content-Type"] = "application/json"
    return response
