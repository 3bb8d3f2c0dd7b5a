"""The WebSocket shell (clients/wsconn.py, clients/wsopen.py): websockets' sans-I/O protocol over
our own asyncio protocol, checked against websockets' own asyncio peers and against itself."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.asyncio.server import ServerConnection
from websockets.asyncio.server import serve as ws_serve
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.protocol import State

from duplexsim.clients.transport.wsconn import KEEPALIVE_TIMEOUT, READ_BUFFER, WsConnection
from duplexsim.clients.transport.wsopen import connect, serve
from duplexsim.core.errors import ProtocolError
from tests.helpers.tls import self_signed_tls
from tests.helpers.waits import async_wait_until


async def test_send_writes_in_order_and_reports_a_closed_connection() -> None:
    """The per-frame send path writes straight to the socket; order and types are kept, and
    once the peer has closed, sending raises ConnectionClosed as websockets' send does."""
    got: list[str | bytes] = []
    done = asyncio.Event()

    async def sink(ws: ServerConnection) -> None:
        async for message in ws:
            got.append(message)
            if len(got) == 200:
                done.set()
                await ws.close()

    async with ws_serve(sink, "127.0.0.1", 0, compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        ws = await connect(f"ws://127.0.0.1:{port}")
        sent = [f"m{i}" if i % 2 else bytes([i % 256]) * 640 for i in range(200)]
        for message in sent:
            assert ws.try_write(message) or await ws.send(message) is None
        await asyncio.wait_for(done.wait(), 5.0)
        assert got == sent
        with pytest.raises(ConnectionClosed):
            for _ in range(100):
                await ws.send(b"late")
                await asyncio.sleep(0.01)
        assert ws.close_exc.rcvd is not None and ws.close_exc.rcvd.code == 1000


async def test_inbox_reassembles_fragments_stamps_reads_and_reports_the_close() -> None:
    """Fragmented messages come out whole, text as str (or bytes with decode=False), ``take``
    never waits, a text message that is not UTF-8 is a ProtocolError that loses none before it,
    and once closed and drained the connection is ``finished``."""
    go = asyncio.Event()

    async def talker(ws: ServerConnection) -> None:
        await ws.recv()
        await ws.send([b"ab", b"cd", b"ef"])  # one binary message in three frames
        await ws.send(["hé", "llo"])
        await ws.send(b"\x01" * 640)
        await go.wait()
        ws.protocol.send_text(b"fine")
        ws.protocol.send_text(b"\xff\xfe")  # not UTF-8: websockets' send would refuse it
        ws.send_data()
        await ws.close(1000)

    ticks = iter(range(1000))
    async with ws_serve(talker, "127.0.0.1", 0, compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        ws = await connect(f"ws://127.0.0.1:{port}", clock=lambda: float(next(ticks)))
        assert ws.take() == []  # nothing yet, and no waiting
        waiting = asyncio.create_task(ws.recv())
        await asyncio.sleep(0)
        with pytest.raises(RuntimeError, match="already waiting"):
            await ws.recv()  # one reader at a time, as with websockets' own recv
        await ws.send("start")
        assert await waiting == b"abcdef"
        assert await ws.recv(decode=False) == "héllo".encode()
        before = ws.last_arrival
        while not (taken := ws.take()):
            await asyncio.sleep(0.01)
        [(message, size, arrival)] = taken
        assert message == b"\x01" * 640 and size == 640
        assert arrival >= before  # the stamp of the read that carried it
        mark = next(ticks)
        go.set()
        while not (taken := ws.take()):
            await asyncio.sleep(0.01)
        assert [m for m, _, _ in taken] == ["fine"]  # the good one is not lost
        with pytest.raises(ProtocolError, match="UTF-8"):
            while not ws.take():
                await asyncio.sleep(0.01)
        assert ws.last_arrival > mark  # the refused message's own read stamp
        await ws.wait_closed()
        assert ws.finished
        with pytest.raises(ConnectionClosed):
            await ws.recv()


async def test_a_full_inbox_stops_reading_until_it_is_drained() -> None:
    """Backpressure, not an unbounded queue: past the high-water mark the connection stops
    reading (the peer's writes back up), and taking messages lets it read again; nothing is
    lost or reordered."""
    chunk = bytes(64 * 1024)
    count = 160  # 10 MiB: more than loopback socket buffers hold
    sent = asyncio.Event()
    peers: list[ServerConnection] = []

    async def flood(ws: ServerConnection) -> None:
        peers.append(ws)
        for i in range(count):
            await ws.send(bytes([i]) + chunk)
        sent.set()
        await ws.wait_closed()

    async with ws_serve(flood, "127.0.0.1", 0, compression=None, max_size=None) as server:
        port = server.sockets[0].getsockname()[1]
        ws = await connect(f"ws://127.0.0.1:{port}", inbox_high=256 * 1024)
        await async_wait_until(
            lambda: (
                bool(peers)
                and ws._reading_paused
                and peers[0].transport.get_write_buffer_size() > 0
            ),
            what="a full inbox, and the server's writes backing up",
        )
        assert not sent.is_set()  # the server is held back: its sends wait on the socket
        held = ws._inbox.size
        assert 256 * 1024 <= held < 256 * 1024 + READ_BUFFER + len(chunk) + 1
        got: list[bytes] = []
        async with asyncio.timeout(10):
            while len(got) < count:
                got += [m for m, _, _ in ws.take()]
                await asyncio.sleep(0.01)
        assert [m[0] for m in got] == list(range(count))
        await asyncio.wait_for(sent.wait(), 5)
        await ws.close()


async def test_refused_upgrade_raises_invalid_status_with_the_response() -> None:
    async def never(ws: WsConnection) -> None:
        raise AssertionError("not upgraded")

    server = await serve(never, "127.0.0.1", 0, check=lambda c, r: c.respond(429, "slow down\n"))
    try:
        with pytest.raises(InvalidStatus) as refused:
            await connect(f"ws://127.0.0.1:{server.port}/x")
        assert refused.value.response.status_code == 429
        assert refused.value.response.body == b"slow down\n"
    finally:
        await server.aclose()


async def test_server_speaks_to_websockets_own_client_and_closes_it_on_shutdown() -> None:
    """Our server with websockets' asyncio client as the peer: echo, then a server shutdown
    closes the open connection with 1001 (going away)."""

    async def echo(ws: WsConnection) -> None:
        while True:
            await ws.send(await ws.recv())

    server = await serve(echo, "127.0.0.1", 0)
    async with ws_connect(f"ws://127.0.0.1:{server.port}", compression=None) as ws:
        await ws.send("hello")
        assert await ws.recv() == "hello"
        await server.aclose()
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001


async def test_keepalive_fails_a_peer_that_stops_answering_pings() -> None:
    """A peer that answers pings keeps the connection; one that stops reading is failed with
    1011 "keepalive ping timeout" within a ping interval and a ping timeout."""
    hang = asyncio.Event()

    async def peer(ws: ServerConnection) -> None:
        await hang.wait()
        ws.transport.pause_reading()  # no more pongs: it reads nothing
        await ws.wait_closed()

    # a peer that reads nothing never sees the connection go: close_timeout ends its side
    async with ws_serve(
        peer, "127.0.0.1", 0, compression=None, ping_interval=None, close_timeout=0.1
    ) as server:
        port = server.sockets[0].getsockname()[1]
        ws = await connect(f"ws://127.0.0.1:{port}", ping_interval=0.05, ping_timeout=0.2)
        await asyncio.sleep(0.6)  # a dozen pings, all answered
        assert ws.take() == [] and not ws.finished
        hang.set()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 5)
        assert loop.time() - t0 < 0.05 + 0.2 + 0.2
        assert closed.value.rcvd is None
        assert closed.value.sent is not None and closed.value.sent.reason == KEEPALIVE_TIMEOUT


async def test_a_peer_that_keeps_sending_is_alive_though_its_pongs_lag() -> None:
    """Bytes heard since a ping count as a sign of life: a peer whose pongs sit behind what it
    keeps sending (a flood, a busy loop) is not failed as hung; once it falls silent, it is."""
    silent = asyncio.Event()

    async def peer(ws: ServerConnection) -> None:
        ws.transport.pause_reading()  # never reads our pings: no pong ever comes
        while not silent.is_set():
            await ws.send(b"x" * 64)
            await asyncio.sleep(0.01)
        await ws.wait_closed()

    async with ws_serve(
        peer, "127.0.0.1", 0, compression=None, ping_interval=None, close_timeout=0.1
    ) as server:
        port = server.sockets[0].getsockname()[1]
        ws = await connect(f"ws://127.0.0.1:{port}", ping_interval=0.05, ping_timeout=0.2)
        await asyncio.sleep(0.8)  # four ping timeouts without a pong, data all along
        assert ws.protocol.state is State.OPEN and len(ws.take()) > 20
        silent.set()
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                await asyncio.wait_for(ws.recv(), 5)
        assert closed.value.sent is not None and closed.value.sent.reason == KEEPALIVE_TIMEOUT


@pytest.mark.parametrize("tls", [False, True], ids=["ws", "wss"])
async def test_messages_of_every_size_arrive_whole_over_tcp_and_tls(tls: bool, tmp_path) -> None:
    """Reads go through one shared buffer, plain and under TLS: messages of every size, larger
    than the buffer too, arrive whole and in order on both ends (our client and our server)."""
    server_tls, client_tls = self_signed_tls(tmp_path) if tls else (None, None)
    rng = np.random.default_rng(7)
    sizes = [1, 640, 70_000, READ_BUFFER + 12_345, 3 * READ_BUFFER, 5]
    payloads = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes]

    async def echo(ws: WsConnection) -> None:
        for _ in payloads:
            await ws.send(await ws.recv())

    server = await serve(echo, "127.0.0.1", 0, max_size=None, ssl_context=server_tls)
    try:
        scheme = "wss" if tls else "ws"
        ws = await connect(
            f"{scheme}://127.0.0.1:{server.port}", max_size=None, ssl_context=client_tls
        )
        for payload in payloads:
            await ws.send(payload)
        got = [await asyncio.wait_for(ws.recv(), 10) for _ in payloads]
        await ws.close()
    finally:
        await server.aclose()
    assert [len(g) for g in got] == sizes
    assert got == payloads
