"""openai-webrtc: signaling and protocol without I/O, aiortc helpers, then the client against the
fake server over loopback (real ICE, DTLS, SRTP and SCTP on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import time
from collections.abc import AsyncIterator, Sequence
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("aiortc", reason="openai-webrtc needs aiortc (pip install 'duplexsim[webrtc]')")

import aioice.ice
from aiortc import RTCSessionDescription
from aiortc.codecs.opus import OpusDecoder
from aiortc.jitterbuffer import JitterFrame
from aiortc.mediastreams import MediaStreamTrack
from aiortc.rtp import RtpPacket
from av import AudioFrame, Packet

from duplexsim.clients.base import (
    AudioOut,
    ClientConfig,
    EndOfTurn,
    ErrorEvent,
    SpeechStarted,
    SpeechStopped,
    Transcript,
)
from duplexsim.clients.fakekit.behaviours import behaviour_factory, synthetic_voice
from duplexsim.clients.fakekit.fakeserver import RunningServer
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.openai_webrtc import signaling
from duplexsim.clients.openai_webrtc.client import CODEC_DELAY_S, OpenAIWebRTCClient
from duplexsim.clients.openai_webrtc.fake import Close, SendAudio, SendEvent, ServerProtocol, Stall
from duplexsim.clients.openai_webrtc.protocol import ClientProtocol, WebRTCOptions
from duplexsim.clients.openai_webrtc.server import start_server
from duplexsim.clients.transport.rtc import (
    ENCODER_DELAY_S,
    FRAME,
    FRAME_S,
    RATE,
    OutgoingAudioTrack,
    PassThroughJitterBuffer,
    bypass_jitter_buffer,
    frame_to_mono,
    is_loopback_host,
    loopback_ice,
    new_peer_connection,
)
from duplexsim.core.errors import (
    ConfigError,
    ConnectError,
    ProtocolError,
    RateLimited,
    RemoteError,
)
from duplexsim.core.timing import TimingBudget
from duplexsim.session import eventloop
from duplexsim.session.engine import SessionOutcome, run_session
from tests.helpers.sessions import QUICK_STALL as SETTINGS
from tests.helpers.sessions import context, settings
from tests.helpers.timing import assert_latency, vouched
from tests.helpers.virtualclock import run_virtual
from tests.helpers.waits import async_wait_until

KEY = "sk-test-SECRET-4242"


def config(url: str, *, api_key: str | None = KEY, **options: object) -> ClientConfig:
    return ClientConfig(url=url, api_key=api_key, options=options, connect_timeout_s=3.0)


# --- signaling ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("https://api.openai.com", "/v1/realtime/calls"),
        ("https://api.openai.com/", "/v1/realtime/calls"),
        ("https://api.openai.com/v1", "/v1/realtime/calls"),
        ("https://x.example/v1/realtime/calls", "/v1/realtime/calls"),
        ("http://127.0.0.1:8080/proxy", "/proxy/v1/realtime/calls"),
    ],
)
def test_calls_target_appends_the_calls_path(url: str, path: str) -> None:
    assert signaling.calls_target(url).path == path


def test_calls_target_ports_schemes_and_model() -> None:
    t = signaling.calls_target("wss://api.openai.com", "gpt-realtime")
    assert (t.scheme, t.host, t.port) == ("https", "api.openai.com", 443)
    assert t.path == "/v1/realtime/calls?model=gpt-realtime" and t.host_header == "api.openai.com"
    local = signaling.calls_target("http://127.0.0.1:9000?model=m")
    assert local.host_header == "127.0.0.1:9000" and local.path.endswith("?model=m")
    with pytest.raises(ConnectError) as err:
        signaling.calls_target("ftp://example.com")
    assert not err.value.retryable


def test_raw_sdp_request() -> None:
    target = signaling.calls_target("https://api.openai.com")
    req = signaling.build_call_request(target, "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\n", api_key="ek_1")
    head, _, body = req.encode().partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/realtime/calls HTTP/1.1"
    assert {"Host: api.openai.com", "Authorization: Bearer ek_1", "Accept: application/sdp"} <= set(
        lines
    )
    assert "Content-Type: application/sdp" in lines and f"Content-Length: {len(body)}" in lines
    assert body.startswith(b"v=0") and "ek_1" not in repr(req)


def test_multipart_request_round_trips_through_the_server_parser() -> None:
    target = signaling.calls_target("https://api.openai.com")
    session = {"type": "realtime", "model": "gpt-realtime"}
    req = signaling.build_call_request(target, "v=0\r\n", api_key=KEY, session=session)
    content_type = req.header("Content-Type")
    assert content_type is not None and content_type.startswith("multipart/form-data; boundary=")
    method, path, headers = signaling.parse_request_head(
        req.encode().partition(b"\r\n\r\n")[0] + b"\r\n\r\n"
    )
    assert (method, path, headers["authorization"]) == (
        "POST",
        "/v1/realtime/calls",
        f"Bearer {KEY}",
    )
    assert signaling.parse_offer(content_type, req.body) == ("v=0\r\n", session)
    assert signaling.parse_offer("application/sdp", b"v=0\r\n") == ("v=0\r\n", None)
    with pytest.raises(ProtocolError, match="Content-Type"):
        signaling.parse_offer("text/plain", b"v=0")


def test_parse_response_framings_and_call_id() -> None:
    plain = signaling.parse_response(
        b"HTTP/1.1 201 Created\r\nContent-Type: application/sdp\r\n"
        b"Location: /v1/realtime/calls/rtc_abc\r\nContent-Length: 5\r\n\r\nv=0\r\nextra"
    )
    assert (plain.status, plain.body) == (201, b"v=0\r\n")
    assert signaling.call_id(plain.headers["location"]) == "rtc_abc"
    chunked = signaling.parse_response(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nv=0\r\n2\r\n\r\n\r\n0\r\n\r\n"
    )
    assert chunked.body == b"v=0\r\n"
    with pytest.raises(ProtocolError):
        signaling.parse_response(b"SSH-2.0-OpenSSH\r\n\r\n")
    with pytest.raises(ProtocolError, match="cut short"):
        signaling.parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nv=0")


@pytest.mark.parametrize(
    ("status", "headers", "body", "kind", "retryable", "reason"),
    [
        (
            401,
            {},
            b'{"error":{"message":"Incorrect API key provided: sk-test-SECRET-4242"}}',
            ConnectError,
            False,
            "auth",
        ),
        (403, {}, b"", ConnectError, False, "auth"),
        (429, {"retry-after": "2.5"}, b"", RateLimited, True, "rate-limited"),
        (
            429,
            {},
            b'{"error":{"code":"insufficient_quota","message":"quota"}}',
            ConnectError,
            False,
            "quota",
        ),
        (
            400,
            {},
            b'{"error":{"message":"bad SDP for sk-test-SECRET-4242"}}',
            ConnectError,
            False,
            "connect",
        ),
        (500, {}, b"", ConnectError, True, "connect"),
        (503, {}, b"", ConnectError, True, "connect"),
    ],
)
def test_refusals_map_to_errors(
    status: int, headers: dict[str, str], body: bytes, kind: type, retryable: bool, reason: str
) -> None:
    error = signaling.call_error(signaling.HttpResponse(status, headers, body), secret=KEY)
    assert type(error) is kind and error.retryable is retryable and error.reason == reason
    assert str(status) in str(error) and KEY not in str(error)
    if isinstance(error, RateLimited):
        assert error.retry_after_s == 2.5


# --- options and the data channel -----------------------------------------------------------


def test_options_defaults_and_checks() -> None:
    o = WebRTCOptions.from_options({}, voice="marin", model="gpt-realtime")
    assert not o.manual and o.idle_fill_s == 0.5
    assert o.multipart(KEY) and not o.multipart("ek_123") and o.multipart(None)
    session = o.session()
    assert session["type"] == "realtime" and "model" not in session
    assert session["audio"] == {
        "input": {"turn_detection": {"type": "server_vad"}},
        "output": {"voice": "marin"},
    }
    assert o.session(with_model=True)["model"] == "gpt-realtime"
    manual = WebRTCOptions.from_options(
        {"turn_detection": "none", "session": {"instructions": "hi"}}
    )
    assert manual.manual and manual.session()["audio"]["input"]["turn_detection"] is None
    assert manual.session()["instructions"] == "hi"
    bad_options = (
        {"sdp_fromat": "sdp"},
        {"idle_fill_s": -1},
        {"turn_detection": "vad"},
        {"jitter_delay_s": 0.08},  # arrivals are not corrected any more: no such option
    )
    for bad in bad_options:
        with pytest.raises(ConfigError):
            WebRTCOptions.from_options(bad)


def ready_protocol(**options: object) -> ClientProtocol:
    proto = ClientProtocol(WebRTCOptions.from_options(options), secrets=(KEY,))
    [update] = proto.receive_handshake('{"type":"session.created","session":{"id":"s"}}')
    assert json.loads(update)["type"] == "session.update"
    assert proto.receive_handshake('{"type":"session.updated","session":{"id":"s"}}') == []
    assert proto.ready
    return proto


def test_handshake_sends_the_session_update_once_created() -> None:
    proto = ClientProtocol(WebRTCOptions.from_options({"instructions": "be brief"}))
    assert proto.receive_handshake('{"type":"rate_limits.updated","rate_limits":[]}') == []
    [update] = proto.receive_handshake('{"type":"session.created","session":{}}')
    body = json.loads(update)
    assert body["session"]["instructions"] == "be brief" and body["event_id"]
    assert not proto.ready


def test_handshake_error_is_raised() -> None:
    proto = ClientProtocol(WebRTCOptions())
    text = '{"type":"error","error":{"type":"invalid_request_error","code":"invalid_api_key","message":"no"}}'
    with pytest.raises(RemoteError) as err:
        proto.receive_handshake(text)
    assert err.value.reason == "auth" and not err.value.retryable


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"type":"input_audio_buffer.speech_started","audio_start_ms":10}', [SpeechStarted(2.0)]),
        ('{"type":"input_audio_buffer.speech_stopped","audio_end_ms":90}', [SpeechStopped(2.0)]),
        ('{"type":"response.output_audio_transcript.delta","delta":"he"}', [Transcript("he", 2.0)]),
        (
            '{"type":"response.output_audio_transcript.done","transcript":"hey"}',
            [Transcript("hey", 2.0, True)],
        ),
        ('{"type":"response.done","response":{"status":"completed"}}', [EndOfTurn(2.0)]),
        ('{"type":"response.done","response":{"status":"cancelled"}}', [EndOfTurn(2.0)]),
        ('{"type":"output_audio_buffer.stopped","response_id":"r"}', []),  # nothing was playing
        ('{"type":"response.output_audio.delta","delta":"AAAAAA=="}', []),  # audio comes over RTP
        ('{"type":"rate_limits.updated","rate_limits":[]}', []),
        ('{"type":"some.future.event"}', []),
    ],
)
def test_channel_events_map_like_the_websocket_client(text: str, expected: list[object]) -> None:
    assert ready_protocol().receive_text(text, 2.0) == expected


def test_end_of_turn_waits_for_the_output_buffer_to_drain() -> None:
    proto = ready_protocol()
    assert proto.receive_text('{"type":"output_audio_buffer.started","response_id":"r"}', 1.0) == []
    assert (
        proto.receive_text(
            '{"type":"response.done","response":{"id":"r","status":"completed"}}', 1.1
        )
        == []
    )
    assert proto.receive_text('{"type":"output_audio_buffer.stopped","response_id":"r"}', 3.0) == [
        EndOfTurn(3.0)
    ]
    proto.receive_text('{"type":"output_audio_buffer.started","response_id":"r2"}', 4.0)
    assert proto.receive_text('{"type":"output_audio_buffer.cleared","response_id":"r2"}', 4.5) == [
        EndOfTurn(4.5)
    ]
    eager = ready_protocol(end_of_turn="response_done")
    eager.receive_text('{"type":"output_audio_buffer.started","response_id":"r"}', 1.0)
    assert eager.receive_text(
        '{"type":"response.done","response":{"status":"completed"}}', 1.1
    ) == [EndOfTurn(1.1)]
    assert eager.receive_text('{"type":"output_audio_buffer.stopped"}', 3.0) == []


def test_errors_and_failed_responses() -> None:
    proto = ready_protocol()
    [event] = proto.receive_text(
        '{"type":"error","error":{"type":"invalid_request_error","message":"bad param"}}', 1.0
    )
    assert isinstance(event, ErrorEvent) and not event.fatal and "bad param" in str(event.error)
    [failed] = proto.receive_text(
        '{"type":"response.done","response":{"status":"failed","status_details":'
        '{"error":{"type":"server_error","message":"boom"}}}}',
        2.0,
    )
    assert isinstance(failed, ErrorEvent) and failed.fatal and failed.error.retryable
    with pytest.raises(ProtocolError, match="not valid JSON"):
        proto.receive_text('{"type": "response.done"', 3.0)


def test_manual_turns_commit_and_ask_for_a_response() -> None:
    assert ready_protocol().commit_messages() == []
    kinds = [json.loads(m)["type"] for m in ready_protocol(turn_detection="none").commit_messages()]
    assert kinds == ["input_audio_buffer.commit", "response.create"]


# --- the fake server's protocol -----------------------------------------------------------------


def types(actions: Sequence[object]) -> list[str]:
    return [json.loads(a.text)["type"] for a in actions if isinstance(a, SendEvent)]


def test_server_session_events() -> None:
    server = ServerProtocol(behaviour_factory("echo"), call_id="c1", session={"model": "m"})
    [created] = server.open()
    assert isinstance(created, SendEvent)
    assert json.loads(created.text)["session"]["model"] == "m"
    update = (
        '{"type":"session.update","event_id":"e1","session":{"type":"realtime","instructions":"x"}}'
    )
    [updated] = server.receive_text(update)
    assert (
        isinstance(updated, SendEvent)
        and json.loads(updated.text)["session"]["instructions"] == "x"
    )
    assert types(server.receive_text('{"type":"session.update","session":{}}')) == ["error"]
    [unknown] = server.receive_text('{"type":"nope","event_id":"e9"}')
    assert isinstance(unknown, SendEvent) and json.loads(unknown.text)["error"]["event_id"] == "e9"
    assert types(server.receive_text("{bad")) == ["error"]


def test_server_drives_the_behaviour_frame_by_frame() -> None:
    server = ServerProtocol(behaviour_factory("echo", hangover_s=0.3), rate=RATE)
    x = context(0.6, rate=RATE)
    x = np.concatenate([x, np.zeros(RATE, np.float32)])
    seen: list[str] = []
    audio = 0
    for i in range(0, x.size, FRAME):
        actions = server.receive_audio(x[i : i + FRAME])
        audio += sum(a.samples.size for a in actions if isinstance(a, SendAudio))
        seen += types(actions)
    assert audio == x.size
    assert seen == [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "response.created",
        "output_audio_buffer.started",
        "response.done",
        "output_audio_buffer.stopped",
    ]


def test_server_media_faults() -> None:
    frame = np.zeros(FRAME, np.float32)
    closing = ServerProtocol(behaviour_factory("silent"), Faults(close_after_s=0.05))
    assert [closing.receive_audio(frame)[-1] for _ in range(3)][-1] == Close(
        "injected fault: close_after_s"
    )
    assert closing.receive_audio(frame) == []
    stalling = ServerProtocol(behaviour_factory("silent"), Faults(stall_after_s=0.04))
    assert stalling.receive_audio(frame) != [Stall()]
    assert stalling.receive_audio(frame) == [Stall()]
    bad = ServerProtocol(behaviour_factory("silent"), Faults(malformed_after_s=0.02))
    garbage = bad.receive_audio(frame)[-1]
    assert isinstance(garbage, SendEvent)
    with pytest.raises(json.JSONDecodeError):
        json.loads(garbage.text)


def test_fake_server_resampling_keeps_pace() -> None:
    from duplexsim.clients.fakekit.rtcfake import _Resampler

    down, up = _Resampler(RATE, 16000), _Resampler(16000, RATE)
    sizes = [(d.size, up(d).size) for d in (down(np.zeros(FRAME, np.float32)) for _ in range(50))]
    assert sizes == [(320, FRAME)] * 50  # no frame waits for the next one
    assert _Resampler(RATE, RATE)(np.ones(3)).dtype == np.float32


# --- aiortc helpers -----------------------------------------------------------------------------


def test_loopback_ice_is_scoped() -> None:
    assert "127.0.0.1" not in aioice.ice.get_host_addresses(use_ipv4=True, use_ipv6=False)
    with loopback_ice():
        assert aioice.ice.get_host_addresses(use_ipv4=True, use_ipv6=True) == ["127.0.0.1"]
    assert "127.0.0.1" not in aioice.ice.get_host_addresses(use_ipv4=True, use_ipv6=False)
    assert is_loopback_host("127.0.0.1") and is_loopback_host("localhost")
    assert is_loopback_host("[::1]") and not is_loopback_host("api.openai.com")


async def test_outgoing_track_rechunks_counts_pts_and_fills_when_idle() -> None:
    track = OutgoingAudioTrack(idle_fill_s=0.05)
    track.push(np.full(FRAME // 2, 0.5, np.float32))
    waiting = asyncio.create_task(track.next_frame())
    await asyncio.sleep(0.01)  # a recv with a frame to give would be done by now
    assert not waiting.done()  # half a frame is not a frame
    track.push(np.full(FRAME, -0.5, np.float32))
    first = await asyncio.wait_for(waiting, 1.0)
    assert (first.pts, first.samples, first.sample_rate) == (0, FRAME, RATE)
    mono = frame_to_mono(first)
    assert mono[0] == pytest.approx(0.5) and mono[-1] == pytest.approx(-0.5)
    t = time.monotonic()
    second = await asyncio.wait_for(track.next_frame(), 1.0)  # the other half, then silence
    assert second.pts == FRAME and time.monotonic() - t >= 0.04
    assert np.all(frame_to_mono(second) == 0.0) and track.silence_emitted == FRAME
    track.stop()


async def test_outgoing_track_gives_the_sender_each_frame_encoded() -> None:
    """aiortc's sender sends an encoded packet as it is (a raw frame goes to a worker thread
    first): one Opus packet per 20 ms frame, its pts the samples before it, decodable."""
    track = OutgoingAudioTrack()
    tone = np.sin(2 * np.pi * 440 * np.arange(3 * FRAME) / RATE).astype(np.float32)
    track.push(tone)
    packets = [await asyncio.wait_for(track.recv(), 1.0) for _ in range(3)]
    assert [p.pts for p in packets] == [0, FRAME, 2 * FRAME]
    assert all(isinstance(p, Packet) and p.time_base == Fraction(1, RATE) for p in packets)
    decoder = OpusDecoder()
    frames = [decoder.decode(JitterFrame(bytes(p), p.pts)) for p in packets]
    decoded = [frame_to_mono(f) for fs in frames for f in fs]  # type: ignore[arg-type]
    assert [d.size for d in decoded] == [FRAME] * 3
    heard = np.concatenate(decoded)[round(ENCODER_DELAY_S * RATE) :]
    assert np.corrcoef(heard, tone[: heard.size])[0, 1] > 0.9  # the tone, after the lookahead
    track.stop()


def rtp(seq: int, timestamp: int) -> RtpPacket:
    packet = RtpPacket(payload_type=111, sequence_number=seq, timestamp=timestamp, payload=b"x")
    packet._data = packet.payload  # type: ignore[attr-defined]  # what the receiver depayloads
    return packet


def test_pass_through_buffer_hands_each_packet_over_and_notes_when_it_was_read() -> None:
    now = [10.0]
    buffer = PassThroughJitterBuffer(lambda: now[0])
    origin = 2**32 - FRAME  # the RTP timestamp wraps after the first frame
    handed = []
    for seq, k, t in [
        (65535, 0, 10.0),
        (0, 1, 10.02),
        (0, 1, 10.03),
        (65534, -1, 10.04),
        (2, 3, 10.1),
    ]:
        now[0] = t
        _, frame = buffer.add(rtp(seq, (origin + k * FRAME) % 2**32))
        handed.append(frame is not None)
    # a duplicate and a packet older than the newest are dropped; seq 1 was lost: just missing
    assert handed == [True, True, False, False, True] and buffer.handed == 3
    # pts as aiortc's receiver numbers decoded frames: from the first packet's timestamp
    assert buffer.read_at(0) == (10.0, 1)
    assert buffer.read_at(3 * FRAME) == (10.1, 3)  # the frame of seq 0 never came: forgotten
    assert buffer.read_at(FRAME) is None and buffer.read_at(None) is None
    assert PassThroughJitterBuffer().add(rtp(5, 0))[1] is not None  # without a clock: no notes


async def test_outgoing_track_calls_back_once_the_pushed_audio_went_out() -> None:
    track = OutgoingAudioTrack()
    calls: list[str] = []
    track.after_sent(lambda: calls.append("nothing pushed"))
    track.push(np.zeros(2 * FRAME, np.float32))
    track.after_sent(lambda: calls.append("two frames"))
    await track.recv()
    await track.recv()  # the sender is back for the second frame: the first went out
    assert calls == ["nothing pushed"]
    third = asyncio.create_task(track.recv())  # back for a third: the second went out too
    await asyncio.sleep(0)
    assert calls == ["nothing pushed", "two frames"]
    track.push(np.zeros(FRAME // 2, np.float32))
    track.after_sent(lambda: calls.append("flushed"))
    track.clear()  # nothing left to send
    track.push(np.zeros(FRAME, np.float32))
    track.after_sent(lambda: calls.append("stopped"))
    track.stop()
    assert calls == ["nothing pushed", "two frames", "flushed", "stopped"]
    await asyncio.gather(third, return_exceptions=True)


class RemoteFrames(MediaStreamTrack):
    """A remote track whose decoded frames the test hands over."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self.frames: asyncio.Queue[AudioFrame] = asyncio.Queue()

    async def recv(self) -> AudioFrame:
        return await self.frames.get()


