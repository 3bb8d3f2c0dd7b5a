"""gemini-live: the pure protocol objects, then client and fake server over loopback WebSockets."""

from __future__ import annotations

import base64
import json
import socket
from typing import Any

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
    Transcript,
    UsageReport,
)
from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.gemini_live import events as wire
from duplexsim.clients.gemini_live.client import GeminiLiveClient
from duplexsim.clients.gemini_live.errors import close_error, redact_url
from duplexsim.clients.gemini_live.fake import Close, Send, ServerProtocol, Stall
from duplexsim.clients.gemini_live.protocol import PATHS, ClientProtocol, setup_from_options
from duplexsim.clients.gemini_live.server import start_server
from duplexsim.core.audio import float_to_pcm16, pcm16_to_float
from duplexsim.core.errors import (
    ConfigError,
    ConnectError,
    Disconnected,
    ProtocolError,
    RateLimited,
    RemoteError,
)
from duplexsim.core.usage import Usage
from duplexsim.core.vad import speech_bounds
from duplexsim.session.engine import SessionOutcome, run_session
from tests.helpers.sessions import context, settings
from tests.helpers.signals import voiced_signal
from tests.helpers.virtualclock import run_virtual

RATE = 16000
OUT_RATE = 24000
FRAME = 320  # 20 ms
KEY = "AIza-test-secret-key-123"
MANUAL = {"automatic_activity_detection": False}


def ready_client(options: dict[str, Any] | None = None) -> ClientProtocol:
    proto = ClientProtocol(setup_from_options("gemini-3.8-live", "Puck", options or {}), KEY)
    proto.receive_setup_reply(wire.encode_server([wire.SetupComplete()]))
    return proto


def message(**body: Any) -> bytes:
    return json.dumps(body).encode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# --- pure protocol: client -----------------------------------------------------------------


def test_setup_message_shape() -> None:
    proto = ClientProtocol(setup_from_options("gemini-3.8-live", "Puck", {}))
    assert json.loads(proto.setup_message()) == {
        "setup": {
            "model": "models/gemini-3.8-live",
            "generationConfig": {
                "responseModalities": ["AUDIO"],
                "speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Puck"}}},
            },
            "realtimeInputConfig": {"automaticActivityDetection": {"disabled": False}},
            "outputAudioTranscription": {},
        }
    }


def test_setup_options_reach_the_wire_and_round_trip() -> None:
    options = {
        **MANUAL,
        "activity_handling": "NO_INTERRUPTION",
        "end_sensitivity": "END_SENSITIVITY_LOW",
        "silence_duration_ms": 300,
        "output_transcription": False,
        "system_instruction": "Be brief.",
    }
    setup = setup_from_options("models/x", None, options)
    body = json.loads(wire.encode_client(setup))["setup"]
    assert body["model"] == "models/x" and "speechConfig" not in body["generationConfig"]
    assert body["realtimeInputConfig"] == {
        "automaticActivityDetection": {
            "disabled": True,
            "endOfSpeechSensitivity": "END_SENSITIVITY_LOW",
            "silenceDurationMs": 300,
        },
        "activityHandling": "NO_INTERRUPTION",
    }
    assert "outputAudioTranscription" not in body
    assert wire.decode_client(wire.encode_client(setup)) == setup
    assert setup_from_options(None, None, {}).model == "models/gemini-3.8-live"


@pytest.mark.parametrize(
    ("options", "complaint"),
    [({"vad": True}, "unknown option"), ({"silence_duration_ms": "300"}, "must be int")],
)
def test_bad_options_are_config_errors(options: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint):
        GeminiLiveClient(ClientConfig(url="ws://x", options=options))


def test_capabilities_follow_activity_detection() -> None:
    auto = GeminiLiveClient(ClientConfig(url="ws://x")).capabilities
    manual = GeminiLiveClient(ClientConfig(url="ws://x", options=MANUAL)).capabilities
    assert (auto.input_rate, auto.output_rate, auto.frame_ms) == (16000, 24000, 20)
    assert auto.faster_than_realtime and auto.end_of_turn_signal
    assert auto.server_vad and not auto.manual_commit
    assert manual.manual_commit and not manual.server_vad


