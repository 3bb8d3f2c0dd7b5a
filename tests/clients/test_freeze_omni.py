"""freeze-omni: the Socket.IO framing, the pure protocol objects, then client and fake over
loopback; python-socketio on the other end of each (its client against our fake, our client
against its server)."""

from __future__ import annotations

import asyncio
import json
import random

import numpy as np
import pytest

from duplexsim.clients.base import AudioOut, ClientConfig, ErrorEvent, SpeechStarted
from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.fakekit.serveractions import Close, Send, Stall
from duplexsim.clients.freeze_omni import events as wire
from duplexsim.clients.freeze_omni import sio
from duplexsim.clients.freeze_omni.client import FreezeOmniClient, socketio_url
from duplexsim.clients.freeze_omni.fake import ServerProtocol
from duplexsim.clients.freeze_omni.protocol import ClientProtocol
from duplexsim.clients.freeze_omni.server import start_server
from duplexsim.core.audio import float_to_pcm16, pcm16_to_float
from duplexsim.core.errors import ConfigError, ProtocolError, RateLimited
from duplexsim.session.engine import SessionOutcome, run_session
from tests.helpers.sessions import context, settings
from tests.helpers.signals import voiced_signal
from tests.helpers.virtualclock import run_virtual

RATE = 16000
FRAME = 320
SETTINGS = settings(reply_timeout_s=1.2, stall_timeout_s=2.0, deadline_margin_s=10.0)
PING = "2"


def sent(actions) -> list[str | bytes]:
    return [a.message for a in actions if isinstance(a, Send)]


def connected_server(**kw) -> ServerProtocol:
    server = ServerProtocol(behaviour_factory("echo", hangover_s=0.3), **kw)
    assert sent(server.open("/socket.io/?EIO=4&transport=websocket"))[0].startswith("0{")
    server.receive("40")
    server.receive(wire.encode_client(wire.RecordingStarted()))
    return server


def ready_client() -> ClientProtocol:
    proto = ClientProtocol()
    server = ServerProtocol(behaviour_factory("silent"))
    frames = sent(server.open("/socket.io/?EIO=4&transport=websocket"))
    while not proto.ready:
        answers = [a for f in frames for a in proto.handshake(f)]
        frames = [m for a in answers for m in sent(server.receive(a))]
    return proto


# --- framing ---------------------------------------------------------------------------------


PACKETS = [
    sio.Open("abc", 25000, 20000, 1000000),
    sio.Close(),
    sio.Ping(),
    sio.Pong(),
    sio.Connect(),
    sio.Connect({"sid": "x"}),
    sio.ConnectError("nope"),
    sio.Disconnect(),
    sio.Event("stop_tts"),
    sio.Event("prompt_text", ("hello",)),
    sio.Event("audio", (b"\x01\x02\x03\x04",)),
    sio.Event("two", (b"a", {"k": 1}, b"bb")),
]


@pytest.mark.parametrize("packet", PACKETS, ids=lambda p: type(p).__name__)
def test_every_packet_round_trips(packet) -> None:
    reader = sio.PacketReader()
    frames = sio.encode(packet)
    got = [reader.feed(f) for f in frames]
    assert got[:-1] == [None] * (len(frames) - 1)
    assert got[-1] == packet


def test_events_are_what_python_socketio_encodes_and_decodes() -> None:
    packet = pytest.importorskip("socketio.packet")
    for event in (sio.Event("audio", (b"\x00\xff",)), sio.Event("stop_tts"), PACKETS[9]):
        theirs = packet.Packet(packet.EVENT, data=[event.name, *event.args]).encode()
        theirs = theirs if isinstance(theirs, list) else [theirs]
        # Engine.IO puts "4" (message) before each Socket.IO text packet
        ours = sio.encode(event)
        assert ours == [f"4{f}" if isinstance(f, str) else f for f in theirs]
    frame = wire.audio_frame(b"\x01\x00\xff\x7f")
    parsed = packet.Packet(encoded_packet=frame[1:])
    assert parsed.data[0] == "audio"
    assert json.loads(parsed.data[1]) == {"audio": [1, 0, 255, 127], "sample_rate": 16000}


