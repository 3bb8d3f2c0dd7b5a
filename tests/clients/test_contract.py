"""One contract, every client: each protocol's client against its own fake server.

The same reference behaviours and injected faults go through every wire protocol, so a client
that maps an error, a pause or a reply differently from the others shows up here.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from duplexsim.clients.base import ClientConfig
from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.registry import (
    client_class,
    client_protocols,
    fake_server_factory,
    server_protocols,
)
from duplexsim.clients.transport.wsclient import WebSocketClient
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.retry import RetryPolicy
from duplexsim.profiles.profile import ModelProfile
from duplexsim.run.runner import RunOptions, execute_run
from duplexsim.session import eventloop
from duplexsim.session.engine import run_session
from tests.helpers.runs import short_benchmark
from tests.helpers.sessions import context, settings, synthetic
from tests.helpers.timing import LENIENT, assert_latency
from tests.helpers.virtualclock import run_virtual

PROTOCOLS = sorted(set(client_protocols()) & set(server_protocols()))
# a hung server is found by WebSocket pings; over WebRTC the media stack keeps running around a
# hung model (RTP, RTCP, ICE consent), and a hang reads as no reply
WS_PROTOCOLS = [p for p in PROTOCOLS if issubclass(client_class(p), WebSocketClient)]
SETTINGS = settings(
    reply_timeout_s=1.2,
    stall_timeout_s=1.0,
    deadline_margin_s=3.0,
    budget=LENIENT,  # retries and replies are under test here, not this machine's pacing
)
KEY = "contract-test-key"
RATE = 16000


async def session(protocol: str, behaviour: str, faults: Faults | None = None, **params):
    start = fake_server_factory(protocol)
    server = await start(behaviour_factory(behaviour, **params), faults=faults)
    try:
        client = client_class(protocol)(
            ClientConfig(url=server.url, api_key=KEY, connect_timeout_s=5.0)
        )
        return await run_session(client, context(1.2, voice=synthetic), SETTINGS)
    finally:
        await server.aclose()


def test_every_protocol_has_a_fake():
    assert set(client_protocols()) - set(server_protocols()) == {"replay"}
    assert {"pcm-ws", "moshi"} <= set(PROTOCOLS)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_echo_replies_and_silent_does_not(protocol):
    echo, silent = await asyncio.gather(
        session(protocol, "echo", hangover_s=0.3), session(protocol, "silent")
    )
    assert echo.status == "ok", echo.error
    assert echo.timing.duration_s > 0.5 and echo.timing.latency_s > 0
    assert echo.bytes_sent > 0 and echo.bytes_received > 0
    assert silent.status == "no-reply" and silent.error is None


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_injected_latency_is_recovered(protocol):
    # on the loop a run uses, which logs its stalls: the session says what a loaded machine may
    # have added, and no more is allowed (exact figures per protocol come from bench/)
    out = eventloop.run(session(protocol, "delayed-echo", latency_s=0.6, hangover_s=0.25))
    assert out.status == "ok", out.error
    assert_latency(out, 0.6, 0.06)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_bad_key_is_a_clear_non_retryable_error(protocol):
    out = await session(protocol, "echo", Faults(refuse_status=401))
    assert (out.status, out.end_reason, out.retryable) == ("failed", "auth", False)
    assert KEY not in (out.error or "")
    assert all(KEY not in str(e) for e in out.events)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_malformed_server_message_ends_the_session_with_a_reason(protocol):
    out = await session(protocol, "echo", Faults(malformed_after_s=0.4))
    assert out.status == "failed"
    assert out.end_reason == "protocol", out.error
    assert out.error


@pytest.mark.parametrize("protocol", WS_PROTOCOLS)
async def test_a_server_that_hangs_mid_turn_fails_the_session_as_stalled(protocol):
    # continuous protocols fall silent on the wire; the others stop answering pings: either
    # way a hung server is a retryable failure, not a model that chose not to reply
    out = await session(protocol, "silent", Faults(stall_after_s=0.3))
    assert (out.status, out.end_reason, out.retryable) == ("failed", "stalled", True), out.error
    assert "1.0 s (stalled)" in out.error
    # found within 1.5 stall timeouts (1 s) of the hang (0.3 s in), before the reply timeout
    # would have ended it as no reply (context 1.5 s + 1.2 s)
    last_send = max(e["t"] for e in out.events if e["dir"] == "send")
    assert 0.3 < last_send < 0.3 + 1.5 + 0.2


async def _run(tmp_path: Path, protocol: str, faults: Faults, retry: RetryPolicy):
    bench = load_benchmark(short_benchmark(tmp_path / "b", 1))
    start = fake_server_factory(protocol)
    server = await start(behaviour_factory("echo", hangover_s=0.3), faults=faults)
    try:
        profile = ModelProfile(
            name=f"contract-{protocol}",
            protocol=protocol,
            url=server.url,
            api_key_env="DUPLEXSIM_CONTRACT_KEY",
        )
        opts = RunOptions(
            run_id="c", runs_dir=tmp_path / "runs", settings=SETTINGS, retry=retry, quiet=True
        )
        (row,) = await execute_run(bench, profile, opts)
        return row
    finally:
        await server.aclose()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_rate_limit_is_retried_after_the_servers_delay(protocol, tmp_path, monkeypatch):
    monkeypatch.setenv("DUPLEXSIM_CONTRACT_KEY", KEY)
    loop = asyncio.get_running_loop()
    started = loop.time()
    row = await _run(
        tmp_path,
        protocol,
        Faults(rate_limit_first=1, retry_after_s=0.5),
        RetryPolicy(max_attempts=3, base_s=0.0, jitter=0.0),
    )
    # a refusal for the rate limits is no attempt: the run waits, then the sample starts again
    assert (row.status, row.attempts, row.rate_limited) == ("ok", 1, 1), row.error
    assert loop.time() - started >= 0.5  # waited as long as the server asked
    assert row.provider_wait_s is not None and row.provider_wait_s >= 0.5


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_server_closing_mid_turn_is_retried(protocol, tmp_path, monkeypatch):
    monkeypatch.setenv("DUPLEXSIM_CONTRACT_KEY", KEY)
    row = await _run(
        tmp_path,
        protocol,
        Faults(close_after_s=0.5),
        RetryPolicy(max_attempts=2, base_s=0.05, jitter=0.0),
    )
    assert (row.status, row.attempts) == ("failed", 2)
    assert row.end_reason == "disconnected", row.error


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_pre_encoded_frames_are_the_messages_send_audio_sends(protocol, monkeypatch):
    """A client that encodes fixed input ahead of time puts exactly what send_audio would on
    the wire, frame for frame (silence included); one whose encoding has state says so."""
    from duplexsim.clients.transport.wsclient import WebSocketClient

    cls = client_class(protocol)
    rate = cls(ClientConfig(url="ws://127.0.0.1:9")).capabilities.input_rate
    n = rate // 50
    frames = np.vstack(
        (np.resize(context(1.2, voice=synthetic), (6, n)) * 1.7, np.zeros((1, n), np.float32))
    )

    # one client for both ways: a client may name its session (nova-sonic's prompt name)
    client = cls(ClientConfig(url="ws://127.0.0.1:9"))

    async def sent_by(use_encoded: bool) -> list[str | bytes] | None:
        encoded = client.encode_audio(frames)
        if use_encoded and encoded is None:
            return None
        got: list[str | bytes] = []

        async def record(self, message):
            got.append(message)

        # what goes on the wire: a WebSocket message, or what another transport is handed
        if issubclass(cls, WebSocketClient):
            monkeypatch.setattr(WebSocketClient, "send_message", record)
        else:
            monkeypatch.setattr(cls, "send_encoded", record)
        for i, row in enumerate(frames):
            if use_encoded:
                await client.send_encoded(encoded[i])
            else:
                await client.send_audio(row)
        return got

    if (
        not issubclass(cls, WebSocketClient)
        and cls(ClientConfig(url="ws://127.0.0.1:9")).encode_audio(frames) is None
    ):
        return  # frames go out as media (RTP): nothing is encoded ahead
    encoded = await sent_by(True)
    if encoded is None:
        assert protocol == "moshi"  # Opus keeps state from frame to frame
        return
    assert encoded == await sent_by(False)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_pre_encoded_context_is_left_alone_by_the_garbage_collector(protocol):
    """The pre-encoded context (hundreds of messages per session) must not be walked by every
    collection while sessions stream: a list of them cost 7-12 ms per young collection at 100
    sessions, a stall of every session."""
    import gc

    from duplexsim.session.useraudio import FixedContext

    client = client_class(protocol)(ClientConfig(url="ws://127.0.0.1:9"))
    s = FixedContext(context(1.2, voice=synthetic))
    caps = client.capabilities
    await s.prepare(client, caps.input_rate, caps.input_rate * caps.frame_ms // 1000)
    if not s.encoded:
        assert client.encode_audio(s.frames[:1]) is None  # a client that encodes per frame
        return
    assert len(s.encoded) == len(s.frames)
    gc.collect()
    assert not gc.is_tracked(s.encoded)


@pytest.mark.parametrize("protocol", WS_PROTOCOLS)
def test_polled_and_streamed_events_give_the_same_session(protocol, monkeypatch):
    """Draining a client's events once per frame (the session's default where the client can)
    and consuming them in a task of their own give the same reply, timing and bytes: exactly,
    on the virtual clock (real loopback sockets; time moves only when every task waits), where
    a loaded machine moves neither session's arrivals."""
    polled = run_virtual(session(protocol, "delayed-echo", latency_s=0.4, hangover_s=0.25))
    monkeypatch.setattr(WebSocketClient, "pollable", False)
    streamed = run_virtual(session(protocol, "delayed-echo", latency_s=0.4, hangover_s=0.25))
    for out in (polled, streamed):
        assert out.status == "ok", out.error
        assert out.timing.latency_s == pytest.approx(0.4, abs=0.015)  # Opus adds 12.4 ms
    assert (polled.end_reason, polled.bytes_sent) == (streamed.end_reason, streamed.bytes_sent)
    assert polled.timing == streamed.timing


