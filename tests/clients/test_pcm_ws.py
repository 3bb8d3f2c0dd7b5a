"""pcm-ws: the pure protocol objects, then client and fake server over loopback WebSockets."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Callable

import numpy as np
import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request, Response

from duplexsim.clients.base import (
    AudioOut,
    ClientConfig,
    ClientEvent,
    EndOfTurn,
    ErrorEvent,
    SpeechStarted,
    SpeechStopped,
    Transcript,
)
from duplexsim.clients.fakekit.behaviours import behaviour_factory, make_behaviour, synthetic_voice
from duplexsim.clients.fakekit.fakeserver import RunningServer
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.pcm_ws import events as wire
from duplexsim.clients.pcm_ws.client import PcmWsClient
from duplexsim.clients.pcm_ws.fake import Close, Send, ServerProtocol, Stall
from duplexsim.clients.pcm_ws.protocol import ClientProtocol
from duplexsim.clients.pcm_ws.server import start_server
from duplexsim.clients.registry import client_class, fake_server_factory
from duplexsim.core.errors import (
    ConnectError,
    Disconnected,
    ProtocolError,
    RateLimited,
    RemoteError,
)
from duplexsim.core.vad import frame_flags, speech_bounds
from tests.helpers.virtualclock import run_virtual

RATE = 16000
Clock = Callable[[], float]
FRAME = 320  # 20 ms


def speech_clip(lead_s: float = 0.5, speech_s: float = 1.0, tail_s: float = 1.5) -> np.ndarray:
    parts = [np.zeros(round(lead_s * RATE)), synthetic_voice(RATE, speech_s, f0=150.0)]
    return np.concatenate([*parts, np.zeros(round(tail_s * RATE))]).astype(np.float32)


def acked_client_protocol() -> ClientProtocol:
    proto = ClientProtocol(RATE)
    proto.receive_hello_ack(wire.encode(wire.HelloAck(RATE, "s1")))
    return proto


def test_test_speech_is_speech() -> None:
    assert frame_flags(synthetic_voice(RATE, 1.0, f0=150.0), RATE).mean() > 0.95


# --- pure protocol -------------------------------------------------------------------------


def test_hello_and_ack_round_trip() -> None:
    client = ClientProtocol(RATE)
    hello = json.loads(client.hello_message())
    assert hello == {
        "type": "hello",
        "version": 1,
        "sample_rate": RATE,
        "encoding": "pcm16le",
        "channels": 1,
        "frame_ms": 20,
    }
    server = ServerProtocol(behaviour_factory("echo"), session_id="abc")
    [ack] = server.receive_text(client.hello_message())
    assert isinstance(ack, Send) and isinstance(ack.message, str)
    assert client.receive_hello_ack(ack.message) == wire.HelloAck(RATE, "abc")
    assert client.session_id == "abc"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"type":"speech_started"}', SpeechStarted(1.5)),
        ('{"type":"speech_stopped"}', SpeechStopped(1.5)),
        ('{"type":"end_of_turn"}', EndOfTurn(1.5)),
        ('{"type":"transcript","text":"hi","final":true}', Transcript("hi", 1.5, True)),
        ('{"type":"transcript","text":"h"}', Transcript("h", 1.5, False)),
        ('{"type":"speech_started","extra":1}', SpeechStarted(1.5)),
    ],
)
def test_control_messages_become_stamped_events(text: str, expected: ClientEvent) -> None:
    assert acked_client_protocol().receive_text(text, arrival=1.5) == [expected]


def test_reply_started_is_not_an_event() -> None:
    assert acked_client_protocol().receive_text('{"type":"reply_started"}', 1.0) == []


def test_error_message_becomes_a_remote_error_event() -> None:
    text = '{"type":"error","code":"overloaded","message":"busy","retryable":true}'
    [event] = acked_client_protocol().receive_text(text, 2.0)
    assert isinstance(event, ErrorEvent) and event.fatal and event.arrival == 2.0
    assert isinstance(event.error, RemoteError) and event.error.retryable
    assert "overloaded" in str(event.error) and "busy" in str(event.error)


def test_audio_frames_round_trip_exactly_through_pcm16() -> None:
    proto = acked_client_protocol()
    ints = np.array([0, 1, -1, 32767, -32768, 1234], dtype="<i2")
    [event] = proto.receive_binary(ints.tobytes(), 3.0)
    assert isinstance(event, AudioOut) and event.arrival == 3.0
    assert event.samples.dtype == np.float32
    assert proto.audio_message(event.samples) == ints.tobytes()


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON list, not an object"),
        ('{"kind":"speech_started"}', "no string 'type'"),
        ('{"type":"laugh"}', "unknown message type 'laugh'"),
        ('{"type":"transcript"}', "lacks field 'text'"),
        ('{"type":"transcript","text":3}', "'text' must be str, got int"),
        ('{"type":"transcript","text":"a","final":"yes"}', "'final' must be bool, got str"),
        ('{"type":"hello","sample_rate":"16000"}', "'sample_rate' must be int, got str"),
        ('{"type":"hello","sample_rate":true}', "'sample_rate' must be int, got bool"),
        ('{"type":"hello","sample_rate":16000}', "unexpected 'Hello'"),
    ],
)
def test_malformed_messages_are_protocol_errors(text: str, complaint: str) -> None:
    with pytest.raises(ProtocolError, match=complaint):
        acked_client_protocol().receive_text(text, 0.0)


def test_odd_length_audio_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="3 bytes"):
        acked_client_protocol().receive_binary(b"\x00\x01\x02", 0.0)


def test_digital_silence_is_recognised_without_decoding() -> None:
    proto = acked_client_protocol()
    [silent] = proto.receive_binary(bytes(640), 1.5)
    assert isinstance(silent, AudioOut) and silent.silent and silent.arrival == 1.5
    assert silent.samples.shape == (320,) and not silent.samples.any()
    assert not silent.samples.flags.writeable  # shared between frames
    [quiet] = proto.receive_binary(b"\x01\x00" * 320, 1.52)  # 1 LSB: decoded and checked
    assert isinstance(quiet, AudioOut) and not quiet.silent and quiet.samples[0] == 1 / 32768
    with pytest.raises(ProtocolError, match="3 bytes"):
        proto.receive_binary(bytes(3), 0.0)
    server = ServerProtocol(behaviour_factory("silent"))
    server.receive_text(wire.encode(wire.Hello(sample_rate=RATE)))
    [out] = server.receive_binary(bytes(640))
    assert isinstance(out, Send) and out.message == bytes(640)
    assert isinstance(server.receive_binary(bytes(3))[-1], Close)


def test_audio_before_the_ack_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="before 'hello_ack'"):
        ClientProtocol(RATE).receive_binary(b"\x00\x00", 0.0)


def test_ack_at_another_rate_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="24000"):
        ClientProtocol(RATE).receive_hello_ack(wire.encode(wire.HelloAck(24000, "x")))


def test_error_instead_of_ack_is_a_remote_error() -> None:
    text = wire.encode(wire.Error("auth", "bad key", retryable=False))
    with pytest.raises(RemoteError, match="bad key"):
        ClientProtocol(RATE).receive_hello_ack(text)


def server_after_hello(faults: Faults | None = None, name: str = "echo") -> ServerProtocol:
    server = ServerProtocol(behaviour_factory(name), faults)
    server.receive_text(ClientProtocol(RATE).hello_message())
    return server


def test_server_answers_every_frame_with_one_frame_of_the_same_length() -> None:
    server = server_after_hello()
    x = speech_clip(0.2, 0.6, 1.5)
    audio: list[list[bytes]] = []
    texts: list[str] = []
    for i in range(0, x.size, FRAME):
        sends = server.receive_binary(wire.encode_audio(x[i : i + FRAME]))
        assert all(isinstance(a, Send) for a in sends)
        messages = [a.message for a in sends if isinstance(a, Send)]
        audio.append([m for m in messages if isinstance(m, bytes)])
        texts += [json.loads(m)["type"] for m in messages if isinstance(m, str)]
    assert all(len(frames) == 1 and len(frames[0]) == 2 * FRAME for frames in audio)
    assert texts == ["speech_started", "speech_stopped", "reply_started", "end_of_turn"]


@pytest.mark.parametrize(
    ("first", "complaint"),
    [
        (b"\x00\x00", "audio before 'hello'"),
        ('{"type":"hello","sample_rate":16000,"version":2}', "version 2"),
        ('{"type":"hello","sample_rate":16000,"channels":2}', "2 channels"),
        ('{"type":"hello","sample_rate":4000}', "sample_rate 4000"),
        ('{"type":"end_of_turn"}', "unexpected 'EndOfTurn'"),
    ],
)
def test_server_rejects_a_bad_opening(first: str | bytes, complaint: str) -> None:
    server = ServerProtocol(behaviour_factory("echo"))
    acts = server.receive_binary(first) if isinstance(first, bytes) else server.receive_text(first)
    send, close = acts
    assert isinstance(send, Send) and isinstance(send.message, str) and complaint in send.message
    assert close == Close(1002, "protocol")
    assert server.receive_binary(b"\x00\x00") == []


def test_server_media_faults_trigger_on_media_time() -> None:
    frame = wire.encode_audio(np.zeros(FRAME))
    closing = server_after_hello(Faults(close_after_s=0.1))
    assert [closing.receive_binary(frame)[-1] for _ in range(5)][-1] == Close(
        1011, "injected fault: close_after_s"
    )
    stalling = server_after_hello(Faults(stall_after_s=0.04))
    assert stalling.receive_binary(frame) != [Stall()]
    assert stalling.receive_binary(frame) == [Stall()]
    assert stalling.receive_binary(frame) == []
    bad = server_after_hello(Faults(malformed_after_s=0.02, malformed_then_close=True))
    *_, garbage, close = bad.receive_binary(frame)
    assert isinstance(garbage, Send) and isinstance(garbage.message, str)
    with pytest.raises(ProtocolError):
        wire.decode(garbage.message)
    assert isinstance(close, Close)


def test_faults_admit_counts_connections() -> None:
    faults = Faults(rate_limit_first=2, retry_after_s=0.25)
    first, second, third = faults.admit(), faults.admit(), faults.admit()
    assert first is not None and first.status == 429 and first.headers == {"Retry-After": "0.25"}
    assert second is not None and third is None and faults.connections == 3
    with pytest.raises(ValueError):
        Faults(refuse_status=200)


# --- over loopback -------------------------------------------------------------------------


@pytest.fixture
async def echo_server() -> AsyncIterator[RunningServer]:
    async with await start_server(behaviour_factory("echo")) as server:
        yield server


def config(url: str, *, api_key: str | None = None, clock: Clock = time.monotonic) -> ClientConfig:
    return ClientConfig(url=url, api_key=api_key, clock=clock, connect_timeout_s=2.0)


async def converse(
    client: PcmWsClient,
    x: np.ndarray,
    pace_s: float | None = None,
    late: tuple[int, float] = (-1, 0.0),
) -> list[ClientEvent]:
    """Send ``x`` in 20 ms frames (as fast as possible, or at T0 + n·pace_s; frame ``late[0]``
    ``late[1]`` s after that) and collect every event until the output has caught up with the
    input or an error arrived."""
    events: list[ClientEvent] = []
    caught_up = asyncio.Event()

    async def read() -> None:
        heard = 0
        async for event in client.events():
            events.append(event)
            heard += event.samples.size if isinstance(event, AudioOut) else 0
            if heard >= x.size or isinstance(event, ErrorEvent):
                caught_up.set()
        caught_up.set()

    reader = asyncio.create_task(read())
    loop, t0 = asyncio.get_running_loop(), asyncio.get_running_loop().time()
    try:
        for n, i in enumerate(range(0, x.size, FRAME)):
            if pace_s is not None:
                due = t0 + n * pace_s + (late[1] if n == late[0] else 0.0)
                await asyncio.sleep(max(0.0, due - loop.time()))
            await client.send_audio(x[i : i + FRAME])
    except Disconnected:
        pass
    await asyncio.wait_for(caught_up.wait(), 5.0)
    await client.aclose()
    await asyncio.wait_for(reader, 5.0)
    return events


def heard(events: list[ClientEvent]) -> np.ndarray:
    return np.concatenate([e.samples for e in events if isinstance(e, AudioOut)])


def test_registry_finds_client_and_server() -> None:
    assert client_class("pcm-ws") is PcmWsClient
    assert fake_server_factory("pcm-ws") is start_server


async def test_echo_over_loopback_matches_the_behaviour(echo_server: RunningServer) -> None:
    client = PcmWsClient(config(echo_server.url))
    await client.connect()
    assert client.capabilities.end_of_turn_signal and client.capabilities.server_vad
    x = speech_clip(0.3, 0.8, 1.9)
    events = await converse(client, x)
    out = heard(events)
    # what the server heard is x through PCM16; its reply must be that behaviour's output exactly
    sent = wire.decode_audio(wire.encode_audio(x))
    local = make_behaviour("echo", RATE)
    want = np.concatenate([local.push(sent[i : i + FRAME]).audio for i in range(0, x.size, FRAME)])
    assert out.size == x.size and np.array_equal(out, wire.decode_audio(wire.encode_audio(want)))
    kinds = [type(e) for e in events if not isinstance(e, AudioOut)]
    assert kinds == [SpeechStarted, SpeechStopped, EndOfTurn]
    assert client.bytes_sent >= 2 * x.size and client.bytes_received >= 2 * x.size


async def test_delayed_echo_onset_is_at_latency_in_media_time() -> None:
    async with await start_server(behaviour_factory("delayed-echo", latency_s=0.8)) as server:
        client = PcmWsClient(config(server.url))
        await client.connect()
        x = speech_clip(0.5, 1.0, 1.5)
        out = heard(await converse(client, x))
    end = speech_bounds(x, RATE)
    assert end is not None
    onset = int(np.flatnonzero(out)[0])
    assert onset == round(end[1] * RATE) + round(0.8 * RATE)


def test_delayed_echo_onset_in_real_time_arrives_at_latency() -> None:
    """Paced like a session: frame n sent at T0 + n·20 ms, chunks placed at arrival − T0. On the
    virtual clock (real loopback sockets), where a loaded machine delays no arrival."""
    x = speech_clip(0.3, 0.6, 1.0)

    async def main() -> tuple[float, list[ClientEvent]]:
        clock = asyncio.get_running_loop().time
        async with await start_server(behaviour_factory("delayed-echo", latency_s=0.8)) as server:
            client = PcmWsClient(config(server.url, clock=clock))
            await client.connect()
            t0 = clock()
            return t0, await converse(client, x, pace_s=FRAME / RATE)

    t0, events = run_virtual(main())
    placed_end, onset_s = 0.0, None
    for e in (e for e in events if isinstance(e, AudioOut)):
        start = max(e.arrival - t0, placed_end)
        hits = np.flatnonzero(e.samples)
        if onset_s is None and hits.size:
            onset_s = start + hits[0] / RATE
        placed_end = start + e.samples.size / RATE
    end = speech_bounds(x, RATE)
    assert end is not None and onset_s is not None
    error = onset_s - end[1] - 0.8
    assert -0.005 < error < 0.05, f"onset error {error * 1000:.1f} ms"


def test_a_replys_first_frame_answers_the_input_frame_of_its_number() -> None:
    """What the client declares (``answers_each_frame``), shown by the fake over real loopback
    sockets on the virtual clock: the chunk that holds a reply's onset answers the input frame
    of its own number, as that frame arrives. That frame sent 7 ms late delays the onset by 7
    ms; a frame before it, as late, does not move it."""
    x = speech_clip(0.3, 0.6, 1.0)
    assert PcmWsClient(config("ws://127.0.0.1:1")).capabilities.answers_each_frame

    def onset_chunk(late: tuple[int, float]) -> tuple[int, float]:
        async def main() -> tuple[int, float]:
            clock = asyncio.get_running_loop().time
            factory = behaviour_factory("delayed-echo", latency_s=0.3)
            async with await start_server(factory) as server:
                client = PcmWsClient(config(server.url, clock=clock))
                await client.connect()
                t0 = clock()
                events = await converse(client, x, pace_s=FRAME / RATE, late=late)
            chunks = [e for e in events if isinstance(e, AudioOut)]
            j = next(i for i, e in enumerate(chunks) if np.any(e.samples))
            return j, chunks[j].arrival - t0

        return run_virtual(main())

    j, on_time = onset_chunk((-1, 0.0))
    assert on_time >= j * FRAME / RATE  # it came once frame j had been sent
    before = onset_chunk((j - 5, 0.007))
    assert before[0] == j and before[1] == pytest.approx(on_time, abs=1e-4)
    itself = onset_chunk((j, 0.007))
    assert itself[0] == j and itself[1] == pytest.approx(on_time + 0.007, abs=1e-4)


async def test_extra_latency_delays_every_message() -> None:
    async with await start_server(
        behaviour_factory("silent"), faults=Faults(extra_latency_s=0.15)
    ) as server:
        client = PcmWsClient(config(server.url, clock=time.monotonic))
        await client.connect()
        sent = time.monotonic()
        await client.send_audio(np.zeros(FRAME, dtype=np.float32))
        first = await asyncio.wait_for(anext(client.events()), 2.0)
        await client.aclose()
    assert isinstance(first, AudioOut) and first.arrival - sent >= 0.15


async def test_refused_401_is_a_final_auth_error() -> None:
    async with await start_server(
        behaviour_factory("echo"), faults=Faults(refuse_status=401)
    ) as server:
        with pytest.raises(ConnectError) as err:
            await PcmWsClient(config(server.url, api_key="sk-secret-123")).connect()
    assert not err.value.retryable and err.value.reason == "auth"
    assert "sk-secret-123" not in str(err.value) and err.value.__cause__ is None


async def test_refused_503_is_retryable() -> None:
    async with await start_server(
        behaviour_factory("echo"), faults=Faults(refuse_status=503)
    ) as server:
        with pytest.raises(ConnectError) as err:
            await PcmWsClient(config(server.url)).connect()
    assert err.value.retryable


async def test_rate_limit_then_success() -> None:
    faults = Faults(rate_limit_first=1, retry_after_s=0.5)
    async with await start_server(behaviour_factory("echo"), faults=faults) as server:
        with pytest.raises(RateLimited) as err:
            await PcmWsClient(config(server.url)).connect()
        assert err.value.retryable and err.value.retry_after_s == 0.5
        client = PcmWsClient(config(server.url))
        await client.connect()
        await client.aclose()
    assert faults.connections == 2


async def test_api_key_goes_only_in_the_authorization_header() -> None:
    seen: list[str | None] = []

    def refuse(connection: ServerConnection, request: Request) -> Response:
        seen.append(request.headers.get("Authorization"))
        return connection.respond(403, "no\n")

    async def never(ws: ServerConnection) -> None:
        raise AssertionError("handshake was refused")

    async with serve(never, "127.0.0.1", 0, process_request=refuse) as server:
        port = server.sockets[0].getsockname()[1]
        with pytest.raises(ConnectError) as err:
            await PcmWsClient(config(f"ws://127.0.0.1:{port}", api_key="sk-secret-123")).connect()
    assert seen == ["Bearer sk-secret-123"]
    assert "sk-secret-123" not in str(err.value) and err.value.reason == "auth"


async def test_connection_refused_is_retryable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectError) as err:
        await PcmWsClient(config(f"ws://127.0.0.1:{port}")).connect()
    assert err.value.retryable


async def test_handshake_timeout_is_retryable() -> None:
    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(1.0)
        writer.close()

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        cfg = ClientConfig(url=f"ws://127.0.0.1:{port}", connect_timeout_s=0.2)
        with pytest.raises(ConnectError) as err:
            await PcmWsClient(cfg).connect()
        assert err.value.retryable
    finally:
        server.close()


async def test_close_fault_is_a_disconnect() -> None:
    faults = Faults(close_after_s=0.3)
    async with await start_server(behaviour_factory("echo"), faults=faults) as server:
        client = PcmWsClient(config(server.url))
        await client.connect()
        events = await converse(client, speech_clip())
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.fatal
    assert isinstance(last.error, Disconnected) and "1011" in str(last.error)
    assert heard(events).size == 14 * FRAME  # the 15th frame reached 0.3 s and was not answered


async def test_malformed_fault_is_a_protocol_error() -> None:
    faults = Faults(malformed_after_s=0.2)
    async with await start_server(behaviour_factory("echo"), faults=faults) as server:
        client = PcmWsClient(config(server.url))
        await client.connect()
        events = await converse(client, speech_clip())
    last = events[-1]
    assert isinstance(last, ErrorEvent) and isinstance(last.error, ProtocolError)
    assert "not valid JSON" in str(last.error)


async def test_stall_fault_goes_quiet_with_the_socket_open() -> None:
    faults = Faults(stall_after_s=0.2)
    async with await start_server(behaviour_factory("echo"), faults=faults) as server:
        client = PcmWsClient(config(server.url))
        await client.connect()
        for _ in range(25):
            await client.send_audio(np.zeros(FRAME, dtype=np.float32))
        events = client.events()
        answered = [await asyncio.wait_for(anext(events), 1.0) for _ in range(9)]
        assert all(isinstance(e, AudioOut) for e in answered)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(events), 0.3)
        await client.aclose()


async def test_normal_close_ends_the_events(echo_server: RunningServer) -> None:
    client = PcmWsClient(config(echo_server.url))
    await client.connect()
    await client.aclose()
    assert [e async for e in client.events()] == []


def test_polled_errors_carry_the_time_their_message_was_read():
    """A message that cannot be decoded, or parsed, ends the polled stream with an error stamped
    when that message was read (as the streamed path does), not when it was polled."""
    from duplexsim.clients.pcm_ws.client import PcmWsClient

    class Inbox:
        def __init__(self, batches: list) -> None:
            self.batches = batches
            self.last_arrival = 0.0

        def take(self, decode=None):
            batch = self.batches.pop(0)
            if isinstance(batch, float):
                self.last_arrival = batch
                raise ProtocolError("a text message is not valid UTF-8")
            return batch

    client = PcmWsClient(ClientConfig(url="ws://127.0.0.1:9", clock=lambda: 99.0))
    client._ws = Inbox([2.5])
    [error], ended = client.poll_events()
    assert ended and error.arrival == 2.5 and "UTF-8" in error.error.message
    client._ws = Inbox([[(b"\x00\x00" * 320, 640, 1.0)]])  # audio before the hello_ack
    [error], ended = client.poll_events()
    assert ended and error.arrival == 1.0 and "hello_ack" in error.error.message


async def test_fake_answers_never_overtake_actions_still_being_carried_out():
    """converse(): while one message's actions are being carried out (a send waiting for the
    socket to drain), the next message's answer queues behind them, even if writing resumed in
    between; and a fake whose protocol raises closes with 1011 instead of dropping the socket."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    from duplexsim.clients.fakekit.serveractions import Send
    from duplexsim.clients.fakekit.wsfake import (
        DelayedOutbox,
        Untimed,
        converse,
        serve_websockets,
    )

    holding = asyncio.Event()

    async def handler(ws: ServerConnection) -> None:
        def receive(message: str | bytes) -> list:
            if message == "a":
                ws.pause_writing()  # as when the transport's buffer passes its high-water mark
                holding.set()
                return [Send("a0"), Send("a1"), Send("a2")]
            if message == "b":
                ws.resume_writing()  # writable again in the same loop turn as this read
                return [Send("b0")]
            raise RuntimeError("a bug in the fake")

        await converse(ws, Untimed(receive), DelayedOutbox(ws))

    server = await serve_websockets(handler, host="127.0.0.1", port=0)
    try:
        async with connect(server.url, compression=None) as ws:
            await ws.send("a")
            await asyncio.wait_for(holding.wait(), 2)  # a's answers wait for the socket now
            await ws.send("b")
            got = [await asyncio.wait_for(ws.recv(), 2) for _ in range(4)]
            assert got == ["a0", "a1", "a2", "b0"]
            await ws.send("boom")
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 2)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
    finally:
        await server.aclose()
