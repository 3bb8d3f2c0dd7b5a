"""hume-evi: wire messages checked against the hume SDK's own types, the pure protocol objects,
then client and fake over loopback, and the hume SDK as a client of the fake."""

from __future__ import annotations

import asyncio
import base64
import json
import random

import numpy as np
import pytest

from duplexsim.clients.base import (
    AudioOut,
    ClientConfig,
    EndOfTurn,
    ErrorEvent,
    ProviderEmotion,
    SpeechStarted,
    SpeechStopped,
    Transcript,
)
from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.fakekit.serveractions import Close, Send, Stall
from duplexsim.clients.hume_evi import events as wire
from duplexsim.clients.hume_evi.client import HumeEviClient
from duplexsim.clients.hume_evi.fake import ServerProtocol, prosody_scores
from duplexsim.clients.hume_evi.protocol import ClientProtocol, evi_error
from duplexsim.clients.hume_evi.server import start_server
from duplexsim.clients.hume_evi.wav import encode_wav, parse_wav
from duplexsim.core.audio import float_to_pcm16, pcm16_to_float
from duplexsim.core.errors import ConfigError, ProtocolError, RateLimited
from duplexsim.session.engine import SessionOutcome, run_session
from tests.helpers.sessions import context, settings
from tests.helpers.signals import voiced_signal
from tests.helpers.virtualclock import run_virtual

RATE = 16000
# a timer fires a little after its time (ticking at exactly MediaClock.when() can fall a float
# rounding short of the lapse and move nothing)
TIMER_LATE_S = 0.001
FRAME = 320
KEY = "hume-secret-key-123"
SETTINGS = settings(reply_timeout_s=1.2, deadline_margin_s=10.0)


def sent(actions) -> list[str]:
    return [a.message for a in actions if isinstance(a, Send)]


def ready_client() -> ClientProtocol:
    proto = ClientProtocol(wire.SessionSettings(RATE), secret=KEY)
    proto.receive_opening(wire.encode_server(wire.ChatMetadata("c", "g")))
    return proto


def fed_server(x: np.ndarray, behaviour: str = "echo", **params) -> list[list[str]]:
    server = ServerProtocol(behaviour_factory(behaviour, **params), chat_id="t")
    server.receive(wire.encode_client(wire.SessionSettings(RATE)))
    return [
        sent(server.receive(wire.encode_client(wire.AudioInput(float_to_pcm16(x[i : i + FRAME])))))
        for i in range(0, x.size - FRAME + 1, FRAME)
    ]


def types_of(frames: list[str]) -> list[str]:
    return [json.loads(f)["type"] for f in frames]


# --- the SDK's types -------------------------------------------------------------------------


def test_client_messages_are_valid_sdk_publish_events() -> None:
    types = pytest.importorskip("hume.empathic_voice")
    settings = json.loads(wire.encode_client(wire.SessionSettings(16000, 1, "Be kind.", "v1")))
    parsed = types.SessionSettings.model_validate(settings)
    assert parsed.audio.sample_rate == 16000 and parsed.audio.encoding == "linear16"
    assert parsed.system_prompt == "Be kind." and parsed.voice_id == "v1"
    audio = json.loads(wire.encode_client(wire.AudioInput(b"\x01\x02")))
    assert base64.b64decode(types.AudioInput.model_validate(audio).data) == b"\x01\x02"


def test_fake_messages_are_valid_sdk_subscribe_events() -> None:
    pytest.importorskip("hume")
    from hume.core.pydantic_utilities import parse_obj_as
    from hume.empathic_voice.types.subscribe_event import SubscribeEvent

    x = np.concatenate([context(tail_s=0.2), np.zeros(RATE * 3, np.float32)])
    frames = [f for batch in fed_server(x) for f in batch]
    server = ServerProtocol(behaviour_factory("echo"))
    frames += sent(server.open()) + sent(server.receive("{"))  # chat_metadata, an error
    seen = set()
    for frame in frames:
        body = json.loads(frame)
        parsed = parse_obj_as(SubscribeEvent, body)
        assert parsed.type == body["type"]
        seen.add(body["type"])
        if body["type"] in ("user_message", "assistant_message", "assistant_prosody"):
            scores = parsed.models.prosody.scores
            assert scores.excitement == body["models"]["prosody"]["scores"]["Excitement"]
    assert seen == {
        "chat_metadata", "error", "user_message", "assistant_message", "audio_output",
        "assistant_prosody", "assistant_end",
    }  # fmt: skip