def test_audio_goes_as_base64_pcm16_at_16k() -> None:
    proto = ready_client()
    samples = np.array([0.0, 0.5, -0.5, -1.0], np.float32)
    [text] = proto.audio_messages(samples)
    blob = json.loads(text)["realtimeInput"]["audio"]
    assert blob["mimeType"] == "audio/pcm;rate=16000"
    assert base64.b64decode(blob["data"]) == float_to_pcm16(samples)
    assert proto.commit_messages() == []  # server VAD on: nothing to commit


def test_manual_mode_brackets_the_turn_with_activity_messages() -> None:
    proto = ready_client(MANUAL)
    first = [json.loads(m)["realtimeInput"] for m in proto.audio_messages(np.zeros(FRAME))]
    assert [sorted(m) for m in first] == [["activityStart"], ["audio"]]
    assert len(proto.audio_messages(np.zeros(FRAME))) == 1
    assert [json.loads(m) for m in proto.commit_messages()] == [
        {"realtimeInput": {"activityEnd": {}}}
    ]
    assert proto.commit_messages() == []
    after = [json.loads(m)["realtimeInput"] for m in proto.audio_messages(np.zeros(FRAME))]
    assert [sorted(m) for m in after] == [["audio"]]  # trailing silence opens no new turn


def test_setup_reply_must_be_setup_complete() -> None:
    proto = ClientProtocol(setup_from_options(None, None, {}))
    with pytest.raises(ProtocolError, match="before setupComplete"):
        proto.receive(message(serverContent={"turnComplete": True}), 0.0)
    with pytest.raises(ProtocolError, match="expected setupComplete"):
        proto.receive_setup_reply(message(serverContent={"turnComplete": True}))
    proto.receive_setup_reply(message(setupComplete={"sessionId": "s-1"}))
    assert proto.ready and proto.session_id == "s-1"


PCM = np.array([0, 1, -1, 32767, -32768], "<i2").tobytes()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"serverContent": {"outputTranscription": {"text": "hi", "finished": True}}},
            [Transcript("hi", 1.5, True)],
        ),
        ({"serverContent": {"interrupted": True}}, [SpeechStarted(1.5)]),
        ({"serverContent": {"turnComplete": True}}, [EndOfTurn(1.5)]),
        ({"serverContent": {"generationComplete": True}}, []),
        ({"serverContent": {"inputTranscription": {"text": "user"}}}, []),
        (
            {"usageMetadata": {"totalTokenCount": 3}, "sessionResumptionUpdate": {}},
            [UsageReport(Usage(), 1.5, source="usageMetadata")],  # no count it could split
        ),
    ],
)
def test_server_messages_become_stamped_events(
    body: dict[str, Any], expected: list[ClientEvent]
) -> None:
    assert ready_client().receive(json.dumps(body), 1.5) == expected


def test_audio_transcript_and_turn_complete_in_one_message_keep_their_order() -> None:
    body = message(
        serverContent={
            "modelTurn": {
                "parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": b64(PCM)}}]
            },
            "outputTranscription": {"text": "ok"},
            "turnComplete": True,
        }
    )
    audio, said, end = ready_client().receive(body, 2.0)
    assert isinstance(audio, AudioOut) and audio.arrival == 2.0
    assert np.array_equal(audio.samples, pcm16_to_float(PCM))
    assert (said, end) == (Transcript("ok", 2.0), EndOfTurn(2.0))


def test_end_of_turn_is_stamped_with_its_arrival_only() -> None:
    # playout is the session's OutputTrack's business: a burst's turnComplete carries its arrival
    proto = ready_client()
    chunk = wire.encode_server([wire.ModelAudio(bytes(2 * 960))])  # 40 ms at 24 kHz
    for _ in range(25):  # a 1 s reply, all of it arriving at t = 10 s
        proto.receive(chunk, 10.0)
    [end] = proto.receive(wire.encode_server([wire.TurnComplete()]), 10.01)
    assert end == EndOfTurn(10.01)