def decoded(pts: int) -> AudioFrame:
    frame = AudioFrame.from_ndarray(
        np.full((1, FRAME), 1000, np.int16), format="s16", layout="mono"
    )
    frame.sample_rate, frame.pts = RATE, pts
    return frame


def test_arrivals_are_the_clock_when_each_packet_was_read_and_events_queue_behind() -> None:
    """No playout model: a frame is stamped with the session's clock at the read of its packet
    (not when the decoder thread gave it back), and a data-channel event waits for the frames of
    the packets read before it (at most a frame period), so output_audio_buffer.stopped never
    ends a reply before its last frames. On the virtual clock: that period is the loop's time,
    exact however late a loaded machine runs the test."""

    async def main() -> None:
        now = [0.0]
        client = OpenAIWebRTCClient(config("http://127.0.0.1:9"))
        client.use_clock(lambda: now[0])
        proto = client._proto
        proto.receive_handshake('{"type":"session.created","session":{}}')
        proto.receive_handshake('{"type":"session.updated","session":{}}')
        client._started = True
        buffer = client._buffer = PassThroughJitterBuffer(client.clock)
        remote = RemoteFrames()
        tasks = [
            asyncio.create_task(client._read_audio(remote)),
            asyncio.create_task(client._pump()),
        ]

        def packet_read(seq: int, at: float) -> None:
            now[0] = at
            buffer.add(rtp(seq, seq * FRAME))

        def message(text: str, at: float) -> None:
            now[0] = at
            client._on_message(text)

        try:
            message('{"type":"output_audio_buffer.started","response_id":"r"}', 0.9)
            packet_read(0, 1.0)
            packet_read(1, 1.02)
            message('{"type":"output_audio_buffer.stopped","response_id":"r"}', 1.025)
            assert client._queue.empty()  # both frames are still in the decoder
            now[0] = 1.5  # the decoder is slow: it makes no difference to the stamps
            remote.frames.put_nowait(decoded(0))
            remote.frames.put_nowait(decoded(FRAME))
            await asyncio.sleep(0.005)
            got = [client._queue.get_nowait() for _ in range(client._queue.qsize())]
            assert [(type(e), e and e.arrival) for e in got] == [
                (AudioOut, 1.0),
                (AudioOut, 1.02),
                (EndOfTurn, 1.025),
            ]
            packet_read(2, 1.04)  # a packet that leaves no frame (it did not decode)
            message('{"type":"response.output_audio_transcript.delta","delta":"hi"}', 1.045)
            await asyncio.sleep(FRAME_S / 2)
            assert client._queue.empty()
            await asyncio.sleep(FRAME_S)
            assert client._queue.get_nowait() == Transcript("hi", 1.045)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            client._track.stop()

    run_virtual(main())


