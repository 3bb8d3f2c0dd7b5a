"""openai-realtime: the pure client and fake-server protocols, then sessions over loopback."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

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
from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.fakekit.replypacing import BURST_S, SPEEDUP
from duplexsim.clients.fakekit.serveractions import expand
from duplexsim.clients.openai_realtime import events as wire
from duplexsim.clients.openai_realtime.client import OpenAIRealtimeClient
from duplexsim.clients.openai_realtime.config import RealtimeOptions
from duplexsim.clients.openai_realtime.dialects import DIALECTS, OPENAI, XAI, Dialect
from duplexsim.clients.openai_realtime.fake import Close, Send, ServerProtocol, Stall
from duplexsim.clients.openai_realtime.protocol import ClientProtocol, classify_error, endpoint_url
from duplexsim.clients.openai_realtime.server import start_server
from duplexsim.clients.registry import client_class
from duplexsim.core.audio import float_to_pcm16, frame_signal
from duplexsim.core.errors import (
    ConfigError,
    ConnectError,
    ProtocolError,
    RateLimited,
    RemoteError,
    SessionError,
)
from duplexsim.core.timing import measure_reply, speech_end
from duplexsim.session.engine import run_session
from tests.helpers.sessions import context, settings
from tests.helpers.signals import voiced_signal
from tests.helpers.virtualclock import run_virtual

RATE = 24000
FRAME = 480  # 20 ms at 24 kHz
KEY = "sk-fake-SECRET-4242"


def options(dialect: Dialect = OPENAI, **opts: Any) -> RealtimeOptions:
    return RealtimeOptions.from_options(opts, opts.pop("voice", None), dialect)


def ready_protocol(**opts: Any) -> ClientProtocol:
    proto = ClientProtocol(options(**opts), secrets=(KEY,))
    [update] = proto.receive_handshake('{"type":"session.created","session":{}}')
    assert json.loads(update)["type"] == "session.update"
    proto.receive_handshake('{"type":"session.updated","session":{}}')
    assert proto.ready
    return proto


def event(kind: str, **fields: Any) -> str:
    return json.dumps({"type": kind, "event_id": "event_1", **fields})


def b64(ints: list[int]) -> str:
    return base64.b64encode(np.array(ints, dtype="<i2").tobytes()).decode()


# --- options and session.update --------------------------------------------------------------


def test_session_update_has_the_ga_shape() -> None:
    session = options(voice="marin").session()
    fmt = {"type": "audio/pcm", "rate": 24000}
    assert session == {
        "type": "realtime",
        "output_modalities": ["audio"],
        "audio": {
            "input": {"format": fmt, "turn_detection": {"type": "server_vad"}},
            "output": {"format": fmt, "voice": "marin"},
        },
    }
    manual = options(turn_detection="none", instructions="Be brief.").session()
    assert manual["audio"]["input"]["turn_detection"] is None
    assert manual["instructions"] == "Be brief."
    semantic = {"type": "semantic_vad", "eagerness": "high"}
    assert (
        options(turn_detection=semantic).session()["audio"]["input"]["turn_detection"] == semantic
    )
    noise = {"audio": {"input": {"noise_reduction": {"type": "near_field"}}}}
    merged = options(session=noise).session()["audio"]["input"]
    assert merged["noise_reduction"] == {"type": "near_field"} and merged["format"] == fmt


def test_xai_session_shape_puts_voice_and_turn_detection_on_top() -> None:
    session = options(XAI, voice="eve", sample_rate=16000).session()
    fmt = {"type": "audio/pcm", "rate": 16000}
    assert session == {
        "voice": "eve",
        "turn_detection": {"type": "server_vad"},
        "audio": {"input": {"format": fmt}, "output": {"format": fmt}},
    }


@pytest.mark.parametrize(
    ("opts", "complaint"),
    [
        ({"turn_detection": "semantic"}, "turn_detection must be one of"),
        ({"turn_detecton": "none"}, "unknown option"),
        ({"session_shape": "xai"}, "unknown option"),
        ({"sample_rate": 16000}, "sample_rate 16000"),
        ({"turn_detection": "semantic_vad", "dialect": XAI}, "server_vad, none"),
        ({"session": "x"}, "must be a table"),
    ],
)
def test_bad_options_are_config_errors(opts: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint):
        RealtimeOptions.from_options(opts, None, opts.pop("dialect", OPENAI))


def test_capabilities_follow_turn_detection() -> None:
    vad = OpenAIRealtimeClient(ClientConfig(url="ws://x")).capabilities
    assert (vad.input_rate, vad.output_rate, vad.frame_ms) == (24000, 24000, 20)
    assert vad.faster_than_realtime and vad.end_of_turn_signal and vad.server_vad
    assert not vad.manual_commit and not vad.continuous_output
    cfg = ClientConfig(url="ws://x", options={"turn_detection": "none"})
    manual = OpenAIRealtimeClient(cfg).capabilities
    assert manual.manual_commit and not manual.server_vad


def test_endpoint_url_carries_the_model() -> None:
    base = "wss://api.openai.com/v1/realtime"
    assert endpoint_url(base, "gpt-realtime") == f"{base}?model=gpt-realtime"
    assert endpoint_url(f"{base}?model=a", "b") == f"{base}?model=a"
    assert endpoint_url(f"{base}?x=1", "m 1") == f"{base}?x=1&model=m+1"
    assert endpoint_url(base, None) == base


# --- client protocol ---------------------------------------------------------------------------


def test_handshake_waits_for_created_then_updated() -> None:
    proto = ClientProtocol(options(turn_detection="none"))
    assert proto.receive_handshake(event("ping", timestamp=1)) == []
    assert proto.receive_handshake(event("session.updated", session={})) == []  # not ours yet
    [update] = proto.receive_handshake(event("conversation.created", conversation={}))
    body = json.loads(update)
    assert body["type"] == "session.update" and body["event_id"].startswith("evt_")
    assert body["session"]["audio"]["input"]["turn_detection"] is None
    assert not proto.ready
    ack = {"audio": {"input": {"format": {"rate": 24000}, "turn_detection": None}}}
    proto.receive_handshake(event("session.updated", session=ack))
    assert proto.ready and proto.session == ack


@pytest.mark.parametrize(
    ("error", "kind", "reason", "text"),
    [
        ({"type": "invalid_request_error", "code": "beta_api_shape_disabled", "message": "gone"},
         ProtocolError, "protocol", "GA interface"),
        ({"type": "invalid_request_error", "code": "invalid_api_key", "message": "no"},
         RemoteError, "auth", "API key"),
        ({"type": "invalid_request_error", "code": "unknown_parameter", "message": "Unknown",
          "param": "session.modalities"}, RemoteError, "remote", "session.modalities"),
    ],
)  # fmt: skip
def test_handshake_errors_are_final(
    error: dict[str, Any], kind: type[SessionError], reason: str, text: str
) -> None:
    proto = ClientProtocol(options())
    proto.receive_handshake(event("session.created", session={}))
    with pytest.raises(kind, match=text) as err:
        proto.receive_handshake(event("error", error=error))
    assert err.value.reason == reason and not err.value.retryable


def test_server_ignoring_manual_turns_is_a_protocol_error() -> None:
    proto = ClientProtocol(options(turn_detection="none"))
    proto.receive_handshake(event("session.created", session={}))
    vad_on = {"audio": {"input": {"turn_detection": {"type": "server_vad"}}}}
    with pytest.raises(ProtocolError, match="turn detection on, we asked for off"):
        proto.receive_handshake(event("session.updated", session=vad_on))


@pytest.mark.parametrize("beta", [False, True])
def test_audio_and_transcripts_become_events(beta: bool) -> None:
    proto = ready_protocol()
    audio = "response.audio.delta" if beta else "response.output_audio.delta"
    script = "response.audio_transcript" if beta else "response.output_audio_transcript"
    [out] = proto.receive_text(event(audio, delta=b64([0, 16384, -32768])), 1.5)
    assert isinstance(out, AudioOut) and out.arrival == 1.5 and out.offset_s is None
    np.testing.assert_array_equal(out.samples, np.array([0.0, 0.5, -1.0], dtype=np.float32))
    assert proto.receive_text(event(f"{script}.delta", delta="hi"), 2.0) == [
        Transcript("hi", 2.0, False)
    ]
    assert proto.receive_text(event(f"{script}.done", transcript="hi there"), 2.1) == [
        Transcript("hi there", 2.1, True)
    ]


def test_vad_events_keep_the_server_positions() -> None:
    proto = ready_protocol()
    started = event("input_audio_buffer.speech_started", audio_start_ms=700, item_id="i")
    stopped = event("input_audio_buffer.speech_stopped", audio_end_ms=1800, item_id="i")
    assert proto.receive_text(started, 1.0) == [SpeechStarted(1.0)]
    assert proto.receive_text(stopped, 2.0) == [SpeechStopped(2.0)]
    assert proto.receive_text(event("input_audio_buffer.speech_started"), 3.0)  # xAI: no ms
    assert [(m.kind, m.server_ms) for m in proto.vad_marks] == [
        ("speech_started", 700),
        ("speech_stopped", 1800),
        ("speech_started", None),
    ]


def test_end_of_turn_is_stamped_with_its_arrival_only() -> None:
    # playout is the session's OutputTrack's business: a burst's response.done carries its arrival
    proto = ready_protocol()
    half_second = b64([1000] * (RATE // 2))
    proto.receive_text(event("response.output_audio.delta", delta=half_second), 10.0)
    proto.receive_text(event("response.output_audio.delta", delta=half_second), 10.01)
    done = event("response.done", response={"id": "r", "status": "completed"})
    assert proto.receive_text(done, 10.02) == [EndOfTurn(10.02)]


def test_other_events_are_ignored_and_unknown_ones_counted() -> None:
    proto = ready_protocol()
    limits = [{"name": "tokens", "limit": 10, "remaining": 9, "reset_seconds": 1.5}]
    for text in [
        event("conversation.item.added", item={}),
        event("conversation.item.created", item={}),  # beta name
        event("response.created", response={"id": "r"}),
        event("ping", timestamp=3),
        event("response.brand_new_thing"),
    ]:
        assert proto.receive_text(text, 1.0) == []
    # rate limits are kept, and passed on (tests/clients/test_usage.py)
    assert proto.receive_text(event("rate_limits.updated", rate_limits=limits), 1.0)
    assert proto.rate_limits == (wire.RateLimit("tokens", 10, 9, 1.5),)
    assert proto.unknown_types == {"response.brand_new_thing": 1}


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("{not json", "not valid JSON"),
        ("[1]", "JSON list, not an object"),
        ('{"delta": "AAAA"}', "no string 'type'"),
        (event("response.output_audio.delta"), "lacks field 'delta'"),
        (event("response.output_audio.delta", delta=3), "'delta' must be str, got int"),
        (event("response.output_audio.delta", delta="@@@@"), "not valid base64"),
        (event("response.output_audio.delta", delta="AAAA"), "even length"),
        (event("error"), "lacks field 'error'"),
        (event("response.done", response={"status": 1}), "'status' must be str"),
        (event("input_audio_buffer.speech_started", audio_start_ms="1"), "must be int"),
        (event("rate_limits.updated", rate_limits=[1]), "must be an object"),
    ],
)
def test_malformed_events_are_protocol_errors(text: str, complaint: str) -> None:
    with pytest.raises(ProtocolError, match=complaint):
        ready_protocol().receive_text(text, 0.0)


def test_the_key_never_appears_in_protocol_errors() -> None:
    with pytest.raises(ProtocolError) as err:
        ready_protocol().receive_text('{"type": "x", ' + KEY, 0.0)
    assert KEY not in str(err.value)
    error = wire.Error(message=f"bad key {KEY}", type="invalid_request_error")
    assert KEY not in str(classify_error(error, (KEY,))[0])


@pytest.mark.parametrize(
    ("code", "kind", "message", "cls", "fatal", "retryable"),
    [
        ("beta_api_shape_disabled", "invalid_request_error", "", ProtocolError, True, False),
        ("invalid_api_key", "invalid_request_error", "", RemoteError, True, False),
        (None, "authentication_error", "", RemoteError, True, False),
        ("rate_limit_exceeded", "rate_limit_error", "Try again in 1.5s.", RateLimited, True, True),
        ("session_expired", "invalid_request_error", "", RemoteError, True, True),
        ("insufficient_quota", "insufficient_quota", "", RemoteError, True, False),
        (None, "server_error", "oops", RemoteError, False, True),
        ("unknown_parameter", "invalid_request_error", "", RemoteError, False, False),
    ],
)
def test_error_events_are_classified(
    code: str | None, kind: str, message: str, cls: type, fatal: bool, retryable: bool
) -> None:
    error = {"type": kind, "code": code, "message": message}
    [ev] = ready_protocol().receive_text(event("error", error=error), 4.0)
    assert isinstance(ev, ErrorEvent) and ev.arrival == 4.0
    assert type(ev.error) is cls and ev.fatal is fatal and ev.error.retryable is retryable
    if cls is RateLimited:
        assert isinstance(ev.error, RateLimited) and ev.error.retry_after_s == 1.5


def test_failed_response_is_fatal_and_cancelled_one_ends_the_turn() -> None:
    proto = ready_protocol()
    details = {"type": "failed", "error": {"type": "server_error", "code": "boom"}}
    failed = {"id": "r", "status": "failed", "status_details": details}
    [ev] = proto.receive_text(event("response.done", response=failed), 1.0)
    assert isinstance(ev, ErrorEvent) and ev.fatal and ev.error.retryable
    assert "boom" in str(ev.error)
    cancelled = {"id": "r", "status": "cancelled"}
    assert proto.receive_text(event("response.done", response=cancelled), 2.0) == [EndOfTurn(2.0)]


def test_commit_is_sent_only_when_turn_detection_is_off() -> None:
    assert ready_protocol().commit_messages() == []
    sent = [json.loads(m)["type"] for m in ready_protocol(turn_detection="none").commit_messages()]
    assert sent == ["input_audio_buffer.commit", "response.create"]
    [append] = [json.loads(ready_protocol().audio_message(np.full(4, 0.5, np.float32)))]
    assert append == {"type": "input_audio_buffer.append", "audio": b64([16384] * 4)}


# --- fake server protocol ----------------------------------------------------------------------


def texts(actions: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(a.message) for a in expand(actions) if isinstance(a, Send)]


def fake(
    name: str = "echo", *, faults: Faults | None = None, dialect: str = "openai", **kw: Any
) -> tuple[ServerProtocol, list[dict[str, Any]]]:
    factory = behaviour_factory(name, **kw.pop("params", {}))
    server = ServerProtocol(factory, faults, dialect=DIALECTS[dialect], **kw)
    return server, texts(server.opening())


def update(server: ServerProtocol, session: Any) -> dict[str, Any]:
    [reply] = texts(server.receive_text(json.dumps({"type": "session.update", "session": session})))
    return reply


def test_fake_opens_like_each_dialect() -> None:
    assert fake()[1][0]["type"] == "session.created"
    assert fake(dialect="xai")[1][0]["type"] == "conversation.created"
    server = ServerProtocol(behaviour_factory("echo"), beta_header=True)
    opening = server.opening()
    assert texts(opening)[0]["error"]["code"] == "beta_api_shape_disabled"
    assert isinstance(opening[-1], Close)
    assert server.receive_text('{"type":"response.create"}') == []


def test_fake_accepts_what_the_client_sends() -> None:
    for opts in ({}, {"turn_detection": "none"}, {"turn_detection": "semantic_vad"}):
        server, _ = fake()
        assert update(server, options(voice="cedar", **opts).session())["type"] == "session.updated"
    server, _ = fake(dialect="xai")
    xai = options(XAI, voice="eve", turn_detection="none").session()
    assert update(server, xai)["session"]["turn_detection"] is None


GA = {"type": "realtime"}


@pytest.mark.parametrize(
    ("session", "code", "param"),
    [
        ({"modalities": ["audio"]}, "missing_required_parameter", "session.type"),
        ({**GA, "modalities": ["audio"]}, "unknown_parameter", "session.modalities"),
        ({**GA, "input_audio_format": "pcm16"}, "unknown_parameter", "session.input_audio_format"),
        ({**GA, "voice": "alloy"}, "unknown_parameter", "session.voice"),
        ({**GA, "temperature": 0.8}, "unknown_parameter", "session.temperature"),
        ({"type": "transcription"}, "invalid_value", "session.type"),
        ({**GA, "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}},
         "invalid_value", "session.audio.input.format.rate"),
        ({**GA, "audio": {"output": {"format": {"type": "audio/pcmu"}}}},
         "invalid_value", "session.audio.output.format.type"),
        ({**GA, "audio": {"input": {"turn_detection": {"type": "vad"}}}},
         "invalid_value", "session.audio.input.turn_detection.type"),
        ({**GA, "audio": {"input": {"turn_detection": {"type": "semantic_vad", "threshold": 1}}}},
         "unknown_parameter", "session.audio.input.turn_detection.threshold"),
        ({**GA, "audio": {"output": {"voice": "eve"}}}, "invalid_value", "session.audio.output.voice"),
        ("realtime", "invalid_type", None),
    ],
)  # fmt: skip
def test_fake_rejects_beta_and_unknown_session_shapes(
    session: Any, code: str, param: str | None
) -> None:
    server, _ = fake()
    reply = update(server, session)
    assert reply["type"] == "error" and reply["error"]["type"] == "invalid_request_error"
    assert (reply["error"]["code"], reply["error"]["param"]) == (code, param)
    assert update(server, {**GA})["type"] == "session.updated"  # the session survives


def test_fake_answers_bad_client_events_with_errors() -> None:
    server, _ = fake()
    [unknown] = texts(server.receive_text('{"type":"input_audio.append","event_id":"e7"}'))
    assert unknown["error"]["code"] == "invalid_value" and unknown["error"]["event_id"] == "e7"
    [bad] = texts(server.receive_text('{"type":"input_audio_buffer.append","audio":"@@"}'))
    assert bad["error"]["param"] == "audio"
    [empty] = texts(server.receive_text('{"type":"input_audio_buffer.commit"}'))
    assert empty["error"]["code"] == "input_audio_buffer_commit_empty"
    [cancel] = texts(server.receive_text('{"type":"response.cancel"}'))
    assert cancel["error"]["code"] == "response_cancel_not_active"


def speech_24k(lead_s: float = 0.3, speech_s: float = 1.0, tail_s: float = 1.5) -> np.ndarray:
    parts = [np.zeros(round(lead_s * RATE)), voiced_signal(speech_s, RATE)]
    return np.concatenate([*parts, np.zeros(round(tail_s * RATE))]).astype(np.float32)


def feed(server: ServerProtocol, x: np.ndarray, until: Callable[[], bool] = lambda: False) -> Any:
    """Stream ``x`` in 20 ms appends; each server event with the index of the chunk it answered."""
    out = []
    for n, frame in enumerate(frame_signal(x, FRAME)):
        out += [(n, t) for t in texts(server.receive_text(wire.audio_append(frame)))]
        if until():
            break
    return out


def placed(answers: list[tuple[int, dict[str, Any]]]) -> np.ndarray:
    """The reply as a listener hears it when each delta arrives with the chunk it answered."""
    track, end = np.zeros(10 * RATE, np.float32), 0
    for n, msg in answers:
        if msg["type"] == "response.output_audio.delta":
            samples = wire.pcm_samples(wire.decode_audio(msg["delta"]))
            start = max(n * FRAME, end)
            track[start : start + samples.size] = samples
            end = start + samples.size
    return track


@pytest.mark.parametrize("latency_s", [0.4, 0.8])
def test_fake_sends_a_short_reply_in_one_burst_where_it_starts(latency_s: float) -> None:
    server, _ = fake("delayed-echo", params={"latency_s": latency_s, "hangover_s": 0.25})
    x = speech_24k()
    answers = feed(server, x)
    kinds = [m["type"] for _, m in answers]
    assert kinds[:2] == ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped"]
    assert kinds[-1] == "response.done" and kinds.count("response.created") == 1
    burst = {n for n, m in answers if m["type"].startswith(("response.", "rate_limits."))}
    assert len(burst) == 1  # a reply under BURST_S answers one chunk: faster than real time
    deltas = [m for _, m in answers if m["type"] == "response.output_audio.delta"]
    assert all(len(base64.b64decode(m["delta"])) <= 2 * 2400 for m in deltas)  # <= 100 ms each
    e = speech_end(x, RATE)
    timing = measure_reply(placed(answers), RATE, speech_end_s=e)
    assert timing.latency_s == pytest.approx(latency_s, abs=1e-3)  # to the sample, less VAD


def test_fake_waits_for_response_create_without_turn_detection() -> None:
    server, _ = fake("echo")
    update(server, options(turn_detection="none").session())
    x = speech_24k(tail_s=0.2)
    answers = feed(server, x)
    assert not any(
        m["type"].startswith(("input_audio_buffer.speech", "response.")) for _, m in answers
    )
    commit = texts(server.receive_text('{"type":"input_audio_buffer.commit"}'))
    assert commit[0]["type"] == "input_audio_buffer.committed"
    assert server.receive_text('{"type":"response.create"}') == []  # the turn is not over yet
    answers = feed(server, np.zeros(RATE, np.float32), until=lambda: server.responses > 0)
    assert [m["type"] for _, m in answers][-1] == "response.done"
    assert any(m["type"] == "response.output_audio.delta" for _, m in answers)


def test_fake_silent_model_answers_response_create_with_an_empty_response() -> None:
    server, _ = fake("silent")
    update(server, options(turn_detection="none").session())
    feed(server, speech_24k(tail_s=1.0))
    server.receive_text('{"type":"input_audio_buffer.commit"}')
    kinds = [m["type"] for m in texts(server.receive_text('{"type":"response.create"}'))]
    assert kinds == ["response.created", "response.done"]


def test_fake_beta_names_exercise_the_aliases() -> None:
    server, _ = fake("echo", beta_names=True)
    answers = feed(server, speech_24k())
    kinds = {m["type"] for _, m in answers}
    assert "response.audio.delta" in kinds and "response.output_audio.delta" not in kinds
    proto = ready_protocol()
    events = [e for _, m in answers for e in proto.receive_text(json.dumps(m), 0.0)]
    assert any(isinstance(e, AudioOut) for e in events) and isinstance(events[-1], EndOfTurn)


def test_fake_media_faults_trigger_on_media_time() -> None:
    frame = wire.audio_append(np.zeros(FRAME, np.float32))
    closing, _ = fake(faults=Faults(close_after_s=0.1))
    assert [closing.receive_text(frame) for _ in range(5)][-1] == [
        Close(1011, "injected fault: close_after_s")
    ]
    stalling, _ = fake(faults=Faults(stall_after_s=0.04))
    assert stalling.receive_text(frame) == []
    assert stalling.receive_text(frame) == [Stall()]
    bad, _ = fake(faults=Faults(malformed_after_s=0.02, malformed_then_close=True))
    garbage, close = bad.receive_text(frame)
    assert isinstance(garbage, Send) and isinstance(close, Close)
    with pytest.raises(ProtocolError):
        wire.decode(garbage.message)


# --- sessions over loopback ----------------------------------------------------------------------

SETTINGS = settings(reply_timeout_s=0.8)


async def session(
    behaviour: str = "echo",
    *,
    faults: Faults | None = None,
    opts: dict[str, Any] | None = None,
    key: str | None = KEY,
    server_key: str | None = None,
    dialect: str = "openai",
    **params: Any,
) -> Any:
    factory = behaviour_factory(behaviour, **params)
    server = await start_server(factory, faults=faults, api_key=server_key, dialect=dialect)
    try:
        cfg = ClientConfig(
            url=server.url,
            model="gpt-realtime",
            voice="marin" if dialect == "openai" else "eve",
            api_key=key,
            options=opts or {},
            connect_timeout_s=2.0,
        )
        client = client_class(DIALECTS[dialect].protocol)(cfg)
        out = await run_session(client, context(), SETTINGS)
    finally:
        await server.aclose()
    assert KEY not in json.dumps(out.events) and KEY not in (out.error or "")
    return out


def kinds(events: list[dict[str, Any]]) -> set[str]:
    return {e["kind"] for e in events}


def test_echo_replies_and_ends_with_end_of_turn() -> None:
    out = run_virtual(session("echo"))  # chunks placed as they were sent
    assert out.status == "ok" and out.end_reason == "end-of-turn", out.error
    assert (out.input_rate, out.output_rate) == (24000, 24000)
    assert {"speech_started", "speech_stopped", "audio", "transcript", "end_of_turn"} <= kinds(
        out.events
    )
    assert out.timing.speech_end_s == pytest.approx(1.2, abs=0.005)
    assert out.timing.duration_s == pytest.approx(1.0, abs=0.05)  # the whole echo, not cut short


def test_delayed_echo_latency_is_recovered() -> None:
    # on the virtual clock: what the protocol adds, and nothing a loaded machine does
    out = run_virtual(session("delayed-echo", latency_s=0.8, hangover_s=0.25))
    assert out.status == "ok", out.error
    assert out.timing.latency_s == pytest.approx(0.8, abs=0.05)
    assert out.timing.overlap_s == 0.0


async def test_silent_model_is_no_reply() -> None:
    out = await session("silent")
    assert out.status == "no-reply" and out.error is None
    assert {"speech_started", "speech_stopped"} <= kinds(out.events)


async def test_manual_turns_commit_and_ask_for_the_response() -> None:
    out = await session("echo", opts={"turn_detection": "none"})
    assert out.status == "ok" and out.end_reason == "end-of-turn", out.error
    assert not {"speech_started", "speech_stopped"} & kinds(out.events)  # no server VAD


async def test_xai_dialect_with_the_xai_session_shape() -> None:
    out = await session("echo", dialect="xai")
    assert out.status == "ok" and out.end_reason == "end-of-turn", out.error


@pytest.mark.parametrize(
    ("kw", "reason", "retryable"),
    [
        ({"server_key": "sk-the-right-one"}, "auth", False),
        ({"key": None}, "auth", False),
        ({"faults": Faults(rate_limit_first=1, retry_after_s=0.2)}, "rate-limited", True),
        ({"faults": Faults(refuse_status=503)}, "connect", True),
        ({"faults": Faults(close_after_s=0.5)}, "disconnected", True),
        ({"faults": Faults(malformed_after_s=0.5)}, "protocol", False),
    ],
)
async def test_failures_end_the_session_with_a_reason(
    kw: dict[str, Any], reason: str, retryable: bool
) -> None:
    out = await session("echo", **kw)
    assert out.status == "failed" and out.end_reason == reason, out.error
    assert out.retryable is retryable and out.error
    if reason == "rate-limited":
        assert out.retry_after_s == pytest.approx(0.2)


async def test_connect_authenticates_with_the_bearer_key() -> None:
    seen: list[ClientEvent] = []
    server = await start_server(behaviour_factory("silent"), api_key=KEY)
    try:
        client = OpenAIRealtimeClient(ClientConfig(url=server.url, model="m", api_key=KEY))
        await client.connect()
        assert client.protocol_state.ready
        await client.send_audio(np.zeros(FRAME, np.float32))
        await client.aclose()
        seen = [e async for e in client.events()]
    finally:
        await server.aclose()
    assert seen == [] and KEY not in json.dumps(client.describe())
    assert KEY not in repr(client.config)


async def test_handshake_refusals_name_what_to_check() -> None:
    server = await start_server(behaviour_factory("silent"), require_model=True)
    try:
        no_model = OpenAIRealtimeClient(ClientConfig(url=server.url, api_key=KEY))
        with pytest.raises(ConnectError, match="model name") as err:
            await no_model.connect()
        assert not err.value.retryable
        wrong_path = server.url.replace("/v1/realtime", "/v1/live")
        with pytest.raises(ConnectError, match="HTTP 404"):
            await OpenAIRealtimeClient(
                ClientConfig(url=wrong_path, model="m", api_key=KEY)
            ).connect()
    finally:
        await server.aclose()


def long_reply_fake(utterance_s: float) -> ServerProtocol:
    voice = voiced_signal(utterance_s, RATE, f0=200.0)
    server, _ = fake("neutral", params={"utterance": voice, "hangover_s": 0.25})
    return server


def test_fake_generates_a_long_reply_four_times_faster_than_real_time() -> None:
    server = long_reply_fake(2.0)
    answers = feed(server, speech_24k(tail_s=3.0))
    [n0] = [n for n, m in answers if m["type"] == "response.created"]
    deltas = [n for n, m in answers if m["type"] == "response.output_audio.delta"]
    total = len(deltas)
    assert total in (20, 21)  # 2 s, and the lead-in silence up to the reply's first sample
    finished = None
    for k in range(16):  # once chunk n0 + k is in: BURST_S, then 4 x 20 ms per 20 ms of input
        due = min(total, math.ceil((BURST_S + SPEEDUP * (k + 1) * 0.02) / 0.1 - 1e-9))
        assert sum(1 for n in deltas if n <= n0 + k) == due, k
        if due == total and finished is None:
            finished = n0 + k
    [done] = [n for n, m in answers if m["type"] == "response.done"]
    assert done == max(deltas) == finished
    # the listener still hears the reply start where the behaviour put it
    heard = placed(answers)
    start = round(float(np.flatnonzero(np.abs(heard) > 0.01)[0]))
    assert abs(start - n0 * FRAME) < FRAME


def test_fake_cancels_a_response_being_generated() -> None:
    server = long_reply_fake(6.0)
    x = speech_24k(tail_s=3.0)
    answers = feed(server, x, until=lambda: server.responses == 1)
    assert answers[-1][1]["type"] == "response.output_audio.delta"
    [*_, done] = texts(server.receive_text('{"type":"response.cancel"}'))
    assert done["type"] == "response.done" and done["response"]["status"] == "cancelled"
    assert done["response"]["status_details"]["reason"] == "client_cancelled"
    later = feed(server, np.zeros(RATE, np.float32))
    assert not [m for _, m in later if m["type"].startswith("response.")]  # nothing more
    [again] = texts(server.receive_text('{"type":"response.cancel"}'))
    assert again["error"]["code"] == "response_cancel_not_active"


def test_user_speech_interrupts_a_response_being_generated() -> None:
    server = long_reply_fake(6.0)
    feed(server, speech_24k(tail_s=1.0), until=lambda: server.responses == 1)
    answers = feed(server, speech_24k(lead_s=0.1, tail_s=0.2))  # talks over the reply
    kinds = [m["type"] for _, m in answers]
    assert "input_audio_buffer.speech_started" in kinds
    [done] = [m for _, m in answers if m["type"] == "response.done"]
    assert done["response"]["status"] == "cancelled"
    assert done["response"]["status_details"]["reason"] == "turn_detected"
    after = kinds.index("response.done")
    assert "response.output_audio.delta" not in kinds[after:]
    # the model was silenced, so the turn that interrupted it gets a reply of its own
    later = feed(server, np.zeros(RATE, np.float32))
    assert [m["type"] for _, m in later].count("response.created") == 1
    assert server.responses == 2


def test_fake_truncates_only_audio_it_generated() -> None:
    """conversation.item.truncate: within the item's generated audio it is acknowledged; past it,
    or for an item that does not exist, it is an error naming the parameter."""
    server = ServerProtocol(behaviour_factory("echo"))
    server.opening()
    x = np.concatenate([voiced_signal(1.5, 24000), np.zeros(24000, np.float32)])
    for i in range(0, x.size, 480):
        server.receive(event("input_audio_buffer.append", audio=b64_pcm(x[i : i + 480])))
    assert server.responses == 1

    def truncate(item: str, end_ms: int) -> dict[str, Any]:
        fields = {"item_id": item, "content_index": 0, "audio_end_ms": end_ms}
        [sent] = [a for a in expand(server.receive(event("conversation.item.truncate", **fields)))]
        assert isinstance(sent, Send)
        return json.loads(sent.message)

    assert truncate("item_resp_1", 500)["type"] == "conversation.item.truncated"
    past = truncate("item_resp_1", 60_000)
    assert past["type"] == "error" and past["error"]["param"] == "audio_end_ms"
    missing = truncate("item_nope", 0)
    assert missing["type"] == "error" and missing["error"]["param"] == "item_id"


def test_fake_measures_the_audio_it_generated_at_the_output_rate() -> None:
    """qwen-omni-realtime hears 16 kHz and speaks 24 kHz: a truncation is checked against the
    milliseconds of 24 kHz audio it sent, not that many samples at the input's rate."""
    server, _ = fake(dialect="qwen")
    x = np.concatenate([voiced_signal(1.5, 16000), np.zeros(16000, np.float32)])
    sent: list[dict[str, Any]] = []
    for frame in frame_signal(x, 320):
        sent += texts(server.receive_text(wire.audio_append(frame)))
    deltas = [m for m in sent if m["type"].endswith("audio.delta")]
    assert deltas and server.responses == 1
    generated_ms = sum(len(base64.b64decode(m["delta"])) for m in deltas) // 2 * 1000 // 24000

    def truncate(end_ms: int) -> dict[str, Any]:
        fields = {"item_id": deltas[0]["item_id"], "content_index": 0, "audio_end_ms": end_ms}
        [answer] = texts(server.receive(event("conversation.item.truncate", **fields)))
        return answer

    assert truncate(generated_ms)["type"] == "conversation.item.truncated"
    past = truncate(generated_ms + 1)
    assert past["type"] == "error" and past["error"]["param"] == "audio_end_ms"


def b64_pcm(samples: np.ndarray) -> str:
    return base64.b64encode(float_to_pcm16(samples)).decode()