def test_go_away_is_recorded_and_makes_the_close_a_disconnect() -> None:
    proto = ready_client()
    [event] = proto.receive(message(goAway={"timeLeft": "5s"}), 3.0)
    assert isinstance(event, ErrorEvent) and not event.fatal
    assert isinstance(event.error, Disconnected) and "5s" in str(event.error)
    error = proto.close_error(1000, "")
    assert isinstance(error, Disconnected) and error.retryable and "goAway" in str(error)


def test_error_object_is_a_fatal_remote_error() -> None:
    body = message(error={"code": 503, "message": f"busy {KEY}", "status": "UNAVAILABLE"})
    [event] = ready_client().receive(body, 0.0)
    assert isinstance(event, ErrorEvent) and event.fatal
    assert isinstance(event.error, RemoteError) and event.error.retryable
    assert KEY not in str(event.error)


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[1]", "JSON list, not an object"),
        (message(serverContent=[]), "'serverContent' must be an object"),
        (message(serverContent={"turnComplete": "yes"}), "turnComplete' must be a boolean"),
        (message(serverContent={"modelTurn": {"parts": {}}}), "parts' must be a list"),
        (message(goAway={"timeLeft": 5}), "timeLeft' must be a string"),
        (
            message(
                serverContent={
                    "modelTurn": {
                        "parts": [
                            {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "***"}}
                        ]
                    }
                }
            ),
            "not valid base64",
        ),
        (
            message(
                serverContent={
                    "modelTurn": {
                        "parts": [
                            {
                                "inlineData": {
                                    "mimeType": "audio/pcm;rate=24000",
                                    "data": b64(b"abc"),
                                }
                            }
                        ]
                    }
                }
            ),
            "even length",
        ),
        (
            message(
                serverContent={
                    "modelTurn": {
                        "parts": [
                            {
                                "inlineData": {
                                    "mimeType": "audio/pcm;rate=16000",
                                    "data": b64(PCM[:2]),
                                }
                            }
                        ]
                    }
                }
            ),
            "16000 Hz",
        ),
        (message(setupComplete={}), "second setupComplete"),
    ],
)
def test_malformed_server_messages_are_protocol_errors(data: bytes, complaint: str) -> None:
    with pytest.raises(ProtocolError, match=complaint):
        ready_client().receive(data, 0.0)


@pytest.mark.parametrize(
    ("code", "reason", "kind", "retryable", "tag"),
    [
        (1008, "API key not valid. Please pass a valid API key.", ConnectError, False, "auth"),
        (1008, "", ConnectError, False, "auth"),
        (1008, "models/nope is not found for API version v1beta", RemoteError, False, "remote"),
        (1007, "Request contains an invalid argument.", ProtocolError, False, "protocol"),
        (1011, "Internal error encountered.", Disconnected, True, "disconnected"),
        (
            1011,
            "RESOURCE_EXHAUSTED: quota. Please retry in 2.5s.",
            RateLimited,
            True,
            "rate-limited",
        ),
        (None, "", Disconnected, True, "disconnected"),
    ],
)
def test_close_codes_map_to_errors(
    code: int | None, reason: str, kind: type, retryable: bool, tag: str
) -> None:
    error = close_error(code, reason)
    assert (
        error is not None
        and type(error) is kind
        and error.retryable is retryable
        and error.reason == tag
    )
    if kind is RateLimited:
        assert isinstance(error, RateLimited) and error.retry_after_s == 2.5
    assert close_error(1000, "") is None
    during = close_error(1011, "Internal error encountered.", during_setup=True)
    assert isinstance(during, ConnectError) and during.retryable


def test_the_key_is_redacted_from_urls_and_server_text() -> None:
    assert redact_url(f"wss://h/ws/x?key={KEY}&alt=1") == "wss://h/ws/x?key=***&alt=1"
    error = ready_client().close_error(1011, f"trace: {KEY}")
    assert error is not None and KEY not in str(error)
    client = GeminiLiveClient(ClientConfig(url=f"wss://h/ws?key={KEY}", api_key=KEY))
    assert KEY not in json.dumps(client.describe())


# --- pure protocol: fake server ------------------------------------------------------------


