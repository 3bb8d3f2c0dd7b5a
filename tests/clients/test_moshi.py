"""moshi: wire messages, Ogg/Opus codec, the pure protocol objects, then client and fake server
over loopback WebSockets, and whole sessions through run_session."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request, Response

from duplexsim.clients.base import AudioOut, ClientConfig, ClientEvent, ErrorEvent, Transcript
from duplexsim.clients.fakekit.behaviours import behaviour_factory, make_behaviour
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.moshi import events as wire
from duplexsim.clients.moshi.client import CODEC_DELAY_S, MoshiClient
from duplexsim.clients.moshi.codec import (
    FRAME,
    OPUS_DELAY_SAMPLES,
    RATE,
    FrameBuffer,
    OggOpusDecoder,
    OggOpusEncoder,
    split_pages,
)
from duplexsim.clients.moshi.fake import FLAVOURS, Action, Close, Send, ServerProtocol, Stall
from duplexsim.clients.moshi.protocol import ClientProtocol, chat_url, query_params
from duplexsim.clients.moshi.server import start_server
from duplexsim.core.audio import resample
from duplexsim.core.errors import (
    ConfigError,
    ConnectError,
    Disconnected,
    ProtocolError,
    RemoteError,
)
from duplexsim.core.timing import measure_reply, speech_end
from duplexsim.session.engine import SessionOutcome, run_session
from tests.helpers.sessions import QUICK_STALL as SETTINGS
from tests.helpers.sessions import context, synthetic

CONTEXT_RATE = 16000


def voice(seconds: float, rate: int) -> np.ndarray:
    # synthetic_voice fades in and out over 10 ms like real speech; a hard cut (tests/helpers/signals.py
    # voiced_signal) makes Opus smear the turn's end by up to 20 ms, depending on the signal
    return synthetic(seconds, rate, f0=150.0)


def clip24(lead_s: float = 0.2, speech_s: float = 1.0, tail_s: float = 1.5) -> np.ndarray:
    """Speech at 24 kHz padded with silence to whole 80 ms frames."""
    x = np.concatenate([np.zeros(round(lead_s * RATE)), voice(speech_s, RATE)])
    x = np.concatenate([x, np.zeros(round(tail_s * RATE))]).astype(np.float32)
    return x[: x.size - x.size % FRAME]


def ready_client() -> ClientProtocol:
    proto = ClientProtocol()
    proto.receive_handshake(b"\x00")
    return proto


def opened(server: ServerProtocol) -> ServerProtocol:
    assert all(isinstance(a, Send) for a in server.open())
    return server


def sent(actions: list[Action]) -> list[bytes]:
    """The messages of actions that must all be binary sends."""
    messages = [a.message for a in actions if isinstance(a, Send)]
    assert len(messages) == len(actions), actions
    return [m for m in messages if isinstance(m, bytes)]


# --- wire messages -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("msg", "data"),
    [
        (wire.Handshake(), b"\x00"),
        (wire.Handshake(bytes(8)), b"\x00" + bytes(8)),
        (wire.Audio(b"OggS..."), b"\x01OggS..."),
        (wire.Text(" héllo"), b"\x02 h\xc3\xa9llo"),
        (wire.Control(wire.ControlAction.END_TURN), b"\x03\x01"),
        (wire.Metadata({"a": 1}), b'\x04{"a":1}'),
        (wire.Error("boom"), b"\x05boom"),
        (wire.Ping(), b"\x06"),
        (wire.ColoredText(3, "hi"), b"\x07\x03hi"),
        (wire.Unused(9, b"xy"), b"\x09xy"),
    ],
)
def test_messages_round_trip_through_their_bytes(msg: wire.Message, data: bytes) -> None:
    assert wire.encode(msg) == data
    assert wire.decode(data) == msg


def test_handshake_versions_only_from_rust_servers() -> None:
    assert wire.Handshake().versions is None
    assert wire.Handshake(b"\x00\x00\x00\x00\x02\x00\x00\x00").versions == (0, 2)


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        (b"", "empty message"),
        (b"\x0a", "unknown message kind 0x0a"),
        (b"\xff\x00", "unknown message kind 0xff"),
        (b"\x02\xff\xfe", "not valid UTF-8"),
        (b"\x04{nope", "not valid JSON"),
        (b"\x03\x07", "unknown control action 7"),
        (b"\x03", "0 payload bytes"),
        (b"\x07", "without its colour byte"),
    ],
)
def test_malformed_messages_are_protocol_errors(data: bytes, complaint: str) -> None:
    with pytest.raises(ProtocolError, match=complaint):
        wire.decode(data)


# --- codec ---------------------------------------------------------------------------------


def round_trip(x: np.ndarray) -> np.ndarray:
    encoder, decoder = OggOpusEncoder(), OggOpusDecoder()
    frames = (x[i : i + FRAME] for i in range(0, x.size, FRAME))
    return np.concatenate([decoder.decode(encoder.encode(f)) for f in frames])


def test_codec_round_trip_keeps_the_length_and_delays_by_the_lookahead() -> None:
    noise = (0.1 * np.random.default_rng(1).standard_normal(10 * FRAME)).astype(np.float32)
    y = round_trip(noise)
    assert y.size == noise.size and y.dtype == np.float32
    best = max(range(400), key=lambda d: float(np.dot(y[d : d + 12000], noise[:12000])))
    assert best == OPUS_DELAY_SAMPLES
    x = clip24(0.0, 0.8, 0.0)
    aligned = round_trip(x)[OPUS_DELAY_SAMPLES:]
    assert np.corrcoef(aligned, x[: aligned.size])[0, 1] > 0.85  # lossy, but the same voice


def test_encoder_cuts_any_chunking_into_the_same_stream() -> None:
    x = clip24(0.0, 0.4, 0.0)
    whole = OggOpusEncoder().encode(x)
    enc = OggOpusEncoder()
    pieces = b"".join(enc.encode(x[i : i + 700]) for i in range(0, x.size, 700))
    assert pieces == whole and enc.pending == 0
    assert OggOpusEncoder().encode(x[:1000]) == b""  # less than a frame: nothing yet


def test_decoder_takes_the_stream_in_any_split() -> None:
    data = OggOpusEncoder().encode(clip24(0.0, 0.4, 0.0))
    dec = OggOpusDecoder()
    split = np.concatenate([dec.decode(data[i : i + 37]) for i in range(0, len(data), 37)])
    assert np.array_equal(split, OggOpusDecoder().decode(data))


def test_undecodable_bytes_break_the_stream() -> None:
    dec = OggOpusDecoder()
    dec.decode(OggOpusEncoder().encode(np.zeros(FRAME, np.float32)))
    with pytest.raises(ProtocolError, match="undecodable Ogg/Opus"):
        dec.decode(b"NotOgg at all, and longer than a page header")
    with pytest.raises(ProtocolError, match="already broken"):
        dec.decode(b"OggS")


def test_split_pages_and_frame_buffer() -> None:
    data = OggOpusEncoder().encode(np.zeros(2 * FRAME, np.float32))
    pages = split_pages(data)
    assert b"".join(pages) == data and all(p.startswith(b"OggS") for p in pages)
    assert pages[0][28:36] == b"OpusHead" and pages[1][28:36] == b"OpusTags"
    with pytest.raises(ValueError):
        split_pages(data[:-1])
    buf = FrameBuffer(4)
    assert [f.tolist() for f in buf.push(np.arange(6))] == [[0, 1, 2, 3]]
    assert [f.tolist() for f in buf.push(np.arange(6, 10))] == [[4, 5, 6, 7]]
    assert buf.pending == 2


# --- client protocol -----------------------------------------------------------------------


def test_url_and_query_parameters() -> None:
    params = query_params(
        {"text_prompt": "Be kind.", "seed": 42, "greedy": True, "x": None}, "NATF2.pt"
    )
    assert params == {
        "text_prompt": "Be kind.",
        "seed": "42",
        "greedy": "true",
        "voice_prompt": "NATF2.pt",
    }
    assert query_params({"voice_prompt": "VARM1.pt"}, "NATF2.pt") == {"voice_prompt": "VARM1.pt"}
    assert chat_url("ws://h:8998", {}) == "ws://h:8998/api/chat"
    assert chat_url("https://h/x/api/chat/", {"a": "b c"}) == "wss://h/x/api/chat?a=b+c"
    assert chat_url("http://h:1/?k=1", {"a": "2"}) == "ws://h:1/api/chat?k=1&a=2"
    with pytest.raises(ConfigError):
        query_params({"text_prompt": ["no"]})
    with pytest.raises(ConfigError):
        chat_url("ftp://h", {})


def test_server_messages_become_stamped_events() -> None:
    proto = ready_client()
    assert proto.receive(b"\x02 Hello", 1.5) == [Transcript(" Hello", 1.5)]
    assert proto.receive(b"\x07\x01 there", 1.6) == [Transcript(" there", 1.6)]
    for quiet in (b"", b"\x06", b"\x03\x01", b"\x00", b"\x08img", b"\x02"):
        assert proto.receive(quiet, 2.0) == []
    assert proto.receive(b'\x04{"instance_name":"x"}', 2.0) == []
    assert proto.metadata == {"instance_name": "x"}
    [event] = proto.receive(b"\x05model overloaded", 2.5)
    assert isinstance(event, ErrorEvent) and event.fatal and event.arrival == 2.5
    assert isinstance(event.error, RemoteError) and "model overloaded" in str(event.error)


def test_audio_messages_decode_to_stamped_audio() -> None:
    proto = ready_client()
    encoder = OggOpusEncoder()
    [event] = proto.receive(b"\x01" + encoder.encode(np.zeros(FRAME, np.float32)), 3.0)
    assert isinstance(event, AudioOut) and event.arrival == 3.0 and event.samples.size == FRAME
    assert event.offset_s is None


def test_client_audio_messages_are_whole_frames_of_one_stream() -> None:
    proto = ready_client()
    assert proto.audio_message(np.zeros(FRAME // 2, np.float32)) is None
    first = proto.audio_message(np.zeros(FRAME, np.float32))
    assert first is not None and first[:1] == b"\x01" and first[1:5] == b"OggS"
    assert b"OpusHead" in first
    second = proto.audio_message(np.zeros(FRAME, np.float32))
    assert second is not None and b"OpusHead" not in second


@pytest.mark.parametrize(
    ("first", "error", "complaint"),
    [
        (b"\x01OggS", ProtocolError, "expected the handshake"),
        ("hello", ProtocolError, "text frame"),
        (b"", ProtocolError, "empty message"),
        (b"\x05busy", RemoteError, "busy"),
    ],
)
def test_bad_handshakes(first: str | bytes, error: type, complaint: str) -> None:
    with pytest.raises(error, match=complaint):
        ClientProtocol().receive_handshake(first)


def test_client_protocol_errors() -> None:
    with pytest.raises(ProtocolError, match="before the handshake"):
        ClientProtocol().receive(b"\x02hi", 0.0)
    with pytest.raises(ProtocolError, match="text frame"):
        ready_client().receive("hi", 0.0)
    with pytest.raises(ProtocolError, match="undecodable"):
        ready_client().receive(b"\x01" + b"NotOgg, and longer than one page header", 0.0)


# --- server protocol -----------------------------------------------------------------------


def test_server_answers_each_80ms_frame_with_one_80ms_frame() -> None:
    server = opened(ServerProtocol(behaviour_factory("echo", echo_s=0.5)))
    client = ready_client()
    x = clip24(0.2, 0.8, 1.6)
    texts: list[str] = []
    for i in range(0, x.size, FRAME // 2):  # half frames: an answer every other message
        messages = sent(server.receive(client.audio_message(x[i : i + FRAME // 2]) or b""))
        if (i // (FRAME // 2)) % 2 == 0:
            assert messages == []
            continue
        audio = [m for m in messages if m[0] == wire.Kind.AUDIO]
        assert len(audio) == 1
        pcm = [e for e in client.receive(audio[0], 0.0) if isinstance(e, AudioOut)]
        assert sum(e.samples.size for e in pcm) == FRAME
        texts += [m[1:].decode() for m in messages if m[0] == wire.Kind.TEXT]
    assert texts == [" Hello", " there."]
    assert server.received_s == pytest.approx(x.size / RATE)


def test_server_ignores_what_the_real_servers_ignore() -> None:
    server = opened(ServerProtocol(behaviour_factory("echo")))
    for message in ("text", b"", b"\x02hi", b"\x03\x00", b"\x06"):
        assert server.receive(message) == []
    [close] = server.receive(b"\x01" + b"NotOgg, and longer than one page header")
    assert isinstance(close, Close) and close.code == 1011 and "undecodable" in close.reason
    assert server.receive(b"\x01") == []


def test_rust_flavour_handshake_metadata_and_40ms_packets() -> None:
    server = ServerProtocol(behaviour_factory("silent"), flavour=FLAVOURS["rust"])
    handshake, metadata = sent(server.open())
    client = ClientProtocol()
    assert client.receive_handshake(handshake).versions == (0, 0)
    assert client.receive(metadata, 0.0) == [] and client.metadata["instance_name"]
    encoder = OggOpusEncoder()
    header, first, second = sent(
        server.receive(b"\x01" + encoder.encode(np.zeros(FRAME, np.float32)))
    )
    assert client.receive(header, 0.0) == []  # OpusHead and OpusTags alone decode to nothing
    pcm = [e for m in (first, second) for e in client.receive(m, 0.0) if isinstance(e, AudioOut)]
    sizes = [e.samples.size for e in pcm]
    assert sizes == [FRAME // 2, FRAME // 2]
    assert len(sent(server.receive(b"\x01" + encoder.encode(np.zeros(FRAME, np.float32))))) == 2


@pytest.mark.parametrize(
    ("query", "complaint"),
    [
        ({"voice_prompt": "NATF2.pt"}, "missing query parameter 'text_prompt'"),
        ({"text_prompt": "hi"}, "missing query parameter 'voice_prompt'"),
        ({"text_prompt": "hi", "voice_prompt": "NOPE.pt"}, "voice prompt 'NOPE.pt' not found"),
    ],
)
def test_personaplex_flavour_fails_like_personaplex(query: dict[str, str], complaint: str) -> None:
    server = ServerProtocol(behaviour_factory("echo"), flavour=FLAVOURS["personaplex"], query=query)
    assert server.open() == [Close(1011, complaint)]
    assert server.receive(b"\x01OggS") == []


def test_personaplex_flavour_accepts_a_known_voice() -> None:
    query = {"text_prompt": "", "voice_prompt": "VARM4.pt"}
    server = ServerProtocol(behaviour_factory("echo"), flavour=FLAVOURS["personaplex"], query=query)
    assert sent(server.open()) == [b"\x00"]


def test_server_media_faults_trigger_on_media_time() -> None:
    encoder = OggOpusEncoder()
    frame = b"\x01" + encoder.encode(np.zeros(FRAME, np.float32))
    more = b"\x01" + encoder.encode(np.zeros(4 * FRAME, np.float32))
    closing = opened(ServerProtocol(behaviour_factory("echo"), Faults(close_after_s=0.3)))
    assert len(sent(closing.receive(frame))) == 1
    *answers, close = closing.receive(more)  # frames 2 and 3 answered, frame 4 reaches 0.32 s
    assert len(sent(answers)) == 2 and close == Close(1011, "injected fault: close_after_s")
    stalling = opened(ServerProtocol(behaviour_factory("echo"), Faults(stall_after_s=0.08)))
    assert stalling.receive(frame) == [Stall()]
    bad = opened(
        ServerProtocol(
            behaviour_factory("echo"), Faults(malformed_after_s=0.08, malformed_then_close=True)
        )
    )
    _audio, garbage, close = bad.receive(frame)
    assert isinstance(garbage, Send) and isinstance(close, Close)
    with pytest.raises(ProtocolError, match="undecodable"):
        ready_client().receive(garbage.message, 0.0)


def test_codec_path_adds_exactly_the_documented_delay() -> None:
    """Client -> fake server -> client without sockets: the delayed echo's onset lands at
    E + latency + CODEC_DELAY_S, E measured on what the client sent."""
    latency = 0.3
    ctx = context(tail_s=0.3, voice=voice)  # speech ends at 1.2 s
    end = speech_end(ctx, CONTEXT_RATE)
    x = resample(ctx, CONTEXT_RATE, RATE)
    x = np.concatenate([x, np.zeros(2 * RATE, np.float32)])[: (x.size // FRAME + 25) * FRAME]
    client = ready_client()
    server = opened(
        ServerProtocol(behaviour_factory("delayed-echo", latency_s=latency, hangover_s=0.25))
    )
    out: list[np.ndarray] = []
    for i in range(0, x.size, FRAME):
        for message in sent(server.receive(client.audio_message(x[i : i + FRAME]) or b"")):
            out += [e.samples for e in client.receive(message, 0.0) if isinstance(e, AudioOut)]
    y = np.concatenate(out)
    assert y.size == x.size
    timing = measure_reply(y, RATE, speech_end_s=end)
    assert timing.latency_s is not None
    assert timing.latency_s - latency == pytest.approx(CODEC_DELAY_S, abs=0.001)
    assert pytest.approx(0.013) == CODEC_DELAY_S


# --- over loopback -------------------------------------------------------------------------


def config(url: str, **kw: Any) -> ClientConfig:
    return ClientConfig(url=url, **{"connect_timeout_s": 2.0, **kw})


async def stream(client: MoshiClient, x: np.ndarray) -> list[ClientEvent]:
    """Send ``x`` in 80 ms frames as fast as possible; collect events until the output has
    caught up with the input or an error arrived."""
    events: list[ClientEvent] = []

    async def read() -> None:
        heard = 0
        async for event in client.events():
            events.append(event)
            heard += event.samples.size if isinstance(event, AudioOut) else 0
            if heard >= x.size or isinstance(event, ErrorEvent):
                return

    reader = asyncio.create_task(read())
    for i in range(0, x.size, FRAME):
        await client.send_audio(x[i : i + FRAME])
    await asyncio.wait_for(reader, 5.0)
    await client.aclose()
    return events


@pytest.mark.parametrize("flavour", ["moshi", "rust"])
async def test_echo_over_loopback_matches_the_behaviour(flavour: str) -> None:
    async with await start_server(behaviour_factory("echo"), flavour=flavour) as server:
        client = MoshiClient(config(server.url))
        await client.connect()
        x = clip24(0.2, 0.8, 1.5)
        events = await stream(client, x)
    out = np.concatenate([e.samples for e in events if isinstance(e, AudioOut)])
    assert out.size == x.size
    # the server heard x through Opus; its reply went through Opus once more
    heard_by_server = OggOpusDecoder().decode(OggOpusEncoder().encode(x))
    local = make_behaviour("echo", RATE)
    want = np.concatenate(
        [local.push(heard_by_server[i : i + FRAME]).audio for i in range(0, x.size, FRAME)]
    )
    want = OggOpusDecoder().decode(OggOpusEncoder().encode(want))
    assert np.max(np.abs(out - want)) < 1e-6
    assert [e.text for e in events if isinstance(e, Transcript)] == [" Hello", " there."]
    assert 0 < client.bytes_sent < 2 * x.size and client.bytes_received > 0  # compressed


async def test_query_parameters_are_sent_and_recorded() -> None:
    options = {"text_prompt": "You are kind.", "seed": 7}
    async with await start_server(behaviour_factory("echo"), flavour="personaplex") as server:
        client = MoshiClient(config(server.url, voice="NATM1.pt", options=options))
        await client.connect()
        await client.aclose()
        refused = MoshiClient(config(server.url, voice="NOBODY.pt", options=options))
        with pytest.raises(ConnectError, match=r"NOBODY\.pt' not found") as err:
            await refused.connect()
    assert err.value.retryable
    assert server.queries[0] == {
        "text_prompt": "You are kind.",
        "seed": "7",
        "voice_prompt": "NATM1.pt",
    }
    assert client.describe()["codec_delay_s"] == CODEC_DELAY_S


async def test_api_key_goes_only_in_headers() -> None:
    seen: list[tuple[str, str | None, str | None]] = []

    def refuse(connection: ServerConnection, request: Request) -> Response:
        seen.append(
            (
                request.path,
                request.headers.get("kyutai-api-key"),
                request.headers.get("Authorization"),
            )
        )
        return connection.respond(401, "no\n")

    async def never(ws: ServerConnection) -> None:
        raise AssertionError("handshake was refused")

    async with serve(never, "127.0.0.1", 0, process_request=refuse) as server:
        port = server.sockets[0].getsockname()[1]
        client = MoshiClient(
            config(f"ws://127.0.0.1:{port}", api_key="sk-secret-123", options={"seed": 1})
        )
        with pytest.raises(ConnectError) as err:
            await client.connect()
    assert seen == [("/api/chat?seed=1", "sk-secret-123", "Bearer sk-secret-123")]
    assert err.value.reason == "auth" and not err.value.retryable
    assert "sk-secret-123" not in str(err.value) and "sk-secret-123" not in json.dumps(
        client.describe()
    )


async def test_no_handshake_in_time_is_a_retryable_connect_error() -> None:
    async with await start_server(behaviour_factory("echo"), handshake_delay_s=1.0) as server:
        with pytest.raises(ConnectError, match=r"no handshake within 0\.2 s") as err:
            await MoshiClient(config(server.url, connect_timeout_s=0.2)).connect()
    assert err.value.retryable


async def test_exclusive_server_makes_later_clients_wait() -> None:
    async with await start_server(behaviour_factory("echo"), exclusive=True) as server:
        first = MoshiClient(config(server.url))
        await first.connect()
        with pytest.raises(ConnectError, match="no handshake"):
            await MoshiClient(config(server.url, connect_timeout_s=0.2)).connect()
        await first.aclose()
        second = MoshiClient(config(server.url))
        await second.connect()
        await second.aclose()


async def test_close_fault_is_a_disconnect_event() -> None:
    async with await start_server(
        behaviour_factory("echo"), faults=Faults(close_after_s=0.4)
    ) as server:
        client = MoshiClient(config(server.url))
        await client.connect()
        events = await stream(client, clip24())
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.fatal
    assert isinstance(last.error, Disconnected) and "1011" in str(last.error)
    assert sum(e.samples.size for e in events if isinstance(e, AudioOut)) == 4 * FRAME


# --- sessions ------------------------------------------------------------------------------


async def session(behaviour: str, *, faults: Faults | None = None, **params: Any) -> SessionOutcome:
    server = await start_server(behaviour_factory(behaviour, **params), faults=faults)
    try:
        client = MoshiClient(ClientConfig(url=server.url, connect_timeout_s=2.0))
        return await run_session(client, context(tail_s=0.3, voice=voice), SETTINGS)
    finally:
        await server.aclose()


async def test_session_echo_returns_audio_and_text() -> None:
    out = await session("echo", echo_s=0.5)
    assert out.status == "ok", out.error
    assert out.input_rate == out.output_rate == RATE
    assert out.send.frames == out.sent.size // FRAME
    texts = [e["text"] for e in out.events if e["kind"] == "transcript"]
    assert texts == [" Hello", " there."]
    assert out.timing is not None and out.timing.latency_s is not None
    assert 0.55 < out.timing.latency_s < 1.0  # echo replies once its 0.6 s hangover has passed


def onset_lag_s(out: SessionOutcome) -> float:
    """How late the timeline placed the output chunk holding the reply's onset: chunk k answers
    input frame k, due at T0 + (samples before it) / rate, and is placed at max(arrival, end of
    chunk k-1), so one late arrival delays every later chunk (machine load, not the protocol)."""
    assert out.timing is not None and out.timing.onset_s is not None
    recv = [e for e in out.events if e["dir"] == "recv" and e["kind"] == "audio"]
    placed = np.array([e["placed_s"] for e in recv])
    due = np.cumsum([0] + [e["samples"] for e in recv[:-1]]) / RATE
    k = int(np.searchsorted(placed, out.timing.onset_s, side="right")) - 1
    return float(placed[k] - due[k])


async def test_session_delayed_echo_latency_is_recovered() -> None:
    latency = 0.3
    out = await session("delayed-echo", latency_s=latency, hangover_s=0.25)
    assert out.status == "ok", out.error
    assert out.timing is not None and out.timing.latency_s is not None
    assert out.timing.speech_end_s == pytest.approx(1.2, abs=0.01)  # the voice fades out
    assert out.timing.overlap_s == 0.0
    # measured = injected + the codec's fixed delay + what the timeline's placement added; the
    # last is scheduling delay on a loaded box (typically 5-20 ms here), so it is taken out
    error = out.timing.latency_s - latency - CODEC_DELAY_S
    assert error == pytest.approx(onset_lag_s(out), abs=0.005)


async def test_session_silent_model_is_no_reply() -> None:
    out = await session("silent")
    assert out.status == "no-reply" and out.error is None
    # Moshi's pacing: one output frame came back for every frame sent
    received = sum(e["samples"] for e in out.events if e["kind"] == "audio" and e["dir"] == "recv")
    assert received >= out.sent.size - 3 * FRAME


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
async def test_session_faults_end_with_a_reason(
    faults: Faults, reason: str, retryable: bool
) -> None:
    out = await session("echo", faults=faults)
    assert out.status == "failed" and out.error
    assert out.end_reason == reason, out.error
    assert out.retryable is retryable
    if reason == "rate-limited":
        assert out.retry_after_s == pytest.approx(0.2)