@pytest.mark.parametrize(
    "frames",
    [
        ["5"],
        ["42"],
        ['42{"a":1}'],
        ["42[1]"],
        ['42["x"'],
        ["0"],
        ['0{"sid":1}'],
        ['451-["audio",{"_placeholder":true,"num":3}]', b"x"],
        ['451-["audio"]', "42[]"],
        [b"\x00\x01"],
        ["4/chat,2[]"],
        ["45x-[]"],
        ["45²-[]"],
        ["2probe"],
    ],
)
def test_malformed_frames_are_protocol_errors(frames) -> None:
    reader = sio.PacketReader()
    with pytest.raises(ProtocolError):
        for f in frames:
            reader.feed(f)


def test_any_bytes_raise_nothing_but_protocol_errors() -> None:
    rng = random.Random(7)
    alphabet = '0123456789[]{}",:-_placeholdernum tru\x00é'
    for _ in range(3000):
        reader = sio.PacketReader()
        n = rng.randrange(0, 24)
        frame: str | bytes = (
            "".join(rng.choice(alphabet) for _ in range(n))
            if rng.random() < 0.8
            else bytes(rng.randrange(256) for _ in range(n))
        )
        try:
            packet = reader.feed(frame)
            if isinstance(packet, sio.Event):
                wire.server_message(packet)
                wire.client_message(packet)
        except ProtocolError:
            pass


def test_audio_frame_carries_the_pcm_bytes_as_numbers() -> None:
    x = voiced_signal(0.02)
    frame = wire.audio_frame(float_to_pcm16(x))
    event = sio.PacketReader().feed(frame)
    assert isinstance(event, sio.Event)
    msg = wire.client_message(event)
    assert isinstance(msg, wire.AudioIn) and msg.sample_rate == RATE
    np.testing.assert_array_equal(pcm16_to_float(msg.pcm), pcm16_to_float(float_to_pcm16(x)))


@pytest.mark.parametrize(
    "body",
    [
        "nope",
        '{"audio": 3, "sample_rate": 16000}',
        '{"audio": [1, 300], "sample_rate": 16000}',
        '{"audio": [1], "sample_rate": 16000}',
        '{"audio": [1, 2]}',
    ],
)
def test_bad_audio_arguments_are_protocol_errors(body) -> None:
    with pytest.raises(ProtocolError):
        wire.client_message(sio.Event("audio", (body,)))


# --- client protocol -------------------------------------------------------------------------


def test_opening_connects_prompts_and_starts_the_recording() -> None:
    proto = ClientProtocol(prompt="Be brief.")
    assert proto.handshake(sio.encode(sio.Open("e1", 25000, 20000))[0]) == ["40"]
    assert proto.sid == "e1" and proto.ping_interval_s == 25.0
    (prompt,) = proto.handshake('40{"sid":"s1"}')
    assert prompt == '42["prompt_text","Be brief."]'
    assert proto.handshake('42["prompt_success"]') == ['42["recording-started"]']
    assert not proto.ready
    assert proto.handshake('42["stop_tts"]') == [] and proto.ready


def test_a_full_server_is_a_rate_limit_at_the_opening() -> None:
    proto = ClientProtocol()
    proto.handshake(sio.encode(sio.Open("e1", 25000, 20000))[0])
    proto.handshake('40{"sid":"s1"}')
    with pytest.raises(RateLimited, match="too_many_users"):
        proto.handshake('42["too_many_users"]')


def test_pings_are_answered_before_the_next_audio() -> None:
    proto = ready_client()
    assert proto.receive(PING, 1.0) == []
    assert proto.take_pending() == ["3"]
    assert proto.take_pending() == []


def test_server_frames_become_stamped_events() -> None:
    proto = ready_client()
    assert proto.receive('42["stop_tts"]', 0.5) == []  # nothing heard yet: nothing to stop
    pcm = float_to_pcm16(voiced_signal(0.1, 24000))
    head, blob = sio.encode(sio.Event("audio", (pcm,)))
    assert proto.receive(head, 1.0) == []
    (audio,) = proto.receive(blob, 1.25)
    assert isinstance(audio, AudioOut) and audio.arrival == 1.25
    np.testing.assert_array_equal(audio.samples, pcm16_to_float(pcm))
    assert proto.receive('42["stop_tts"]', 2.0) == [SpeechStarted(2.0)]
    (gone,) = proto.receive('42["out_time"]', 3.0)
    assert isinstance(gone, ErrorEvent) and gone.error.reason == "disconnected"
    (bye,) = proto.receive("41", 4.0)
    assert isinstance(bye, ErrorEvent) and bye.fatal


