"""Hostile servers of the newer protocols, in process: hume-evi's prosody scores, nova-sonic over
real HTTP/2 (refusal bodies, content blocks, ``:status`` and headers), and the opening errors of
hume-evi and freeze-omni. Each ends one session with a one-line reason, in bounded memory and
time; what a run keeps of an opening error is bounded too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from websockets.asyncio.server import ServerConnection, serve

from duplexsim.clients.base import ClientConfig
from duplexsim.clients.nova_sonic import events as nova_wire
from duplexsim.clients.nova_sonic.client import NovaSonicClient
from duplexsim.clients.transport.h2io import H2Peer, RequestReceived, response_head
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.errors import ProtocolError
from duplexsim.core.intake import (
    CONTENT_BLOCKS,
    ERROR_CHARS,
    SCORE_MESSAGES,
    SCORE_NAMES,
)
from duplexsim.core.retry import RetryPolicy
from duplexsim.profiles.profile import ModelProfile
from duplexsim.run.runner import RunOptions, execute_run
from duplexsim.session.engine import SessionOutcome, run_session
from tests.helpers.hostile_servers import KEY, SETTINGS, drain, hostile_server, session

BIG = 3_900_000  # characters of an opening error (under the 4 MiB WebSocket message limit)
MiB = 2**20


@contextlib.contextmanager
def peak_memory(limit_mib: float) -> Iterator[None]:
    """Python's peak allocation inside the block (server and client alike) stays under
    ``limit_mib``."""
    tracemalloc.start()
    try:
        yield
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < limit_mib * MiB, f"peak {peak / MiB:.1f} MiB"


def failed(out: SessionOutcome, reason: str, *words: str) -> None:
    assert (out.status, out.end_reason) == ("failed", reason), out.error
    assert out.error is not None and "\n" not in out.error, out.error
    for word in words:
        assert word in out.error, out.error


# --- hume-evi: prosody scores ---------------------------------------------------------------


def prosody(names: int, name_chars: int = 8) -> str:
    scores = {f"{i:0{name_chars}d}": 0.5 for i in range(names)}
    body = {"type": "assistant_prosody", "id": "m", "models": {"prosody": {"scores": scores}}}
    return json.dumps(body)


def repeating(message: str, times: int) -> Callable[[ServerConnection], Awaitable[None]]:
    async def script(ws: ServerConnection) -> None:
        with contextlib.suppress(Exception):
            for _ in range(times):
                await ws.send(message)

    return script


@pytest.mark.parametrize(
    ("message", "times", "words"),
    [
        (prosody(150_000), 1_000, f"150000 score names (more than {SCORE_NAMES})"),
        (prosody(SCORE_NAMES), 5 * SCORE_MESSAGES, "messages with scores"),
        (prosody(SCORE_NAMES, name_chars=20_000), 100, "characters"),
    ],
    ids=["names-per-message", "messages", "name-length"],
)
async def test_a_prosody_flood_fails_the_session_in_bounded_memory(
    message: str, times: int, words: str
) -> None:
    with peak_memory(80):
        async with hostile_server("hume-evi", repeating(message, times)) as url:
            out = await session("hume-evi", url)
    failed(out, "protocol", words, "flood")
    kept = [e for e in out.events if e["kind"] == "provider_emotion"]
    assert len(kept) <= SCORE_MESSAGES and all(len(e["scores"]) <= SCORE_NAMES for e in kept)


async def test_scores_within_the_bounds_are_all_recorded() -> None:
    script = repeating(prosody(48), 20)
    async with hostile_server("hume-evi", script) as url:
        out = await session("hume-evi", url)
    kept = [e for e in out.events if e["kind"] == "provider_emotion"]
    assert len(kept) == 20 and all(len(e["scores"]) == 48 for e in kept)


# --- opening errors: bounded wherever they are kept ---------------------------------------------


async def hume_opening_error(ws: ServerConnection) -> None:
    said = {"type": "error", "code": "E0100", "slug": "bad", "message": "y" * BIG}
    await ws.send(json.dumps(said))
    await drain(ws)


async def freeze_connect_error(ws: ServerConnection) -> None:
    opening = {"sid": "s", "upgrades": [], "pingInterval": 25000, "pingTimeout": 20000}
    await ws.send("0" + json.dumps(opening))
    await ws.recv()  # the client's Socket.IO connect
    await ws.send("44" + json.dumps({"message": "z" * BIG}))
    await drain(ws)


@asynccontextmanager
async def opening_server(
    handler: Callable[[ServerConnection], Awaitable[None]],
) -> AsyncIterator[str]:
    async with serve(handler, "127.0.0.1", 0, max_size=None) as server:
        yield f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"


@pytest.mark.parametrize(
    ("protocol", "handler", "words"),
    [
        ("hume-evi", hume_opening_error, "EVI error E0100 (bad): yyy"),
        ("freeze-omni", freeze_connect_error, "server refused the Socket.IO connection: zzz"),
    ],
)
async def test_an_opening_error_is_kept_cut_in_results_and_meta(
    protocol: str,
    handler: Callable[[ServerConnection], Awaitable[None]],
    words: str,
    tmp_path: Path,
    make_benchmark: Callable[..., Path],
) -> None:
    bench = load_benchmark(make_benchmark(n=1))
    async with opening_server(handler) as url:
        profile = ModelProfile(name="hostile", protocol=protocol, url=url)
        opts = RunOptions(
            "opening",
            tmp_path / "runs",
            settings=SETTINGS,
            quiet=True,
            retry=RetryPolicy(max_attempts=1),
        )
        [row] = await execute_run(bench, profile, opts)
    assert row.status == "failed" and row.error is not None
    assert words in row.error and f"(cut: {BIG + len(words) - 3:,}" in row.error
    assert len(row.error) < ERROR_CHARS + 100
    run = tmp_path / "runs" / "opening"
    with sqlite3.connect(run / "results.sqlite") as db:
        [(stored,)] = db.execute("SELECT error FROM results")
    assert stored == row.error
    for path in run.rglob("*"):
        if path.is_file():
            assert path.stat().st_size < 64 * 1024, path


# --- nova-sonic over HTTP/2 -------------------------------------------------------------------

Respond = Callable[[H2Peer, int], Awaitable[None]]


@asynccontextmanager
async def h2_server(respond: Respond) -> AsyncIterator[str]:
    """A Bedrock stand-in over cleartext HTTP/2 that runs ``respond`` on the first request. It
    sends headers as given (h2 would refuse to send a bad ``:status``)."""
    tasks: set[asyncio.Task[None]] = set()

    def connection() -> H2Peer:
        def on_events(events: list[Any], arrival: float) -> None:
            for ev in events:
                if isinstance(ev, RequestReceived) and not tasks:
                    tasks.add(asyncio.create_task(respond(peer, ev.stream_id)))

        peer = H2Peer(client_side=False, on_events=on_events, clock=time.monotonic)
        config = H2Configuration(
            client_side=False,
            header_encoding="utf-8",
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
        )
        peer.conn = H2Connection(config)
        return peer

    loop = asyncio.get_running_loop()
    server = await loop.create_server(connection, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        for task in tasks:
            task.cancel()
        server.close()
        await server.wait_closed()


def answering(*headers: tuple[str | bytes, str | bytes]) -> Respond:
    async def respond(peer: H2Peer, stream: int) -> None:
        peer.conn.send_headers(stream, list(headers))
        peer.flush()

    return respond


async def streaming(peer: H2Peer, stream: int, chunk: Callable[[int], bytes]) -> None:
    """``chunk(i)`` for i = 0, 1, ... as fast as the client reads them, a few MiB queued."""
    i = 0
    while peer.transport is not None and not peer.transport.is_closing():
        peer.send(stream, chunk(i))
        i += 1
        while peer.queued(stream) > 4 * MiB and not peer.transport.is_closing():
            await asyncio.sleep(0.001)
        if i % 64 == 0:
            await asyncio.sleep(0)


def refusing_forever(status: str = "403") -> Respond:
    async def respond(peer: H2Peer, stream: int) -> None:
        kind = ("x-amzn-errortype", "AccessDeniedException")
        peer.conn.send_headers(stream, [(":status", status), kind])
        block = b'{"message": "' + b"r" * MiB
        await streaming(peer, stream, lambda i: block)

    return respond


def events_forever(event: Callable[[int], dict[str, Any]]) -> Respond:
    async def respond(peer: H2Peer, stream: int) -> None:
        peer.conn.send_headers(stream, [(":status", "200")])
        await streaming(peer, stream, lambda i: nova_wire.chunk(event(i)))

    return respond


def content_start(content_id: str) -> dict[str, Any]:
    body = {"contentId": content_id, "type": "TEXT", "role": "ASSISTANT"}
    return nova_wire.event("contentStart", body)


async def nova_session(url: str, monkeypatch: pytest.MonkeyPatch) -> SessionOutcome:
    """A session whose asyncio loop reports no exception (what would print a traceback)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    client = NovaSonicClient(ClientConfig(url=url, api_key=KEY, connect_timeout_s=10.0))
    try:
        out = await run_session(client, np.zeros(16000, np.float32), SETTINGS)
    finally:
        loop.set_exception_handler(None)
    assert not reported, reported
    return out