def set_up_server(
    name: str = "echo",
    faults: Faults | None = None,
    *,
    options: dict[str, Any] | None = None,
    **params: Any,
) -> ServerProtocol:
    server = ServerProtocol(behaviour_factory(name, **params), faults)
    [ack] = server.receive(wire.encode_client(setup_from_options(None, None, options or {})))
    assert ack == Send(wire.encode_server([wire.SetupComplete()]))
    return server


def feed(
    server: ServerProtocol, x: np.ndarray, start: int = 0
) -> list[tuple[int, wire.ServerPart | Close | Stall]]:
    """Send ``x`` in 20 ms frames; every server part or other action, with the input position
    (c0) of the frame that caused it."""
    out: list[tuple[int, Any]] = []
    for i in range(0, x.size, FRAME):
        audio = wire.encode_client(wire.AudioIn(float_to_pcm16(x[i : i + FRAME])))
        for action in server.receive(audio):
            if isinstance(action, Send):
                out += [(start + i, p) for p in wire.decode_server(action.message)]
            else:
                out.append((start + i, action))
    return out


SERVICE = "google.ai.generativelanguage.{}.GenerativeService.{}"


def kinds(parts: list[tuple[int, Any]]) -> list[str]:
    names = [type(p).__name__ for _, p in parts]
    return [n for i, n in enumerate(names) if i == 0 or n != names[i - 1]]  # runs collapsed


@pytest.mark.parametrize(
    ("path", "headers", "api_key", "closed"),
    [
        (PATHS[0], {"x-goog-api-key": KEY}, KEY, None),
        (f"{PATHS[0]}?key={KEY}", {}, KEY, None),
        (PATHS[1], {}, None, None),
        (PATHS[0], {}, KEY, "unregistered callers"),
        (PATHS[0], {"x-goog-api-key": "wrong"}, KEY, "API key not valid"),
        ("/ws/other", {"x-goog-api-key": KEY}, KEY, "not found"),
        # python-genai's default version, and the method its ephemeral tokens open
        (f"/ws/{SERVICE.format('v1', 'BidiGenerateContent')}", {"x-goog-api-key": KEY}, KEY, None),
        (
            f"/ws/{SERVICE.format('v1alpha', 'BidiGenerateContentConstrained')}",
            {"Authorization": f"Token {KEY}"},
            KEY,
            None,
        ),
        (f"/ws/{SERVICE.format('v2', 'BidiGenerateContent')}", {}, None, "not found"),
        (
            f"/ws/{SERVICE.format('v1alpha', 'BidiGenerateContentConstrained')}?access_token={KEY}",
            {},
            KEY,
            None,
        ),
    ],
)
def test_server_checks_path_and_key(
    path: str, headers: dict[str, str], api_key: str | None, closed: str | None
) -> None:
    actions = ServerProtocol(behaviour_factory("echo"), api_key=api_key).open(path, headers)
    if closed is None:
        assert actions == []
    else:
        [close] = actions
        assert isinstance(close, Close) and close.code == 1008 and closed in close.reason
        assert KEY not in close.reason


@pytest.mark.parametrize(
    ("first", "complaint"),
    [
        (wire.encode_client(wire.AudioIn(b"\x00\x00")), "first message must be setup"),
        ('{"setup":{"model":"gemini-3.8-live"}}', "models/<name>"),
        ('{"setup":{}, "realtimeInput":{}}', "exactly one"),
        ("{oops", "not valid JSON"),
    ],
)
def test_server_rejects_a_bad_opening(first: str, complaint: str) -> None:
    server = ServerProtocol(behaviour_factory("echo"))
    [close] = server.receive(first)
    assert isinstance(close, Close) and close.code == 1007 and complaint in close.reason
    assert server.receive(first) == []


def test_server_rejects_activity_messages_while_detecting_itself() -> None:
    [close] = set_up_server().receive(wire.encode_client(wire.ActivityStart()))
    assert isinstance(close, Close) and close.code == 1007