def test_urls_become_engine_io_websocket_urls() -> None:
    assert socketio_url("http://10.0.0.5:8888") == (
        "ws://10.0.0.5:8888/socket.io/?EIO=4&transport=websocket"
    )
    assert socketio_url("https://h/omni/socket.io/?a=1") == (
        "wss://h/omni/socket.io/?a=1&EIO=4&transport=websocket"
    )
    with pytest.raises(ConfigError):
        socketio_url("ftp://h")
    with pytest.raises(ConfigError, match="unknown option"):
        FreezeOmniClient(ClientConfig(url="http://h", options={"promt": "x"}))


# --- fake server protocol --------------------------------------------------------------------


def test_server_refuses_other_engine_io_versions_and_paths() -> None:
    server = ServerProtocol(behaviour_factory("echo"))
    assert isinstance(server.open("/socket.io/?EIO=3&transport=websocket")[0], Close)
    server = ServerProtocol(behaviour_factory("echo"))
    assert isinstance(server.open("/other/?EIO=4&transport=websocket")[0], Close)


def test_server_reply_starts_exactly_at_the_behaviours_onset_one_segment_per_message() -> None:
    server = connected_server()
    x = np.concatenate([context(tail_s=0.2), np.zeros(RATE * 3, np.float32)])
    arrivals: list[tuple[int, int]] = []  # (input frame, output samples)
    for i in range(0, x.size - FRAME + 1, FRAME):
        frames = sent(server.receive(wire.audio_frame(float_to_pcm16(x[i : i + FRAME]))))
        blobs = [f for f in frames if isinstance(f, bytes)]
        assert len(blobs) <= 1
        if blobs:
            arrivals.append((i, len(blobs[0]) // 2))
    assert arrivals and arrivals[0][1] > 0.15 * 24000  # a segment is more than a frame
    # consecutive messages: faster than real time, paced by the input
    assert [a for a, _ in arrivals] == list(
        range(arrivals[0][0], arrivals[0][0] + FRAME * len(arrivals), FRAME)
    )
    turn = server._behaviour.turns[0]
    assert arrivals[0][0] <= turn.decided < arrivals[0][0] + FRAME


def test_server_pings_on_media_time_and_closes_when_unanswered() -> None:
    server = connected_server(ping_interval_s=0.1, ping_timeout_s=0.15)
    frame = wire.audio_frame(bytes(2 * FRAME))
    out = [sent(server.receive(frame)) for _ in range(6)]
    assert out[4] == [PING]  # 0.1 s = 5 frames
    server.receive("3")
    assert sent(server.receive(frame)) == []
    acts = [a for _ in range(20) for a in server.receive(frame)]
    assert any(isinstance(a, Close) and a.reason == "ping timeout" for a in acts)


def test_server_full_says_too_many_users_then_disconnects() -> None:
    server = ServerProtocol(behaviour_factory("echo"), full=True)
    server.open("/socket.io/?EIO=4&transport=websocket")
    assert sent(server.receive("40")) == ['40{"sid":"freeze-omni-1"}', '42["too_many_users"]']
    acts = server.receive(wire.encode_client(wire.RecordingStarted()))
    assert sent(acts) == ["41"] and isinstance(acts[-1], Close)


def test_server_media_faults_trigger_on_media_time() -> None:
    from duplexsim.clients.fakekit.faults import Faults

    frame = wire.audio_frame(bytes(2 * FRAME))
    server = connected_server(faults=Faults(stall_after_s=0.1))
    acts = [a for _ in range(5) for a in server.receive(frame)]
    assert isinstance(acts[-1], Stall)
    server = connected_server(faults=Faults(malformed_after_s=0.04))
    acts = [a for _ in range(2) for a in server.receive(frame)]
    assert sent(acts) == ['42["stop_tts"']


# --- over loopback ---------------------------------------------------------------------------


async def _session(behaviour: str, **kw):
    server = await start_server(behaviour_factory(behaviour, **kw.pop("params", {})), **kw)
    try:
        client = FreezeOmniClient(ClientConfig(url=server.url, connect_timeout_s=5.0))
        return await run_session(client, context(tail_s=0.2), SETTINGS)
    finally:
        await server.aclose()


def test_pings_are_answered_mid_session() -> None:
    out = run_virtual(  # the latency the protocol gives, however loaded the machine
        _session(
            "delayed-echo",
            params={"latency_s": 0.5, "hangover_s": 0.25},
            ping_interval_s=0.3,
            ping_timeout_s=0.2,
        )
    )
    assert out.status == "ok", out.error
    assert out.timing.latency_s == pytest.approx(0.5, abs=0.06)


async def test_a_full_server_is_retryable_rate_limiting() -> None:
    out = await _session("echo", max_users=0)
    assert (out.status, out.end_reason, out.retryable) == ("failed", "rate-limited", True)


async def test_python_socketio_client_talks_to_the_fake() -> None:
    socketio = pytest.importorskip("socketio")
    server = await start_server(behaviour_factory("echo", hangover_s=0.3), ping_interval_s=0.2)
    got: list[bytes] = []
    stops = asyncio.Event()
    client = socketio.AsyncClient(reconnection=False)
    client.on("audio", lambda data: got.append(data))
    client.on("stop_tts", lambda: stops.set())
    try:
        await client.connect(server.url.replace("/socket.io/", ""), transports=["websocket"])
        await client.emit("recording-started")
        await asyncio.wait_for(stops.wait(), 5)
        x = np.concatenate([context(tail_s=0.2), np.zeros(RATE, np.float32)])
        for i in range(0, x.size - FRAME + 1, FRAME):
            body = json.dumps(
                {"audio": list(float_to_pcm16(x[i : i + FRAME])), "sample_rate": RATE}
            )
            await client.emit("audio", body)
            await asyncio.sleep(0.002)  # streamed, not dumped: it answers the pings in between
        assert client.connected  # it answered the fake's pings
    finally:
        await client.disconnect()
        await server.aclose()
    assert got and all(isinstance(g, bytes) for g in got)
    assert sum(len(g) for g in got) // 2 > 0.5 * 24000  # the echo of the speech, at 24 kHz


def test_our_client_talks_to_a_python_socketio_server() -> None:
    """A Socket.IO server with the demo server's handlers (echo, at 24 kHz, one chunk per
    message): our framing against the real stack. On the virtual clock: its pings and our
    frames keep their times however loaded the machine."""
    socketio = pytest.importorskip("socketio")
    web = pytest.importorskip("aiohttp.web")
    from duplexsim.core.audio import resample

    sio_server = socketio.AsyncServer(async_mode="aiohttp", ping_interval=1, ping_timeout=0.5)
    app = web.Application()
    sio_server.attach(app)
    heard: list[np.ndarray] = []

    @sio_server.on("recording-started")
    async def started(sid):
        await sio_server.emit("stop_tts", to=sid)

    @sio_server.on("audio")
    async def audio(sid, data):
        body = json.loads(data)
        x = pcm16_to_float(bytes(body["audio"]))
        heard.append(x)
        if len(heard) == 100:  # 2 s in: say some of the speech back, once
            back = resample(np.concatenate(heard[20:45]), RATE, 24000)
            await sio_server.emit("audio", float_to_pcm16(back), to=sid)

    async def main() -> SessionOutcome:
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        try:
            client = FreezeOmniClient(
                ClientConfig(url=f"http://127.0.0.1:{port}", connect_timeout_s=5.0)
            )
            return await run_session(client, context(1.2, tail_s=0.2), SETTINGS)
        finally:
            await runner.cleanup()

    out = run_virtual(main())
    assert out.status == "ok", out.error
    # the reply comes after two pings (1 s apart, 0.5 s to answer): the pongs kept it open
    assert 1.9 < out.timing.onset_s < 2.1 and out.timing.duration_s > 0.3
