"""Hostile model servers, in process: garbage, floods and echoed keys end one session with a
reason; the run goes on, nothing grows without bound, and no key reaches a file."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from duplexsim.clients.moshi import events as moshi_wire
from duplexsim.clients.registry import client_class
from duplexsim.core import intake
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.retry import RetryPolicy
from duplexsim.profiles.profile import ModelProfile
from duplexsim.run.runner import RunOptions, execute_run
from duplexsim.scoring.service import wire
from tests.helpers import hostile
from tests.helpers.hostile_servers import KEY, SETTINGS, Script, hostile_server, sending, session
from tests.helpers.scoring_service import (
    RawClient,
    TinyScorer,
    clip,
    running_broker,
    running_worker,
    wait_until,
    worker_count,
)
from tests.helpers.signals import voiced_signal
from tests.helpers.virtualclock import run_virtual

PROTOCOLS = ["pcm-ws", "openai-realtime", "gemini-live", "moshi", "hume-evi"]


def garbage(protocol: str, value: str) -> str | bytes:
    """A message of ``protocol`` with ``value`` (raw JSON text) inside a field."""
    if protocol == "pcm-ws":
        return '{"type": "transcript", "text": "x", "final": ' + value + "}"
    if protocol == "openai-realtime":
        return '{"type": "response.output_audio_transcript.delta", "delta": ' + value + "}"
    if protocol == "gemini-live":
        return '{"serverContent": {"turnComplete": ' + value + "}}"
    if protocol == "hume-evi":
        return '{"type": "assistant_message", "id": "m", "message": ' + value + "}"
    return bytes([moshi_wire.Kind.METADATA]) + b'{"a": ' + value.encode() + b"}"


# --- case 1: one message must not abort the run -----------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("value", [hostile.HUGE, hostile.deep(5000), hostile.deep(100, "{")])
async def test_garbage_fails_the_session_as_protocol(protocol: str, value: str) -> None:
    async with hostile_server(protocol, sending(garbage(protocol, value))) as url:
        out = await session(protocol, url)
    assert (out.status, out.end_reason, out.retryable) == ("failed", "protocol", False), out.error
    assert "\n" not in out.error and len(out.error) < 400


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_oversized_message_fails_the_session_as_protocol(protocol: str) -> None:
    size = client_class(protocol).max_message + 1
    huge = b"\x01" + bytes(size) if protocol == "moshi" else "x" * size
    async with hostile_server(protocol, sending(huge)) as url:
        out = await session(protocol, url)
    assert (out.status, out.end_reason, out.retryable) == ("failed", "protocol", False), out.error
    assert "1009" in out.error


async def test_a_run_goes_on_past_a_server_that_sends_garbage(
    tmp_path: Path, make_benchmark: Callable[..., Path]
) -> None:
    bench = load_benchmark(make_benchmark(n=3))
    profile = ModelProfile(name="hostile", protocol="pcm-ws", url="")
    async with hostile_server("pcm-ws", sending(garbage("pcm-ws", hostile.HUGE))) as url:
        profile = ModelProfile(name="hostile", protocol="pcm-ws", url=url)
        opts = RunOptions(
            "garbage", tmp_path / "runs", concurrency=2, settings=SETTINGS, quiet=True
        )
        rows = await execute_run(bench, profile, opts)
    assert [(r.status, r.end_reason) for r in rows] == [("failed", "protocol")] * 3


# --- case 4: a key the server echoes is written nowhere ---------------------------------------


def echoes(protocol: str) -> list[str | bytes]:
    said = f"your key is {KEY}"
    if protocol == "pcm-ws":
        return [
            json.dumps({"type": "transcript", "text": said, "final": True}),
            json.dumps({"type": "error", "code": "bad", "message": said}),
        ]
    if protocol == "openai-realtime":
        return [
            json.dumps({"type": "response.output_audio_transcript.delta", "delta": said}),
            json.dumps({"type": "error", "error": {"type": "server_error", "message": said}}),
        ]
    if protocol == "gemini-live":
        return [
            json.dumps({"serverContent": {"outputTranscription": {"text": said}}}),
            json.dumps({"error": {"code": 500, "message": said, "status": "INTERNAL"}}),
        ]
    if protocol == "hume-evi":
        message = {"role": "assistant", "content": said}
        return [
            json.dumps({"type": "assistant_message", "id": "m", "message": message}),
            json.dumps({"type": "error", "code": "E0100", "slug": "x", "message": said}),
        ]
    return [
        bytes([moshi_wire.Kind.TEXT]) + said.encode(),
        bytes([moshi_wire.Kind.ERROR]) + said.encode(),
    ]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_echoed_key_is_redacted_from_errors_and_transcripts(protocol: str) -> None:
    async with hostile_server(protocol, sending(*echoes(protocol))) as url:
        out = await session(protocol, url)
    said = json.dumps(out.events) + (out.error or "")
    assert KEY not in said and "***" in said


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_echoed_key_is_redacted_from_close_reasons(protocol: str) -> None:
    async with hostile_server(protocol, sending(close_reason=f"bad key {KEY}")) as url:
        out = await session(protocol, url)
    assert out.status == "failed" and KEY not in (out.error or ""), out.error


async def test_no_file_of_a_run_holds_an_echoed_key(
    tmp_path: Path, make_benchmark: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOSTILE_KEY", KEY)
    bench = load_benchmark(make_benchmark(n=2))
    script = sending(*echoes("pcm-ws")[:1], close_reason=f"bad key {KEY}")
    async with hostile_server("pcm-ws", script) as url:
        profile = ModelProfile(
            name="hostile", protocol="pcm-ws", url=url, api_key_env="HOSTILE_KEY"
        )
        opts = RunOptions(
            "echo",
            tmp_path / "runs",
            settings=SETTINGS,
            quiet=True,
            retry=RetryPolicy(max_attempts=1),
        )
        await execute_run(bench, profile, opts)
    run = tmp_path / "runs" / "echo"
    files = [p for p in run.rglob("*") if p.is_file()]
    assert any(p.name == "events.jsonl" for p in files)
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path
    with sqlite3.connect(run / "results.sqlite") as db:
        assert "***" in " ".join(str(e) for (e,) in db.execute("SELECT error FROM results"))


# --- case 3: a flood is a protocol failure, and memory stays bounded --------------------------


def pcm_flood(seconds: float, chunk_s: float = 0.5) -> Script:
    """Speech, ``seconds`` of it, as fast as the socket takes it."""
    n = int(chunk_s * 16000)
    speech = (voiced_signal(seconds) * 32767).astype("<i2")

    async def script(ws: ServerConnection) -> None:
        for i in range(0, speech.size, n):
            await ws.send(speech[i : i + n].tobytes())
        await streaming_silence(ws)

    return script


async def streaming_silence(ws: ServerConnection) -> None:
    """Silence in real time, as pcm-ws servers stream (a quiet wire would read as a stall)."""
    frame = bytes(640)
    with contextlib.suppress(ConnectionClosed):
        while True:
            await ws.send(frame)
            await asyncio.sleep(0.02)


def transcript_flood(chars: int) -> Script:
    """Transcripts of ``chars`` characters, as fast as the socket takes them, until the session
    hangs up (a flood that ended first would leave a quiet wire: a stall, not a flood)."""

    async def script(ws: ServerConnection) -> None:
        message = json.dumps({"type": "transcript", "text": "x" * chars})
        with contextlib.suppress(ConnectionClosed):
            while True:
                await ws.send(message)

    return script


@pytest.mark.parametrize(
    ("script", "words"),
    [
        (pcm_flood(600.0), "ahead of real time"),
        (transcript_flood(1), "messages"),
        (transcript_flood(1000), "characters of transcript"),
    ],
)
async def test_a_flood_fails_the_session_and_memory_stays_bounded(
    script: Script, words: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the message rate a tenth of the shipped one: a session that reads only 200 messages a
    # second (a loaded machine, under tracemalloc) still outruns it; the rule is the same
    monkeypatch.setattr(intake, "MESSAGE_BURST", intake.MESSAGE_BURST // 10)
    monkeypatch.setattr(intake, "MESSAGE_RATE", intake.MESSAGE_RATE // 10)
    tracemalloc.start()
    try:
        async with hostile_server("pcm-ws", script) as url:
            out = await session("pcm-ws", url, context_s=4.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (out.status, out.end_reason, out.retryable) == ("failed", "protocol", False)
    assert words in out.error and "flood" in out.error
    # at most max reply + margin (14 s) ahead: the output stays far from 600 s of audio
    assert out.output.size / out.output_rate < 30
    assert peak < 80 * 2**20, f"peak {peak / 2**20:.1f} MiB"


def test_a_model_running_ahead_within_the_margin_is_heard_in_full() -> None:
    async def main() -> Any:
        async with hostile_server("pcm-ws", pcm_flood(3.0)) as url:
            return await session("pcm-ws", url)

    out = run_virtual(main())  # the silence after it streams in time, however loaded the machine
    assert out.status == "ok", out.error
    assert out.timing is not None and out.timing.duration_s == pytest.approx(3.0, abs=0.1)


# --- case 2: one bad scoring frame must not stop the broker ----------------------------------


def test_the_broker_drops_deep_and_huge_frames_and_serves_everyone_else() -> None:
    nested = hostile.deep(5000).encode()[: wire.MAX_HEADER_BYTES]
    peers: list[RawClient] = []

    def raw(endpoint: str) -> RawClient:
        peers.append(RawClient(endpoint))
        return peers[-1]

    with (
        running_broker() as broker,
        running_worker(broker.backend, {"tiny": TinyScorer()}),
        contextlib.ExitStack() as closing,
    ):
        closing.callback(lambda: [p.close() for p in peers])
        wait_until(lambda: worker_count(broker) == 1, what="worker")
        client = raw(broker.frontend)
        good = wire.encode_request("fine", "tiny", clip(0.3), time.time() + 10)
        client.send([wire.VERSION, nested, good[2]])
        client.send([wire.VERSION, b'{"id": ' + hostile.HUGE.encode() + b"}", good[2]])
        # a peer on the workers' side: a READY nested 5000 deep, then one with a huge number
        peer = raw(broker.backend)
        peer.send([wire.VERSION, b"READY", nested])
        peer.send([wire.VERSION, b"READY", b'{"capacity": ' + hostile.HUGE.encode() + b"}"])
        errors = client.replies(2, timeout_s=5)
        wait_until(lambda: broker.stats.bad_worker_messages == 2, what="bad READYs counted")
        client.send(good)
        [fine] = client.replies(1, timeout_s=5)
    assert [(r.ok, r.code) for r in errors] == [(False, "bad-request")] * 2
    assert fine.ok and broker.stats.rejected == 2


# --- the pure pieces: redaction and the intake bounds ----------------------------------------


def test_redact_replaces_the_key_and_anything_shaped_like_one() -> None:
    from duplexsim.core.redact import redact

    said = (
        f"bad key {KEY}; as sent: {KEY.replace('-', '%2D')}... wss://h/x?key=AIzaSECRET&alt=1 "
        "Authorization: Bearer tok.en-123 other: sk-proj-abcdefghijklmnop AIza" + "x" * 35
    )
    out = redact(said, (KEY, None, "ab"))
    for secret in (KEY, "AIzaSECRET", "tok.en-123", "sk-proj-abcdefghijklmnop", "x" * 35):
        assert secret not in out
    assert "alt=1" in out and "bad key ***" in out
    assert redact("a risk-free task-list", ("ab",)) == "a risk-free task-list"


def test_intake_allows_the_margin_and_no_more() -> None:
    from duplexsim.core.errors import ProtocolError
    from duplexsim.core.intake import MESSAGE_BURST, MESSAGE_RATE, TEXT_BUDGET, Intake

    intake = Intake(rate=100, max_ahead_s=30.0)
    intake.audio(3000, arrival_s=0.0, placed_end_s=30.0)  # a whole reply at once: allowed
    with pytest.raises(ProtocolError, match="ahead of real time"):
        intake.audio(1, arrival_s=0.0, placed_end_s=30.01)
    later = Intake(rate=100, max_ahead_s=30.0)
    later.audio(3000, arrival_s=5.0, placed_end_s=5.0)
    with pytest.raises(ProtocolError, match=r"reaching 36\.0 s"):  # placed past arrival + 30 s
        later.audio(100, arrival_s=5.0, placed_end_s=36.0)
    messages = Intake(rate=100, max_ahead_s=30.0)
    for _ in range(MESSAGE_BURST + MESSAGE_RATE):
        messages.message(1.0)
    with pytest.raises(ProtocolError, match="messages"):
        messages.message(1.0)
    text = Intake(rate=100, max_ahead_s=30.0)
    text.text(TEXT_BUDGET)
    with pytest.raises(ProtocolError, match="characters"):
        text.text(1)


async def test_what_a_decoder_missed_fails_only_that_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(text: str) -> Any:
        raise KeyError("a decoder bug a server's bytes found")

    monkeypatch.setattr("duplexsim.clients.pcm_ws.events.decode", broken)
    async with hostile_server("pcm-ws", sending(json.dumps({"type": "end_of_turn"}))) as url:
        out = await session("pcm-ws", url)
    assert (out.status, out.end_reason, out.retryable) == ("failed", "protocol", False)
    assert "could not handle what the server sent (KeyError" in out.error
