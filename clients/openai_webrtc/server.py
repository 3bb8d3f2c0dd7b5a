"""The openai-webrtc fake server: ``fake.ServerProtocol`` served by the kit's WebRTC transport,
one call per ``POST /v1/realtime/calls`` (``fake.refuse_call`` checks the key and the offer) and
the Realtime API's events on the ``oai-events`` data channel."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.declare import CallProtocol, WebRTCFake
from duplexsim.clients.fakekit.fakeserver import RunningServer, serve_fake
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.fakekit.rtcfake import CallServer
from duplexsim.clients.openai_webrtc import signaling
from duplexsim.clients.openai_webrtc.fake import ServerProtocol, read_offer, refuse_call
from duplexsim.clients.transport.rtc import RATE

__all__ = ["start_server"]


async def start_server(
    behaviour_factory: Callable[[int], Behaviour],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Faults | None = None,
    api_key: str | None = None,
    behaviour_rate: int = RATE,
) -> RunningServer:
    """Serve the WebRTC calls endpoint. With ``api_key`` every call must bring
    ``Authorization: Bearer <api_key>`` (else 401); without, any caller is let in."""
    faults = faults or Faults()
    fake = _declare(behaviour_factory, faults, api_key, behaviour_rate)
    return await serve_fake(fake, host=host, port=port, faults=faults)


def _declare(
    behaviour_factory: Callable[[int], Behaviour],
    faults: Faults,
    api_key: str | None,
    behaviour_rate: int,
) -> WebRTCFake:
    def call(call_id: str, session: dict[str, Any] | None) -> CallProtocol:
        return ServerProtocol(
            behaviour_factory, faults, rate=behaviour_rate, call_id=call_id, session=session
        )

    refuse = functools.partial(refuse_call, api_key)
    return WebRTCFake(
        signaling.CALLS_PATH,
        read_offer,
        call,
        channel="oai-events",
        refuse=refuse,
        rate=behaviour_rate,
        call_ids="rtc_test",
    )


class _FakeServer(CallServer):
    """This fake's calls for the given options, not listening: a call driven in process."""

    def __init__(
        self,
        behaviour_factory: Callable[[int], Behaviour],
        faults: Faults,
        api_key: str | None,
        behaviour_rate: int,
        host: str,
    ) -> None:
        super().__init__(_declare(behaviour_factory, faults, api_key, behaviour_rate), faults, host)