# --- WAV -------------------------------------------------------------------------------------


def test_wav_round_trips_and_skips_other_chunks() -> None:
    pcm = float_to_pcm16(voiced_signal(0.05, 48000))
    assert parse_wav(encode_wav(pcm, 48000)) == (pcm, 48000, 1)
    wav = encode_wav(pcm, 24000, 2 if len(pcm) % 4 == 0 else 1)
    with_list = wav[:36] + b"LIST\x03\x00\x00\x00abc\x00" + wav[36:]  # odd size: padded
    assert parse_wav(with_list)[1] == 24000
    streaming = wav[:40] + b"\x00\x00\x00\x00" + wav[44:]  # data size 0: to the end
    assert parse_wav(streaming)[0] == pcm


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"RIFF",
        b"RIFF\x00\x00\x00\x00WAVE",
        b"RIFX" + bytes(40),
        b"RIFF\x00\x00\x00\x00WAVEdata\x02\x00\x00\x00ab",
    ],
)
def test_bad_wav_is_a_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_wav(data)


def test_wav_of_another_format_is_refused() -> None:
    wav = bytearray(encode_wav(b"\x00\x00" * 4, 48000))
    wav[34] = 8  # 8-bit
    with pytest.raises(ProtocolError, match="16-bit"):
        parse_wav(bytes(wav))


