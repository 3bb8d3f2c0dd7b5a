"""Every decoder of outside bytes lets only its own documented error escape, whatever the bytes:
random and mutated messages, deep nesting, huge numbers, wrong types (property tests)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duplexsim.clients.gemini_live import events as gemini_wire
from duplexsim.clients.gemini_live.protocol import ClientProtocol as GeminiClient
from duplexsim.clients.gemini_live.protocol import setup_from_options
from duplexsim.clients.moshi import events as moshi_wire
from duplexsim.clients.moshi.protocol import ClientProtocol as MoshiClient
from duplexsim.clients.openai_realtime.config import RealtimeOptions
from duplexsim.clients.openai_realtime.protocol import ClientProtocol as RealtimeClient
from duplexsim.clients.openai_webrtc import signaling
from duplexsim.clients.pcm_ws.protocol import ClientProtocol as PcmClient
from duplexsim.core import safejson
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.errors import BenchmarkError, ConfigError, ProtocolError, SessionError
from duplexsim.corpus.calls import CallListingError, read_listings
from duplexsim.profiles.profile import load_profile
from duplexsim.scoring.service import control, wire
from duplexsim.scoring.service.errors import WireError
from tests.helpers import hostile

# a few seconds per property on a loaded 2-core machine
FAST = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@FAST
@given(hostile.hostile_bytes([{"a": [1, {"b": None}]}]))
def test_safejson_raises_only_json_error(data: bytes) -> None:
    try:
        value = safejson.loads(data)
    except safejson.JsonError as exc:
        assert "\n" not in str(exc)
        return
    json.dumps(value)  # what it returns is shallow enough to walk again


def test_safejson_names_each_kind_of_garbage() -> None:
    for text, words in [
        (hostile.deep(5000), "nested more than"),
        (hostile.deep(65), "nested more than 64"),
        (hostile.HUGE, "4300"),
        ('{"a": NaN}', "NaN"),
        ('{"a": 1', "column"),
        (b"\xff", "not UTF-8"),
    ]:
        with pytest.raises(safejson.JsonError, match=words):
            safejson.loads(text)
    assert safejson.loads(hostile.deep(64)) is not None


# --- model protocols: the function that turns one message into events ------------------------

PCM_EXAMPLES: list[Any] = [
    {"type": "transcript", "text": "hi", "final": True},
    {"type": "error", "code": "busy", "message": "try later", "retryable": True},
    {"type": "end_of_turn"},
    {"type": "speech_started"},
    {"type": "reply_started"},
    {"type": "hello_ack", "sample_rate": 16000, "session_id": "s"},
]


@FAST
@given(hostile.hostile_text(PCM_EXAMPLES, ("type", "text", "final", "code", "message")))
def test_pcm_ws_text_frames(text: str) -> None:
    with contextlib.suppress(SessionError):
        PcmClient(16000).receive_text(text, 1.0)


@FAST
@given(st.binary(max_size=64))
def test_pcm_ws_binary_frames(data: bytes) -> None:
    with contextlib.suppress(SessionError):
        PcmClient(16000).receive_binary(data, 1.0)


REALTIME_EXAMPLES: list[Any] = [
    {"type": "response.output_audio.delta", "response_id": "r", "item_id": "i", "delta": "AAAA"},
    {"type": "response.output_audio_transcript.delta", "response_id": "r", "delta": "hi"},
    {"type": "response.output_audio_transcript.done", "transcript": "hi"},
    {"type": "response.created", "response": {"id": "r", "status": "in_progress"}},
    {
        "type": "response.done",
        "response": {
            "id": "r",
            "status": "failed",
            "status_details": {"type": "failed", "error": {"type": "server_error", "code": "x"}},
        },
    },
    {"type": "error", "error": {"type": "invalid_request_error", "code": "c", "message": "m"}},
    {
        "type": "rate_limits.updated",
        "rate_limits": [{"name": "tokens", "limit": 10, "remaining": 0, "reset_seconds": 1.5}],
    },
    {"type": "input_audio_buffer.speech_started", "audio_start_ms": 10, "item_id": "i"},
    {"type": "session.updated", "session": {"type": "realtime"}},
]
REALTIME_KEYS = ("type", "delta", "response", "error", "status", "message", "rate_limits")


def _realtime() -> RealtimeClient:
    proto = RealtimeClient(RealtimeOptions.from_options({}, None), secrets=("sk-x",))
    proto.receive_handshake('{"type":"session.created","session":{}}')
    proto.receive_handshake('{"type":"session.updated","session":{}}')
    return proto


@FAST
@given(hostile.hostile_text(REALTIME_EXAMPLES, REALTIME_KEYS))
def test_openai_realtime_events(text: str) -> None:
    for receive in (_realtime().receive_text, lambda t, _: _fresh_realtime(t)):
        with contextlib.suppress(SessionError):
            receive(text, 1.0)


def _fresh_realtime(text: str) -> Any:
    return RealtimeClient(RealtimeOptions.from_options({}, None)).receive_handshake(text)


GEMINI_EXAMPLES: list[Any] = [
    {
        "serverContent": {
            "modelTurn": {
                "parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AAAA"}}]
            },
            "outputTranscription": {"text": "hi", "finished": True},
            "turnComplete": True,
        }
    },
    {"setupComplete": {"sessionId": "s"}},
    {"goAway": {"timeLeft": "1s"}},
    {"error": {"code": 429, "message": "m", "status": "RESOURCE_EXHAUSTED"}},
]
GEMINI_KEYS = ("serverContent", "modelTurn", "parts", "inlineData", "data", "mimeType", "error")


@FAST
@given(hostile.hostile_bytes(GEMINI_EXAMPLES, GEMINI_KEYS))
def test_gemini_live_server_messages(data: bytes) -> None:
    proto = GeminiClient(setup_from_options("m", None, {}), "key")
    proto.receive_setup_reply(gemini_wire.encode_server([gemini_wire.SetupComplete()]))
    with contextlib.suppress(SessionError):
        proto.receive(data, 1.0)
    with contextlib.suppress(SessionError):
        GeminiClient(setup_from_options("m", None, {}), "key").receive_setup_reply(data)


@FAST
@given(
    st.one_of(
        st.binary(max_size=80),
        st.tuples(st.integers(0, 255), hostile.hostile_bytes([{"a": 1}])).map(
            lambda kp: bytes([kp[0]]) + kp[1]
        ),
        hostile.hostile_bytes([{"a": 1}]).map(lambda p: bytes([moshi_wire.Kind.METADATA]) + p),
    )
)
def test_moshi_messages(data: bytes) -> None:
    proto = MoshiClient()
    proto.receive_handshake(b"\x00")
    with contextlib.suppress(SessionError):
        proto.receive(data, 1.0)


# --- WebRTC signaling -------------------------------------------------------------------------

_OK_RESPONSE = (
    b"HTTP/1.1 201 Created\r\nLocation: /v1/realtime/calls/c1\r\nContent-Length: 4\r\n\r\nv=0\n"
)


@FAST
@given(
    st.one_of(
        st.binary(max_size=200),
        st.tuples(st.integers(0, len(_OK_RESPONSE)), st.binary(max_size=20)).map(
            lambda cut: _OK_RESPONSE[: cut[0]] + cut[1] + _OK_RESPONSE[cut[0] :]
        ),
        st.sampled_from(["²", "9" * 5000, "-1", "1" * 20]).map(
            lambda n: f"HTTP/1.1 {n} X\r\nContent-Length: {n}\r\n\r\n".encode()
        ),
    )
)
def test_signaling_responses(data: bytes) -> None:
    try:
        response = signaling.parse_response(data)
    except ProtocolError:
        return
    signaling.call_error(response, secret="sk-x")


@FAST
@given(hostile.hostile_bytes([{"error": {"message": "m"}}], ("error", "message")))
def test_signaling_error_bodies(body: bytes) -> None:
    signaling.call_error(signaling.HttpResponse(400, {}, body), secret="sk-x")


@FAST
@given(hostile.hostile_bytes([{"type": "realtime"}]), st.binary(max_size=40))
def test_signaling_offers(session: bytes, sdp: bytes) -> None:
    boundary = "b0"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="sdp"\r\n\r\n'.encode()
        + sdp
        + f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="session"\r\n\r\n'.encode()
        + session
        + f"\r\n--{boundary}--\r\n".encode()
    )
    for kind, data in (
        (f"multipart/form-data; boundary={boundary}", body),
        ("application/sdp", sdp),
    ):
        with contextlib.suppress(ProtocolError):
            signaling.parse_offer(kind, data)
    with contextlib.suppress(ProtocolError):
        signaling.parse_request_head(sdp + b"\r\n\r\n")


# --- the scoring service's wire and control messages ----------------------------------------

_HEADER = {
    "id": "r1",
    "scorer": "prosody",
    "sample_rate": 16000,
    "dtype": "float32",
    "shape": [2],
    "deadline": 1.0,
}
_REPLY = {
    "id": "r1",
    "scorer": "prosody",
    "ok": True,
    "error": None,
    "code": None,
    "retryable": False,
    "dimensions": ["a", "b"],
    "precision": None,
}
_READY = {"scorers": ["prosody"], "capacity": 4, "heartbeat_s": 1.0}


@FAST
@given(
    hostile.hostile_bytes([_HEADER], tuple(_HEADER)),
    st.binary(max_size=16),
    st.sampled_from([wire.VERSION, b"DSCORE/2", b""]),
)
def test_scoring_requests(header: bytes, samples: bytes, version: bytes) -> None:
    frames = [version, header, samples]
    with contextlib.suppress(WireError):
        wire.decode_request(frames)
    rid, scorer = wire.request_id_of(frames)
    assert isinstance(rid, str) and isinstance(scorer, str)


@FAST
@given(hostile.hostile_bytes([_REPLY], tuple(_REPLY)), st.binary(max_size=16))
def test_scoring_replies(header: bytes, scores: bytes) -> None:
    with contextlib.suppress(WireError):
        wire.decode_reply([wire.VERSION, header, scores])


@FAST
@given(
    st.sampled_from([b"READY", b"WORK", b"DONE", b"HEARTBEAT", b"BYE", b"X"]),
    st.lists(hostile.hostile_bytes([_READY], tuple(_READY)), max_size=3),
)
def test_control_messages(verb: bytes, rest: list[bytes]) -> None:
    with contextlib.suppress(WireError):
        control.parse([wire.VERSION, verb, *rest])


# --- files from outside: manifests, call listings, profiles ----------------------------------

_LINE = {
    "id": "s0",
    "language": "en",
    "emotion": "Anger",
    "context": "audio/s0.context.wav",
    "reference": "audio/s0.reference.wav",
    "context_turn_start_s": 0.0,
    "meta": {"a": 1},
}


@pytest.fixture(scope="module")
def bench_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.helpers.signals import voiced_signal, write_wav

    root = tmp_path_factory.mktemp("bench")
    write_wav(root / "audio" / "s0.context.wav", voiced_signal(0.3))
    write_wav(root / "audio" / "s0.reference.wav", voiced_signal(0.3))
    return root


@FAST
@given(st.lists(hostile.hostile_text([_LINE], tuple(_LINE)), min_size=1, max_size=3))
def test_manifest_lines(bench_dir: Path, lines: list[str]) -> None:
    manifest = bench_dir / "manifest.jsonl"
    manifest.write_text(
        "\n".join(line.replace("\n", " ") for line in lines), "utf-8", "surrogatepass"
    )
    try:
        load_benchmark(manifest)
    except BenchmarkError as exc:
        assert all(p.line is None or p.line >= 1 for p in exc.problems)


_CALL = {"id": "c1", "audio": "c1.wav", "language": "en", "channels": [0, 1]}


@FAST
@given(st.lists(hostile.hostile_text([_CALL], tuple(_CALL)), min_size=1, max_size=3))
def test_call_listing_lines(tmp_path_factory: pytest.TempPathFactory, lines: list[str]) -> None:
    listing = tmp_path_factory.mktemp("calls") / "calls.jsonl"
    text = "\n".join(
        "{" + line.replace("\n", " ") if not line.startswith("{") else line.replace("\n", " ")
        for line in lines
    )
    listing.write_text(text, "utf-8", "surrogatepass")
    with contextlib.suppress(CallListingError):
        read_listings([listing])


@FAST
@given(
    st.one_of(
        st.binary(max_size=80),
        st.sampled_from(
            ["a = " + hostile.deep(5000), "a = " + hostile.HUGE, 'name = "../../x"']
        ).map(str.encode),
        st.tuples(
            st.sampled_from(["name", "protocol", "url", "model", "connect_timeout_s", "options"]),
            st.sampled_from(['"x"', "1", "true", "[1]", "{a = 1}", "1e400", '"../x"', '"a\\n"']),
        ).map(lambda kv: f'protocol = "pcm-ws"\nurl = "ws://h"\n{kv[0]} = {kv[1]}\n'.encode()),
    )
)
def test_profiles(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("profile") / "p.toml"
    path.write_bytes(data)
    try:
        profile = load_profile(path)
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    assert "/" not in profile.name and "\n" not in profile.name


# --- freeze-omni: Engine.IO / Socket.IO frames ------------------------------------------------

_SIO_EVENTS: list[Any] = [
    ["stop_tts"],
    ["audio", {"_placeholder": True, "num": 0}],
    ["prompt_success"],
    ["too_many_users"],
    ["audio", json.dumps({"audio": [0, 1], "sample_rate": 16000})],
]


def _sio_frames() -> st.SearchStrategy[str | bytes]:
    body = hostile.hostile_text(_SIO_EVENTS, ("_placeholder", "num", "audio", "sample_rate"))
    prefix = st.sampled_from(["42", "451-", "4" + hostile.HUGE[:3] + "-", "452²-", "0", "40", "44"])
    return st.one_of(
        st.tuples(prefix, body).map("".join),
        st.binary(max_size=16),
        st.text(max_size=20),
        st.sampled_from(["2", "3", "1", "41", "45" + hostile.HUGE + "-[]"]),
    )


def _ready_freeze_omni() -> Any:
    from duplexsim.clients.freeze_omni import sio
    from duplexsim.clients.freeze_omni.protocol import ClientProtocol as FreezeOmniClient

    proto = FreezeOmniClient()
    opening = [
        *sio.encode(sio.Open("s", 25000, 20000, 1_000_000)),
        *sio.encode(sio.Connect({"sid": "x"})),
        *sio.encode(sio.Event("stop_tts")),
    ]
    for frame in opening:
        proto.handshake(frame)
    assert proto.ready
    return proto


@FAST
@given(st.lists(_sio_frames(), min_size=1, max_size=3))
def test_freeze_omni_frames(frames: list[str | bytes]) -> None:
    from duplexsim.clients.freeze_omni.protocol import ClientProtocol as FreezeOmniClient

    ready, opening = _ready_freeze_omni(), FreezeOmniClient()
    for frame in frames:
        with contextlib.suppress(SessionError):
            ready.receive(frame, 1.0)
        with contextlib.suppress(SessionError):
            opening.handshake(frame)


# --- hume-evi and nova-sonic ------------------------------------------------------------------

HUME_EXAMPLES: list[Any] = [
    {"type": "audio_output", "id": "a", "index": 0, "data": "UklGRg=="},
    {"type": "assistant_message", "id": "m", "message": {"role": "assistant", "content": "hi"},
     "models": {"prosody": {"scores": {"Joy": 0.5}}}},
    {"type": "user_message", "interim": False, "message": {"role": "user", "content": "x"}},
    {"type": "assistant_end"},
    {"type": "error", "code": "E0100", "slug": "s", "message": "m"},
    {"type": "chat_metadata", "chat_id": "c", "chat_group_id": "g"},
]  # fmt: skip
HUME_KEYS = ("type", "data", "message", "models", "prosody", "scores", "content", "code")


@FAST
@given(hostile.hostile_text(HUME_EXAMPLES, HUME_KEYS))
def test_hume_evi_server_messages(text: str) -> None:
    from duplexsim.clients.hume_evi import events as hume_wire
    from duplexsim.clients.hume_evi.protocol import ClientProtocol as HumeClient

    ready = HumeClient(hume_wire.SessionSettings(24000), secret="hume-key")
    ready.receive_opening(hume_wire.encode_server(hume_wire.ChatMetadata("c", "g")))
    with contextlib.suppress(SessionError):
        ready.receive(text, 1.0)
    with contextlib.suppress(SessionError):
        HumeClient(hume_wire.SessionSettings(24000)).receive_opening(text)


NOVA_EXAMPLES: list[Any] = [
    {"event": {"audioOutput": {"content": "AAAA", "contentId": "c"}}},
    {"event": {"textOutput": {"content": '{"interrupted": true}', "contentId": "c", "role": "USER"}}},
    {"event": {"contentStart": {"contentId": "c", "type": "TEXT", "role": "ASSISTANT",
                                "additionalModelFields": '{"generationStage": "FINAL"}'}}},
    {"event": {"contentEnd": {"contentId": "c", "type": "AUDIO", "stopReason": "END_TURN"}}},
]  # fmt: skip
NOVA_KEYS = ("event", "audioOutput", "textOutput", "content", "contentId", "role", "type")


@FAST
@given(st.lists(hostile.hostile_bytes(NOVA_EXAMPLES, NOVA_KEYS), min_size=1, max_size=3))
def test_nova_sonic_event_stream(payloads: list[bytes]) -> None:
    from duplexsim.clients.nova_sonic import events as nova_wire
    from duplexsim.clients.nova_sonic.protocol import ClientProtocol as NovaClient
    from duplexsim.clients.nova_sonic.protocol import SonicSettings

    proto = NovaClient(SonicSettings(), "p1", secret="nova-secret")
    for payload in payloads:
        for data in (nova_wire.chunk_raw(payload), payload):  # a good frame, and raw bytes
            with contextlib.suppress(SessionError):
                proto.receive(data, 1.0)