@pytest.mark.parametrize("status", ["abc", "9" * 5000, "", "２００", "099", "1e3", "-200", "600"])
async def test_a_bad_status_is_a_protocol_error_at_once(
    status: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = time.monotonic()
    async with h2_server(answering((":status", status))) as url:
        out = await nova_session(url, monkeypatch)
    failed(out, "protocol", ":status")
    assert len(out.error or "") < 200 and time.monotonic() - started < 3.0


async def test_a_header_that_is_not_utf8_is_a_protocol_error_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = time.monotonic()
    async with h2_server(answering((b":status", b"200"), (b"x-a", b"\xff\xfe"))) as url:
        out = await nova_session(url, monkeypatch)
    failed(out, "protocol", "bad HTTP/2")
    assert time.monotonic() - started < 3.0


async def test_an_endless_refusal_keeps_only_the_start_of_its_body(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = time.monotonic()
    with peak_memory(40):
        async with h2_server(refusing_forever()) as url:
            out = await nova_session(url, monkeypatch)
    failed(out, "auth", "HTTP 403", "AccessDeniedException", "rrr")
    assert time.monotonic() - started < 3.0


async def test_a_flood_of_content_blocks_fails_the_session_in_bounded_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pad = "c" * 200  # ids as long as allowed, all different
    with peak_memory(40):
        async with h2_server(events_forever(lambda i: content_start(f"{pad}{i}"))) as url:
            out = await nova_session(url, monkeypatch)
    failed(out, "protocol", f"more than {CONTENT_BLOCKS} content blocks", "flood")


async def test_a_content_id_longer_than_any_uuid_is_a_protocol_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with h2_server(events_forever(lambda i: content_start("c" * 10_000))) as url:
        out = await nova_session(url, monkeypatch)
    failed(out, "protocol", "contentId of 10000 characters")


def test_response_head_takes_three_digits_of_a_final_response_only() -> None:
    assert response_head([(":status", "200"), ("X-Amzn-ErrorType", "E")]) == (
        200,
        {":status": "200", "x-amzn-errortype": "E"},
    )
    for status in ("404", "599"):
        assert response_head([(":status", status)])[0] == int(status)
    assert response_head([(":status", "103")], informational=True)[0] == 103
    for bad in ("1e3", "1", "1000", "200"):
        with pytest.raises(ProtocolError, match=":status"):
            response_head([(":status", bad)], informational=True)
    for bad in ("abc", "9" * 5000, "", "100", "600", "20", "2000", "٢٠٠", " 200"):
        with pytest.raises(ProtocolError, match=":status"):
            response_head([(":status", bad)])
    with pytest.raises(ProtocolError, match=r"'99999999999999999999'\.\.\."):
        response_head([(":status", "9" * 5000)])
