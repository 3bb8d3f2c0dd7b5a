"""The event loop paced commands run on: microsecond timeouts, the same readiness as epoll."""

from __future__ import annotations

import asyncio
import socket
import time

import numpy as np
import pytest

from duplexsim.clients.base import ClientConfig
from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.pcm_ws.client import PcmWsClient
from duplexsim.clients.pcm_ws.server import start_server
from duplexsim.core.timeline import Schedule
from duplexsim.session import eventloop
from duplexsim.session.engine import run_session
from tests.helpers.sessions import QUICK_STALL as SETTINGS
from tests.helpers.sessions import context
from tests.helpers.timing import assert_latency

pytestmark = pytest.mark.skipif(eventloop.FineTimeoutSelector is None, reason="epoll is Linux only")


@pytest.fixture
def selector():
    sel = eventloop.FineTimeoutSelector()
    yield sel
    sel.close()


def test_a_ready_socket_is_returned_at_once(selector):
    a, b = socket.socketpair()
    with a, b:
        key = selector.register(a, eventloop.selectors.EVENT_READ, "data")
        b.send(b"x")
        t = time.monotonic()
        ready = selector.select(5.0)
        assert time.monotonic() - t < 1.0
        assert [(k.fileobj, k.data, ev) for k, ev in ready] == [(a, "data", key.events)]


def test_nothing_ready_waits_the_timeout_and_returns_nothing(selector):
    a, b = socket.socketpair()
    with a, b:
        selector.register(a, eventloop.selectors.EVENT_READ)
        for timeout in (0.0003, 0.002):
            t = time.monotonic()
            assert selector.select(timeout) == []
            assert time.monotonic() - t >= timeout - 5e-5
        assert selector.select(0) == []


def test_a_socket_that_becomes_ready_during_the_wait_ends_it():
    loop = eventloop.new_event_loop()
    try:
        a, b = socket.socketpair()
        with a, b:
            a.setblocking(False)
            got: list[bytes] = []
            done = loop.create_future()
            loop.add_reader(a, lambda: (got.append(a.recv(10)), done.set_result(None)))
            loop.call_later(0.05, b.send, b"late")
            loop.run_until_complete(asyncio.wait_for(done, 5.0))
            assert got == [b"late"]
            loop.remove_reader(a)
    finally:
        loop.close()


def test_timers_fire_in_order_and_never_early():
    async def main() -> list[tuple[int, float, float]]:
        loop = asyncio.get_running_loop()
        fired: list[tuple[int, float, float]] = []
        t0 = loop.time()
        due = [t0 + d for d in (0.0042, 0.0011, 0.0007, 0.0093, 0.0031)]
        done = loop.create_future()

        def fire(i: int) -> None:
            fired.append((i, due[i], loop.time()))
            if len(fired) == len(due):
                done.set_result(None)

        for i, when in enumerate(due):
            loop.call_at(when, fire, i)
        await done
        return fired

    fired = eventloop.run(main())
    assert [i for i, _, _ in fired] == [2, 1, 4, 0, 3]
    assert all(at >= when - 1e-6 for _, when, at in fired)


def test_a_session_on_the_loop_recovers_latency():
    async def main():
        server = await start_server(
            behaviour_factory("delayed-echo", latency_s=0.3, hangover_s=0.25)
        )
        try:
            client = PcmWsClient(ClientConfig(url=server.url, connect_timeout_s=2.0))
            return await run_session(client, context(), SETTINGS)
        finally:
            await server.aclose()

    out = eventloop.run(main())  # its stalls logged: the session accounts for them
    assert out.status == "ok", out.error
    assert_latency(out, 0.3, 0.05)
    assert out.send.frames == len(out.sent) // 320


def test_sessions_start_on_whole_ticks():
    assert Schedule.start(12.3450001) == pytest.approx(12.346, abs=1e-9)
    assert Schedule.start(7.0) == pytest.approx(7.0, abs=1e-9)
    assert Schedule.start(0.0) == 0.0
    for k in range(1, 5000):  # readings on a whole tick stay there
        assert Schedule.start(k / 1000) == pytest.approx(k / 1000, abs=1e-12)
    for now in np.random.default_rng(0).uniform(0, 1e5, 1000):
        t0 = Schedule.start(float(now))
        assert now <= t0 + 1e-9 < now + 0.001 + 1e-9
        assert abs(t0 * 1000 - round(t0 * 1000)) < 1e-6