def test_server_quota_close_says_resource_exhausted() -> None:
    server = ServerProtocol(behaviour_factory("echo"), Faults(retry_after_s=0.5), quota=True)
    [close] = server.receive(wire.encode_client(setup_from_options(None, None, {})))
    assert isinstance(close, Close) and close.code == 1011
    error = close_error(close.code, close.reason)
    assert isinstance(error, RateLimited) and error.retry_after_s == 0.5


def test_server_reply_is_a_burst_starting_exactly_at_the_behaviours_onset() -> None:
    server = set_up_server("delayed-echo", latency_s=0.5, hangover_s=0.25)
    x = np.concatenate([context(0.6), np.zeros(2 * RATE, np.float32)])
    parts = feed(server, x)
    assert kinds(parts) == ["ModelAudio", "GenerationComplete", "TurnComplete", "UsageMetadata"]
    audio = [(c0, p) for c0, p in parts if isinstance(p, wire.ModelAudio)]
    first_c0 = audio[0][0]
    assert all(c0 == first_c0 for c0, _ in audio)  # all of it sent at once
    out = np.concatenate([pcm16_to_float(p.pcm) for _, p in audio])
    bounds = speech_bounds(x, RATE)
    assert bounds is not None
    onset_s = first_c0 / RATE + np.flatnonzero(np.abs(out) > 1e-3)[0] / OUT_RATE
    assert onset_s == pytest.approx(bounds[1] + 0.5, abs=0.002)
    [(done_c0, _)] = [(c0, p) for c0, p in parts if isinstance(p, wire.TurnComplete)]
    assert done_c0 / RATE >= first_c0 / RATE + out.size / OUT_RATE  # after real-time playback
    # its usage with it: the user's turn heard and the reply generated, at 32 tokens a second
    [(_, used)] = [(c0, p) for c0, p in parts if isinstance(p, wire.UsageMetadata)]
    assert used.usage.output_audio_tokens == round(32 * out.size / OUT_RATE)
    assert used.usage.input_audio_tokens == pytest.approx(32 * 0.6, abs=32 * 0.05)