AIORTC_HOLD_S = 4 * FRAME_S  # JitterBuffer(capacity=16, prefetch=4) in every audio receiver


async def measure_pair(x: np.ndarray, *, bypass: bool) -> tuple[list[float], np.ndarray]:
    """Send ``x`` at 48 kHz paced 20 ms a frame between two local peers; the per-frame delay from
    push to the remote ``recv()``, and everything received."""
    a, b = new_peer_connection(), new_peer_connection()
    track = OutgoingAudioTrack()
    a.addTrack(track)
    pushed: dict[int, float] = {}
    delays: list[float] = []
    out: list[np.ndarray] = []

    async def read(remote: MediaStreamTrack) -> None:
        while True:
            frame = await remote.recv()
            assert isinstance(frame, AudioFrame) and frame.pts is not None
            delays.append(time.monotonic() - pushed[frame.pts])
            out.append(frame_to_mono(frame))

    readers: list[asyncio.Task[None]] = []
    b.on("track", lambda t: readers.append(asyncio.create_task(read(t))))
    try:
        with loopback_ice():
            await a.setLocalDescription(await a.createOffer())
            await b.setRemoteDescription(RTCSessionDescription(a.localDescription.sdp, "offer"))
            if bypass:
                bypass_jitter_buffer(b.getTransceivers()[0].receiver)
            await b.setLocalDescription(await b.createAnswer())
        await a.setRemoteDescription(b.localDescription)
        start = time.monotonic()
        for n in range(x.size // FRAME):
            await asyncio.sleep(max(0.0, start + n * 0.02 - time.monotonic()))
            pushed[n * FRAME] = time.monotonic()
            track.push(x[n * FRAME : (n + 1) * FRAME])
        held = 0 if bypass else round(AIORTC_HOLD_S / FRAME_S)  # aiortc's buffer keeps its last
        await async_wait_until(lambda: len(delays) >= x.size // FRAME - held, what="the frames")
    finally:
        for task in readers:
            task.cancel()
        await a.close()
        await b.close()
    return delays, np.concatenate(out)


async def test_bypass_removes_the_receive_buffer_hold_and_the_lookahead_is_the_constant() -> None:
    """aiortc's own receive buffer holds each frame until 4 more packets came (80 ms); the
    pass-through one does not. The calibration behind ENCODER_DELAY_S."""
    x = np.zeros(RATE, np.float32)
    x[RATE // 4 : RATE // 4 + RATE // 2] = synthetic_voice(RATE, 0.5)
    (buffered, _), (direct, heard) = await asyncio.gather(
        measure_pair(x, bypass=False), measure_pair(x, bypass=True)
    )
    buffer_s = statistics.median(buffered) - statistics.median(direct)
    lag = int(np.argmax(np.correlate(heard[: x.size], x[RATE // 8 : 7 * RATE // 8], "valid")))
    lookahead = lag - RATE // 8
    print(
        f"\nreceive buffer {1000 * buffer_s:.1f} ms (aiortc's prefetch {1000 * AIORTC_HOLD_S:.0f}); "
        f"direct one-way p50 {1000 * statistics.median(direct):.1f} ms; "
        f"encoder lookahead {lookahead} samples (constant {round(ENCODER_DELAY_S * RATE)})"
    )
    assert buffer_s == pytest.approx(AIORTC_HOLD_S, abs=0.01)
    assert lookahead == pytest.approx(ENCODER_DELAY_S * RATE, abs=3)


# --- over loopback ------------------------------------------------------------------------------


@pytest.fixture
async def echo_server() -> AsyncIterator[RunningServer]:
    server = await start_server(behaviour_factory("echo"), api_key=KEY)
    try:
        yield server
    finally:
        await server.aclose()


def test_registry_lines() -> None:
    from duplexsim.clients import registry

    if "openai-webrtc" not in registry.client_protocols():
        pytest.skip("openai-webrtc is not in clients/registry.py yet")
    assert registry.client_class("openai-webrtc") is OpenAIWebRTCClient
    assert registry.fake_server_factory("openai-webrtc") is start_server


def test_echo_session_returns_audio_and_end_of_turn() -> None:
    async def main() -> tuple[SessionOutcome, OpenAIWebRTCClient]:
        server = await start_server(behaviour_factory("echo"), api_key=KEY)
        try:
            client = OpenAIWebRTCClient(config(server.url))
            return await run_session(client, context(), SETTINGS), client
        finally:
            await server.aclose()

    out, client = eventloop.run(main())  # on the loop a run uses, which logs its stalls
    assert out.status == "ok", out.error
    assert out.end_reason == "end-of-turn" and out.output_rate == RATE == out.input_rate
    kinds = [e["kind"] for e in out.events if e["kind"] != "audio"]
    assert kinds[0] == "start" and kinds[-2:] == ["end_of_turn", "reply_end"]
    assert {"speech_started", "speech_stopped"} <= set(kinds)
    assert out.timing is not None
    if vouched(out):  # chunks are placed as they arrive: a stall of this machine's moves them
        assert out.timing.duration_s == pytest.approx(1.0, abs=0.1)
    assert out.bytes_sent > 10_000 and out.bytes_received > 10_000 and client.call_id
    # the key is in no record of the session
    recorded = json.dumps([out.events, out.error, client.describe(), repr(client.config)])
    assert KEY not in recorded
    # the fake sends output_audio_buffer.stopped once the reply's last frame is out: the client
    # reads that frame before it, and the session has placed the whole reply when the turn ends
    [end] = [e["t"] for e in out.events if e["kind"] == "end_of_turn"]
    audible = [t for t, _, _, _, silent in out.records.received if not silent]
    assert audible and audible[-1] <= end


# a session here shares its loop and cores with the fake, and both peers' codecs: it vouches for
# a bound of tens of ms, which is what the test checks (a run keeps its 5 ms budget)
WIDE_WINDOW = settings(stall_timeout_s=0.6, budget=TimingBudget(latency_ms=50.0))
TRANSIT_S = 0.002  # what no log holds: loopback UDP and SRTP between the answer's send and read


async def test_delayed_echo_latency_is_recovered() -> None:
    """The reply starts at E + latency in the fake's media time; the session's measure over
    real loopback WebRTC is that plus the codec's fixed delay (both ways' Opus lookahead), plus
    at most what the session says this machine may have added (its latency bound: our late
    sends, our loop's busy span, and the fake's own stalls and the spans it held frames in its
    codec threads), plus loopback transit. Never less: a reply is never heard before it was
    sent. The bound is checked for every session that vouched for its timing. The fake answers
    each frame as it arrives (``answers_each_frame``): with its stalls known, the window holds
    the one frame the onset answers and all the time that answer took."""
    server = await start_server(behaviour_factory("delayed-echo", latency_s=0.5, hangover_s=0.25))
    tried: list[tuple[float, float | None, bool]] = []  # (error, bound, vouched)
    assert OpenAIWebRTCClient(config(server.url)).capabilities.answers_each_frame
    try:
        for _ in range(3):
            client = OpenAIWebRTCClient(config(server.url))
            out = await run_session(
                client, context(fade_s=0.01), WIDE_WINDOW, server_stalls=server.held
            )
            assert out.status == "ok", out.error
            assert out.timing is not None and out.timing.latency_s is not None
            assert client.describe()["codec_delay_s"] == CODEC_DELAY_S
            error = out.timing.latency_s - 0.5 - CODEC_DELAY_S
            tried.append((error, out.check.latency_bound_ms, out.check.valid and out.check.paced))
    finally:
        await server.aclose()
    shown = ", ".join(
        f"{1000 * e:.1f} (bound {b}, {'vouched' if v else 'not vouched'})" for e, b, v in tried
    )
    print(f"\nlatency error beyond the codec delay: {shown} ms")
    assert pytest.approx(0.013, abs=1e-4) == CODEC_DELAY_S
    assert all(e >= -0.001 for e, _, _ in tried), shown  # the codec delay is not overcounted
    vouched = [(e, b) for e, b, v in tried if v and b is not None]
    if not vouched:
        pytest.skip(f"no session vouched for its timing on this machine: {shown}")
    assert all(e <= b / 1000 + TRANSIT_S for e, b in vouched), shown


def test_extra_latency_fault_delays_the_reply() -> None:
    async def main() -> SessionOutcome:
        faults = Faults(extra_latency_s=0.1)
        factory = behaviour_factory("delayed-echo", latency_s=0.5, hangover_s=0.25)
        server = await start_server(factory, faults=faults, behaviour_rate=24000)
        try:
            return await run_session(OpenAIWebRTCClient(config(server.url)), context(), SETTINGS)
        finally:
            await server.aclose()

    out = eventloop.run(main())  # on the loop a run uses, which logs its stalls
    assert out.status == "ok", out.error
    assert_latency(out, 0.6, 0.06)


async def test_bad_key_is_a_final_auth_error(echo_server: RunningServer) -> None:
    url = echo_server.url
    with pytest.raises(ConnectError) as err:
        await OpenAIWebRTCClient(config(url, api_key="sk-wrong-SECRET-1")).connect()
    assert not err.value.retryable and err.value.reason == "auth"
    assert "sk-wrong-SECRET-1" not in str(err.value) and err.value.__cause__ is None
    out = await run_session(
        OpenAIWebRTCClient(config(url, api_key="sk-wrong-SECRET-1")), context(), SETTINGS
    )
    assert out.status == "failed" and out.end_reason == "auth" and not out.retryable
    assert "sk-wrong-SECRET-1" not in json.dumps([out.events, out.error])


async def test_rate_limit_then_success() -> None:
    faults = Faults(rate_limit_first=1, retry_after_s=0.25)
    server = await start_server(behaviour_factory("echo"), faults=faults)
    try:
        with pytest.raises(RateLimited) as err:
            await OpenAIWebRTCClient(config(server.url)).connect()
        assert err.value.retryable and err.value.retry_after_s == 0.25
        client = OpenAIWebRTCClient(config(server.url, sdp_format="sdp"))
        await client.connect()
        await client.aclose()
        assert [e async for e in client.events()] == []
    finally:
        await server.aclose()
    assert faults.connections == 2


async def test_server_errors_are_retryable() -> None:
    server = await start_server(behaviour_factory("echo"), faults=Faults(refuse_status=503))
    try:
        with pytest.raises(ConnectError) as err:
            await OpenAIWebRTCClient(config(server.url)).connect()
    finally:
        await server.aclose()
    assert err.value.retryable and "503" in str(err.value)


async def test_unreachable_and_silent_servers_are_retryable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectError) as refused:
        await OpenAIWebRTCClient(config(f"http://127.0.0.1:{port}")).connect()
    assert refused.value.retryable

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # never answers; ends when the client gives up and hangs up
        writer.close()

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    try:
        cfg = ClientConfig(
            url=f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", connect_timeout_s=0.3
        )
        with pytest.raises(ConnectError) as silent:
            await OpenAIWebRTCClient(cfg).connect()
        assert silent.value.retryable
    finally:
        server.close()


@pytest.mark.parametrize(
    ("faults", "reason", "text"),
    [
        (Faults(close_after_s=0.4), "disconnected", "closed"),
        (Faults(malformed_after_s=0.4), "protocol", "not valid JSON"),
    ],
)
async def test_media_faults_end_the_session(faults: Faults, reason: str, text: str) -> None:
    server = await start_server(behaviour_factory("echo"), faults=faults)
    try:
        out = await run_session(OpenAIWebRTCClient(config(server.url)), context(), SETTINGS)
    finally:
        await server.aclose()
    assert out.status == "failed" and out.end_reason == reason, out.error
    assert out.error is not None and text in out.error
    assert out.send.frames < 40  # it ended about 0.4 s into the context


async def test_fake_call_hears_silence_on_the_wall_clock_when_the_client_track_stops() -> None:
    """A client track that stops sending (muted, or done talking) does not freeze the model: each
    lapse without a frame is heard as that much silence, so a reply plays on to its end."""
    from duplexsim.clients.fakekit.rtcfake import _Call
    from duplexsim.clients.openai_webrtc.server import _FakeServer

    lapse_s = 0.1

    class Stops(MediaStreamTrack):
        kind = "audio"

        def __init__(self, frames: int) -> None:
            super().__init__()
            self.left = frames

        async def recv(self) -> AudioFrame:
            if self.left == 0:
                await asyncio.Event().wait()  # never another frame
            self.left -= 1
            frame = AudioFrame.from_ndarray(
                np.zeros((1, 960), np.int16), format="s16", layout="mono"
            )
            frame.sample_rate = 48000
            return frame

    server = _FakeServer(behaviour_factory("echo"), Faults(), None, 24000, "127.0.0.1")
    call = _Call(server, "rtc_test", None)
    call.lapse_s = lapse_s
    heard: list[int] = []
    receive = call.protocol.receive_audio
    call.protocol.receive_audio = lambda x: heard.append(len(x)) or receive(x)  # type: ignore[method-assign]
    task = asyncio.create_task(call._listen(Stops(3)))
    try:
        await asyncio.sleep(3.5 * lapse_s)
    finally:
        task.cancel()
        await call.close()
    assert heard[:3] == [480, 480, 480]  # the client's three 20 ms frames, at 24 kHz
    assert heard[3:] and all(n == round(lapse_s * 24000) for n in heard[3:])
    assert 2 <= len(heard[3:]) <= 4
