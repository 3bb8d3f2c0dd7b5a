"""Sessions end to end over real loopback WebSockets against the pcm-ws fake server."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from duplexsim.clients.base import ClientConfig
from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.pcm_ws.client import PcmWsClient
from duplexsim.clients.pcm_ws.server import start_server
from duplexsim.core.vad import VadConfig
from duplexsim.session.engine import SessionOutcome, run_session
from tests.helpers.sessions import QUICK_STALL as SETTINGS
from tests.helpers.sessions import context
from tests.helpers.virtualclock import run_virtual

RATE = 16000

EDGE = 10 ** (VadConfig().edge_dbfs / 20)  # the level that marks a speech edge


async def session(behaviour: str, *, faults: Faults | None = None, **params):
    server = await start_server(behaviour_factory(behaviour, **params), faults=faults)
    try:
        client = PcmWsClient(ClientConfig(url=server.url, connect_timeout_s=2.0))
        return await run_session(client, context(), SETTINGS)
    finally:
        await server.aclose()


@pytest.mark.parametrize("latency_s", [0.3, 0.8])
def test_delayed_echo_latency_is_recovered(latency_s):
    # on the virtual clock, where a loaded machine delays nothing; recovery in real time is
    # measured by bench/session_pacing.py and vouched for by each session's timing check
    out = run_virtual(session("delayed-echo", latency_s=latency_s, hangover_s=0.25))
    assert out.status == "ok", out.error
    assert out.end_reason in ("end-of-turn", "vad-hangover")
    assert out.timing.speech_end_s == pytest.approx(1.2, abs=0.005)
    assert out.timing.latency_s == pytest.approx(latency_s, abs=0.05)
    assert out.timing.overlap_s == 0.0
    assert out.send.frames == len(out.sent) // 320
    assert out.output.size / RATE >= out.sent.size / RATE
    kinds = {e["kind"] for e in out.events}
    assert {"start", "audio", "context_end", "reply_end", "end_of_turn"} <= kinds


def test_concurrent_sessions_each_recover_latency():
    async def main() -> list[SessionOutcome]:
        server = await start_server(
            behaviour_factory("delayed-echo", latency_s=0.5, hangover_s=0.25)
        )
        try:
            return await asyncio.gather(
                *(
                    run_session(PcmWsClient(ClientConfig(url=server.url)), context(), SETTINGS)
                    for _ in range(8)
                )
            )
        finally:
            await server.aclose()

    outs = run_virtual(main())  # eight sessions on one loop, none delayed by the machine
    latencies = [o.timing.latency_s for o in outs]
    assert all(o.status == "ok" for o in outs)
    assert max(abs(x - 0.5) for x in latencies) < 0.08


def test_silent_model_is_no_reply_not_failure():
    out = run_virtual(session("silent"))  # the sends as scheduled, however loaded the machine
    assert out.status == "no-reply" and out.end_reason == "no-reply" and out.error is None
    # the context is 1.3 s; the reply timeout is 1 s after it
    assert out.send.frames * 0.02 == pytest.approx(2.3, abs=0.1)


def test_barge_in_has_negative_latency_and_overlap():
    # on the virtual clock, exact to the sample however loaded the machine: the model starts
    # 0.4 s after the person's onset (as its own VAD found it, then its voice's fade-in) and
    # talks over the rest of their speech, which ends at 1.2 s
    out = run_virtual(session("barge-in", barge_after_s=0.4))
    assert out.status == "ok"
    heard = np.flatnonzero(np.abs(out.output) >= EDGE)[0] / RATE
    assert out.timing.onset_s == pytest.approx(heard, abs=1.5 / RATE)
    assert out.timing.speech_end_s == pytest.approx(1.2, abs=1.5 / RATE)
    assert out.timing.latency_s == pytest.approx(-0.6, abs=0.01)
    assert out.timing.overlap_s == pytest.approx(-out.timing.latency_s, abs=1e-9)


@pytest.mark.parametrize(
    ("faults", "reason", "retryable"),
    [
        (Faults(refuse_status=401), "auth", False),
        (Faults(refuse_status=503), "connect", True),
        (Faults(rate_limit_first=1, retry_after_s=0.2), "rate-limited", True),
        (Faults(close_after_s=0.5), "disconnected", True),
        (Faults(stall_after_s=0.5), "stalled", True),
        (Faults(malformed_after_s=0.5), "protocol", False),
    ],
)
async def test_server_faults_end_the_session_with_a_reason(faults, reason, retryable):
    loop = asyncio.get_running_loop()
    started = loop.time()
    out = await session("echo", faults=faults)
    assert out.status == "failed"
    assert out.end_reason == reason, out.error
    assert out.retryable is retryable
    assert out.error
    assert loop.time() - started < 5.0
    if reason == "rate-limited":
        assert out.retry_after_s == pytest.approx(0.2)


def test_an_empty_context_ends_the_turn_at_once():
    """Nothing to send: the turn is over at T0 (logged, and committed for manual-commit models).
    On the virtual clock: the session's own times, however loaded the machine."""

    async def main() -> SessionOutcome:
        server = await start_server(behaviour_factory("silent"))
        try:
            client = PcmWsClient(ClientConfig(url=server.url, connect_timeout_s=2.0))
            return await run_session(client, np.zeros(0, np.float32), SETTINGS)
        finally:
            await server.aclose()

    out = run_virtual(main())
    assert out.status == "no-reply" and out.error is None
    [end] = [e for e in out.events if e["kind"] == "context_end"]
    assert end["t"] < 0.05
    assert out.send.frames * 0.02 == pytest.approx(1.0, abs=0.1)  # just the reply timeout