def test_user_talking_over_the_reply_interrupts_it() -> None:
    server = set_up_server("echo", hangover_s=0.25)
    parts = feed(server, context(0.6, tail_s=0.5))
    assert kinds(parts) == ["ModelAudio", "GenerationComplete"]  # generated, still playing
    later = feed(server, np.concatenate([voiced_signal(0.3), np.zeros(RATE // 2, np.float32)]))
    # the rest of the first reply is dropped; then the new turn gets its own reply
    assert kinds(later) == [
        "Interrupted", "TurnComplete", "UsageMetadata", "ModelAudio", "GenerationComplete"
    ]  # fmt: skip


def test_server_without_activity_detection_replies_only_after_activity_end() -> None:
    server = set_up_server("echo", options=MANUAL, hangover_s=0.25)
    server.receive(wire.encode_client(wire.ActivityStart()))
    x = context(0.6, tail_s=0.6)
    assert feed(server, x) == []  # the behaviour's turn ended, but the client's has not
    assert server.receive(wire.encode_client(wire.ActivityEnd())) == []
    parts = feed(server, np.zeros(RATE // 5, np.float32), start=x.size)
    assert kinds(parts) == ["ModelAudio", "GenerationComplete"]
    assert parts[0][0] == x.size  # the reply starts where the turn was closed
    # a new turn opening while the reply plays is a barge-in
    actions = server.receive(wire.encode_client(wire.ActivityStart()))
    sent = [wire.decode_server(a.message) for a in actions if isinstance(a, Send)]
    assert sent[0] == [wire.Interrupted()]
    assert [type(part).__name__ for part in sent[1]] == ["TurnComplete", "UsageMetadata"]


def test_server_media_faults_trigger_on_media_time() -> None:
    frame = np.zeros(FRAME, np.float32)
    closing = feed(set_up_server(faults=Faults(close_after_s=0.1)), np.tile(frame, 6))
    assert [p for _, p in closing] == [wire.GoAway("0s"), Close(1000, "")]
    stalling = feed(set_up_server(faults=Faults(stall_after_s=0.04)), np.tile(frame, 4))
    assert [p for _, p in stalling] == [Stall()]
    bad = set_up_server(faults=Faults(malformed_after_s=0.02, malformed_then_close=True))
    audio = wire.encode_client(wire.AudioIn(float_to_pcm16(frame)))
    garbage, close = bad.receive(audio)
    assert isinstance(garbage, Send) and isinstance(close, Close) and close.code == 1011
    with pytest.raises(ProtocolError):
        wire.decode_server(garbage.message)


# --- over loopback -------------------------------------------------------------------------

SETTINGS = settings(max_reply_s=3.0, reply_timeout_s=0.8)


async def session(
    behaviour: str,
    *,
    faults: Faults | None = None,
    key: str | None = KEY,
    options: dict[str, Any] | None = None,
    **params: Any,
) -> SessionOutcome:
    server = await start_server(behaviour_factory(behaviour, **params), faults=faults, api_key=KEY)
    try:
        config = ClientConfig(
            url=server.url, api_key=key, options=options or {}, connect_timeout_s=2.0
        )
        return await run_session(GeminiLiveClient(config), context(0.6), SETTINGS)
    finally:
        await server.aclose()


def assert_no_key(out: SessionOutcome) -> None:
    assert KEY not in json.dumps(out.events) and KEY not in (out.error or "")


def test_echo_session_returns_audio_and_end_of_turn() -> None:
    out = run_virtual(session("echo", hangover_s=0.25))  # chunks placed as they were sent
    assert out.status == "ok" and out.timing is not None, out.error
    assert out.end_reason == "end-of-turn" and out.output_rate == OUT_RATE
    assert out.timing.duration_s == pytest.approx(0.6, abs=0.05)
    kinds = [e["kind"] for e in out.events if e["dir"] == "recv"]
    assert "audio" in kinds and kinds[-2:] == ["end_of_turn", "usage"]
    assert out.usage.output_audio_tokens == pytest.approx(32 * 0.6, abs=4)
    assert_no_key(out)


@pytest.mark.parametrize("options", [{}, MANUAL], ids=["server-vad", "activity-messages"])
def test_delayed_echo_latency_is_recovered(options: dict[str, Any]) -> None:
    # on the virtual clock: what the protocol adds, and nothing a loaded machine does
    out = run_virtual(session("delayed-echo", options=options, latency_s=0.5, hangover_s=0.25))
    assert out.status == "ok" and out.timing is not None, out.error
    assert out.timing.speech_end_s == pytest.approx(0.8, abs=0.005)
    assert out.timing.latency_s == pytest.approx(0.5, abs=0.05)
    assert out.end_reason == "end-of-turn"


async def test_silent_model_is_no_reply() -> None:
    out = await session("silent")
    assert out.status == "no-reply" and out.error is None


@pytest.mark.parametrize(
    ("faults", "key", "reason", "retryable"),
    [
        (None, "AIza-wrong", "auth", False),
        (None, None, "auth", False),
        (Faults(rate_limit_first=1, retry_after_s=0.2), KEY, "rate-limited", True),
        (Faults(refuse_status=503), KEY, "connect", True),
        (Faults(close_after_s=0.5), KEY, "disconnected", True),
        (Faults(malformed_after_s=0.5), KEY, "protocol", False),
    ],
    ids=["bad-key", "no-key", "quota", "http-503", "close-mid-turn", "malformed"],
)
async def test_failures_end_the_session_with_a_reason(
    faults: Faults | None, key: str | None, reason: str, retryable: bool
) -> None:
    out = await session("echo", faults=faults, key=key)
    assert out.status == "failed"
    assert out.end_reason == reason, out.error
    assert out.retryable is retryable and out.error
    if reason == "rate-limited":
        assert out.retry_after_s == pytest.approx(0.2)
    if reason == "disconnected":  # the goAway before the close is on the record
        [warning] = [e for e in out.events if e["kind"] == "error" and not e["fatal"]]
        assert "goAway" in warning["message"]
    assert_no_key(out)


async def test_key_goes_in_the_header_not_the_url() -> None:
    seen: list[tuple[str, str | None]] = []

    def refuse(connection: ServerConnection, request: Request) -> Response:
        seen.append((request.path, request.headers.get("x-goog-api-key")))
        return connection.respond(403, "no\n")

    async def never(ws: ServerConnection) -> None:
        raise AssertionError("handshake was refused")

    async with serve(never, "127.0.0.1", 0, process_request=refuse) as server:
        port = server.sockets[0].getsockname()[1]
        client = GeminiLiveClient(ClientConfig(url=f"ws://127.0.0.1:{port}{PATHS[0]}", api_key=KEY))
        with pytest.raises(ConnectError) as err:
            await client.connect()
    assert seen == [(PATHS[0], KEY)]
    assert err.value.reason == "auth" and KEY not in str(err.value)


async def test_connect_errors_do_not_show_a_key_in_the_url() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = GeminiLiveClient(ClientConfig(url=f"ws://127.0.0.1:{port}/ws?key={KEY}", api_key=KEY))
    with pytest.raises(ConnectError) as err:
        await client.connect()
    assert err.value.retryable and KEY not in str(err.value)


async def test_a_fake_without_a_key_serves_keyless_clients() -> None:
    """``fake:BEHAVIOUR@gemini-live`` models: the fake has no key and neither has the client."""
    async with await start_server(behaviour_factory("echo")) as server:
        assert server.url.endswith(PATHS[0])
        client = GeminiLiveClient(ClientConfig(url=server.url, connect_timeout_s=2.0))
        await client.connect()
        await client.aclose()
        assert [e async for e in client.events()] == []


async def test_pre_encoded_audio_opens_the_turn_once_with_detection_off(monkeypatch) -> None:
    """With activity detection off, send_encoded puts activityStart before the first audio
    message only, exactly as send_audio does."""
    from duplexsim.clients.transport.wsclient import WebSocketClient

    frames = np.resize(voiced_signal(0.1), (3, 320)).astype(np.float32)
    sent: dict[str, list[str | bytes]] = {}
    for way in ("encoded", "audio"):
        client = GeminiLiveClient(ClientConfig(url="ws://127.0.0.1:9", options=MANUAL))
        got: list[str | bytes] = []

        async def record(self, message, got=got):
            got.append(message)

        monkeypatch.setattr(WebSocketClient, "send_message", record)
        encoded = client.encode_audio(frames)
        for i, row in enumerate(frames):
            await (client.send_encoded(encoded[i]) if way == "encoded" else client.send_audio(row))
        sent[way] = got
    assert sent["encoded"] == sent["audio"]
    assert [json.loads(m)["realtimeInput"].keys() for m in sent["encoded"]] == [
        {"activityStart"},
        {"audio"},
        {"audio"},
        {"audio"},
    ]


def test_server_reads_both_field_spellings_at_every_depth() -> None:
    """proto-JSON takes lowerCamel and proto names alike; python-genai sends snake_case."""
    pcm = base64.b64encode(b"\x01\x00\x02\x00").decode()
    for audio in ({"mime_type": "audio/pcm;rate=16000", "data": pcm},
                  {"mimeType": "audio/pcm;rate=16000", "data": pcm}):  # fmt: skip
        for outer in ("realtime_input", "realtimeInput"):
            msg = wire.decode_client(json.dumps({outer: {"audio": audio}}))
            assert msg == wire.AudioIn(b"\x01\x00\x02\x00", 16000)
    setup = {
        "setup": {
            "model": "models/m",
            "realtime_input_config": {
                "automatic_activity_detection": {"disabled": True, "silence_duration_ms": 300}
            },
            "generation_config": {"speech_config": {"voice_config": {
                "prebuilt_voice_config": {"voice_name": "Puck"}}}},
        }
    }  # fmt: skip
    got = wire.decode_client(json.dumps(setup))
    assert isinstance(got, wire.Setup)
    assert (got.voice, got.automatic_activity_detection, got.silence_duration_ms) == (
        "Puck",
        False,
        300,
    )
    twice = {"realtimeInput": {"audio": {"mimeType": "audio/pcm", "mime_type": "audio/pcm"}}}
    with pytest.raises(ProtocolError, match="given twice"):
        wire.decode_client(json.dumps(twice))