def test_any_bytes_raise_nothing_but_protocol_errors() -> None:
    rng = random.Random(3)
    good = encode_wav(b"\x01\x00" * 10, 48000)
    for _ in range(3000):
        data = bytearray(good)
        for _ in range(rng.randrange(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        cut = bytes(data[: rng.randrange(len(data) + 1)])
        proto = ready_client()
        frame = json.dumps({"type": "audio_output", "id": "a", "index": 0,
                            "data": base64.b64encode(cut).decode()})  # fmt: skip
        try:
            proto.receive(frame, 0.0)
            proto.receive(frame[: rng.randrange(len(frame))], 0.0)
        except ProtocolError:
            pass


# --- client protocol -------------------------------------------------------------------------


def test_opening_waits_for_chat_metadata_then_sends_the_audio_format() -> None:
    proto = ClientProtocol(wire.SessionSettings(24000, 1, "Hi"))
    (settings,) = proto.receive_opening(wire.encode_server(wire.ChatMetadata("c1", "g1", "r1")))
    assert json.loads(settings)["audio"] == {
        "encoding": "linear16",
        "sample_rate": 24000,
        "channels": 1,
    }
    assert proto.ready and proto.metadata.chat_id == "c1"
    with pytest.raises(RateLimited):
        ClientProtocol(wire.SessionSettings(RATE)).receive_opening(
            wire.encode_server(wire.Error("E0710", "too_many_concurrent_chats", "Too many chats"))
        )
    with pytest.raises(ProtocolError, match="chat_metadata"):
        ClientProtocol(wire.SessionSettings(RATE)).receive_opening('{"type":"assistant_end"}')


def test_server_messages_become_stamped_events() -> None:
    proto = ready_client()
    scores = prosody_scores(voiced_signal(0.2))
    wav = encode_wav(float_to_pcm16(voiced_signal(0.1, 48000)), 48000)
    frames = [
        wire.UserMessage("hi", 100, 900, interim=True),
        wire.UserMessage("hi", 100, 900, scores=scores),
        wire.AssistantMessage("Hello!", "m1", scores),
        wire.AudioOutput("m1", 0, wav),
        wire.AssistantProsody("m1", scores),
        wire.AssistantEnd(),
        wire.UserInterruption(1_700_000_000_000),
    ]
    events = [
        e for i, f in enumerate(frames) for e in proto.receive(wire.encode_server(f), float(i))
    ]
    kinds = [type(e) for e in events]
    assert kinds == [SpeechStopped, ProviderEmotion, Transcript, ProviderEmotion, AudioOut,
                     ProviderEmotion, EndOfTurn, SpeechStarted]  # fmt: skip
    user, reply, spoken = (e for e in events if isinstance(e, ProviderEmotion))
    assert (user.role, user.source, user.arrival) == ("user", "user_message", 1.0)
    assert (reply.role, reply.message_id, spoken.source) == ("assistant", "m1", "assistant_prosody")
    assert dict(reply.scores) == scores and len(reply.scores) == 48
    audio = events[4]
    assert audio.samples.size == 4800 and audio.arrival == 3.0


def test_stereo_or_other_rates_come_out_mono_at_48k() -> None:
    proto = ready_client()
    stereo = float_to_pcm16(np.repeat(voiced_signal(0.1, 24000), 2))
    (audio,) = proto.receive(
        wire.encode_server(wire.AudioOutput("a", 0, encode_wav(stereo, 24000, 2))), 0.0
    )
    assert audio.samples.size == 4800


def test_errors_are_classified_and_the_key_is_blanked() -> None:
    assert isinstance(evi_error(wire.Error("E0710", "rate_limited", "slow down")), RateLimited)
    auth = evi_error(wire.Error("E0100", "bad", f"invalid API key {KEY}"), KEY)
    assert (auth.reason, auth.retryable) == ("auth", False) and KEY not in auth.message
    assert evi_error(wire.Error("E0500", "internal_error", "oops")).retryable
    (event,) = ready_client().receive(wire.encode_server(wire.Error("E1", "x", "y")), 2.0)
    assert isinstance(event, ErrorEvent) and event.fatal


@pytest.mark.parametrize(
    "frame",
    [
        '{"type":"audio_output","id":"a","index":"0","data":""}',
        '{"type":"audio_output","id":"a","index":0,"data":"**"}',
        '{"type":"user_message","message":{},"models":{},"time":{"begin":0},"interim":false}',
        "[]",
        '{"type":"assistant_message","message":{"content":1}}',
        '{"type":"assistant_prosody","models":{"prosody":{"scores":{"Joy":"high"}}}}',
        '{"type":"assistant_prosody","models":{"prosody":{"scores":{"Joy":1' + "0" * 400 + "}}}}",
    ],
)
def test_malformed_server_messages_are_protocol_errors(frame: str) -> None:
    with pytest.raises(ProtocolError):
        ready_client().receive(frame, 0.0)


def test_options_are_checked_and_reach_the_wire() -> None:
    client = HumeEviClient(ClientConfig(url="wss://h/v0/evi/chat", api_key=KEY,
                                        options={"config_id": "cfg", "config_version": 2}))  # fmt: skip
    assert client.endpoint() == "wss://h/v0/evi/chat?config_id=cfg&config_version=2"
    assert client.auth_headers() == {"X-Hume-Api-Key": KEY}
    assert KEY not in json.dumps(client.describe())
    with pytest.raises(ConfigError, match="unknown option"):
        HumeEviClient(ClientConfig(url="wss://h", options={"rate": 1}))
    with pytest.raises(ConfigError, match="sample_rate"):
        HumeEviClient(ClientConfig(url="wss://h", options={"sample_rate": 4000}))


# --- fake server protocol --------------------------------------------------------------------


def test_fake_reply_starts_exactly_at_the_behaviours_onset() -> None:
    x = np.concatenate([context(tail_s=0.2), np.zeros(RATE * 3, np.float32)])
    out = fed_server(x, "delayed-echo", latency_s=0.5, hangover_s=0.25)
    first = next(i for i, batch in enumerate(out) if "audio_output" in types_of(batch))
    assert types_of(out[first])[:3] == ["user_message", "assistant_message", "audio_output"]
    audio = json.loads(out[first][2])
    pcm, rate, _ = parse_wav(base64.b64decode(audio["data"]))
    lead = np.flatnonzero(pcm16_to_float(pcm))[0]
    onset = first * FRAME / RATE + lead / rate
    assert onset == pytest.approx(0.2 + 1.0 + 0.5, abs=0.03)  # speech end + latency
    user = json.loads(out[first][0])
    assert user["time"]["end"] == pytest.approx(1200, abs=30)
    flat = [t for batch in out for t in types_of(batch)]
    assert flat[-2:] == ["assistant_prosody", "assistant_end"]
    assert flat.index("assistant_end") < first + 1 + 20  # faster than real time


def test_fake_is_interrupted_by_speech_over_its_reply() -> None:
    x = np.concatenate([context(tail_s=0.2), np.zeros(int(0.6 * RATE), np.float32), voiced_signal(1.0),
                        np.zeros(RATE, np.float32)])  # fmt: skip
    flat = [t for batch in fed_server(x, "neutral", hangover_s=0.3) for t in types_of(batch)]
    assert "user_interruption" in flat


def test_fake_needs_the_audio_format_first_and_answers_bad_messages_with_errors() -> None:
    server = ServerProtocol(behaviour_factory("echo"))
    (error,) = sent(server.receive(wire.encode_client(wire.AudioInput(b"\x00\x00"))))
    assert "session_settings" in json.loads(error)["message"]
    assert json.loads(sent(server.receive('{"type":"session_settings"}'))[0])["type"] == "error"


def test_fake_media_faults_trigger_on_media_time() -> None:
    frame = wire.encode_client(wire.AudioInput(bytes(2 * FRAME)))
    for faults, want in ((Faults(close_after_s=0.1), Close), (Faults(stall_after_s=0.1), Stall)):
        server = ServerProtocol(behaviour_factory("echo"), faults)
        server.receive(wire.encode_client(wire.SessionSettings(RATE)))
        acts = [a for _ in range(5) for a in server.receive(frame)]
        assert isinstance(acts[-1], want) and len(acts) == 1


# --- over loopback ---------------------------------------------------------------------------


def test_session_records_hume_scores_beside_the_reply() -> None:
    async def main() -> SessionOutcome:
        factory = behaviour_factory("delayed-echo", latency_s=0.4, hangover_s=0.25)
        server = await start_server(factory)
        try:
            config = ClientConfig(url=server.url, api_key=KEY, connect_timeout_s=5.0)
            return await run_session(HumeEviClient(config), context(tail_s=0.2), SETTINGS)
        finally:
            await server.aclose()

    out = run_virtual(main())  # the latency the protocol gives, however loaded the machine
    assert out.status == "ok", out.error
    assert out.timing.latency_s == pytest.approx(0.4, abs=0.06)
    emotions = [e for e in out.events if e["kind"] == "provider_emotion"]
    assert [e["role"] for e in emotions] == ["user", "assistant", "assistant"]
    assert all(len(e["scores"]) == 48 for e in emotions)
    assert any(e["kind"] == "end_of_turn" for e in out.events)
    assert KEY not in json.dumps(out.events)


async def test_hume_sdk_talks_to_the_fake() -> None:
    hume = pytest.importorskip("hume")
    from hume.empathic_voice import AudioInput
    from hume.empathic_voice import SessionSettings as SdkSettings
    from hume.empathic_voice.types import AudioConfiguration, ConnectSessionSettings

    server = await start_server(behaviour_factory("echo", hangover_s=0.3))
    base = server.url.removesuffix("/chat")
    env = hume.HumeClientEnvironment(base="http://127.0.0.1:9", evi=base, tts=base, stream=base)
    client = hume.AsyncHumeClient(api_key=KEY, environment=env)
    got: list[str] = []
    try:
        async with client.empathic_voice.chat.connect(
            session_settings=ConnectSessionSettings()
        ) as socket:
            first = await socket.recv()
            assert first.type == "chat_metadata"
            audio = AudioConfiguration(encoding="linear16", sample_rate=RATE, channels=1)
            await socket.send_publish(SdkSettings(audio=audio))
            x = np.concatenate([context(tail_s=0.2), np.zeros(RATE, np.float32)])
            for i in range(0, x.size - FRAME + 1, FRAME):
                data = base64.b64encode(float_to_pcm16(x[i : i + FRAME])).decode()
                await socket.send_publish(AudioInput(data=data))
            while "assistant_end" not in got:
                event = await asyncio.wait_for(socket.recv(), 5)
                got.append(event.type)
    finally:
        await server.aclose()
    assert got[:2] == ["user_message", "assistant_message"] and "audio_output" in got


async def test_a_run_records_humes_scores_in_the_bundle_and_replays_them(tmp_path, monkeypatch):
    from duplexsim.core.benchmark import load_benchmark
    from duplexsim.profiles.profile import ModelProfile
    from duplexsim.replay.sessions import replay_run
    from duplexsim.run.runner import RunOptions, execute_run
    from tests.helpers.runs import short_benchmark

    monkeypatch.setenv("DUPLEXSIM_HUME_TEST_KEY", KEY)
    bench = load_benchmark(short_benchmark(tmp_path / "b", 1))
    server = await start_server(behaviour_factory("delayed-echo", latency_s=0.4, hangover_s=0.25))
    try:
        profile = ModelProfile(
            name="hume-test",
            protocol="hume-evi",
            url=server.url,
            api_key_env="DUPLEXSIM_HUME_TEST_KEY",
        )
        opts = RunOptions(run_id="h", runs_dir=tmp_path / "runs", settings=SETTINGS, quiet=True)
        (row,) = await execute_run(bench, profile, opts)
    finally:
        await server.aclose()
    assert row.status == "ok", row.error
    bundle = tmp_path / "runs" / "h" / "sessions" / "s0"
    text = (bundle / "events.jsonl").read_text()
    lines = [json.loads(line) for line in text.splitlines()]
    emotions = [e for e in lines if e["kind"] == "provider_emotion"]
    assert {e["role"] for e in emotions} == {"user", "assistant"}
    assert all(len(e["scores"]) == 48 and e["dir"] == "recv" for e in emotions)
    assert KEY not in text and KEY not in (bundle / "meta.json").read_text()
    (result,) = await replay_run(tmp_path / "runs" / "h", [], concurrency=1)
    assert result.agrees(5.0), (result.recorded, result.replayed)


def test_replay_turns_recorded_scores_back_into_events() -> None:
    from duplexsim.clients.recorded import _event

    item = {"kind": "provider_emotion", "role": "user", "source": "user_message", "id": None,
            "scores": {"Joy": 0.5}}  # fmt: skip
    event = _event(item, np.zeros(0, np.float32), 48000)
    assert isinstance(event, ProviderEmotion) and dict(event.scores) == {"Joy": 0.5}
    assert event.role == "user"


def test_fake_talks_on_by_the_wall_clock_when_the_client_stops_sending() -> None:
    server = ServerProtocol(behaviour_factory("delayed-echo", latency_s=0.5, hangover_s=0.25))
    server.receive(wire.encode_client(wire.SessionSettings(RATE)), now=0.0)
    # stops before the reply
    x = np.concatenate([context(tail_s=0.2), np.zeros(int(0.3 * RATE), np.float32)])
    frames = range(0, x.size - FRAME + 1, FRAME)
    for i in frames:
        pcm = float_to_pcm16(x[i : i + FRAME])
        assert sent(server.receive(wire.encode_client(wire.AudioInput(pcm)), now=i / RATE)) == []
    got: list[str] = []
    while (at := server.wake_at()) is not None and "assistant_end" not in got:
        got += types_of(sent(server.tick(at + TIMER_LATE_S)))
    assert got[:3] == ["user_message", "assistant_message", "audio_output"]
    assert got[-2:] == ["assistant_prosody", "assistant_end"]


@pytest.mark.parametrize("key", [None, "wrong-key"])
async def test_the_fake_refuses_a_missing_or_wrong_key_as_hume_does(key) -> None:
    server = await start_server(behaviour_factory("echo"), api_key=KEY)
    try:
        client = HumeEviClient(ClientConfig(url=server.url, api_key=key, connect_timeout_s=5.0))
        out = await run_session(client, context(tail_s=0.2), SETTINGS)
    finally:
        await server.aclose()
    assert (out.status, out.end_reason, out.retryable) == ("failed", "auth", False)
    assert "401" in out.error and "wrong-key" not in out.error