@pytest.mark.parametrize("pollable", [True, False], ids=["polled", "streamed"])
async def test_a_server_closing_after_its_reply_ends_the_session_well(pollable, monkeypatch):
    """A server that echoes, then closes normally while the session still streams silence:
    the session is ok with reason server-closed, whether its events are polled or streamed
    (a polled session learns of the close from its next send); the reply is whole, not cut."""
    from websockets.asyncio.server import ServerConnection, serve

    from duplexsim.clients.pcm_ws import events as wire
    from duplexsim.clients.pcm_ws.client import PcmWsClient
    from duplexsim.clients.transport.wsclient import WebSocketClient

    async def echo_then_close(ws: ServerConnection) -> None:
        await ws.recv()
        await ws.send(wire.encode(wire.HelloAck(RATE, "s1")))
        n = 0
        async for message in ws:
            n += 1
            await ws.send(message)
            if n == 80:  # 1.6 s: the echoed speech (0.2-1.4 s) is out
                await ws.close(1000, "done")
                return

    monkeypatch.setattr(WebSocketClient, "pollable", pollable)
    async with serve(echo_then_close, "127.0.0.1", 0, compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        client = PcmWsClient(ClientConfig(url=f"ws://127.0.0.1:{port}", connect_timeout_s=5.0))
        out = await run_session(client, context(1.2, voice=synthetic), SETTINGS)
    assert out.status == "ok" and out.end_reason == "server-closed", out.error
    assert out.error is None and out.truncated is None
