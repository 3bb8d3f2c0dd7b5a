"""The OpenAI-family dialects: what each puts on the wire, what each fake accepts, and sessions
over loopback where the dialects differ (rates, auth, shapes). The contract suite runs every
dialect through the same behaviours and faults; the providers' own SDKs are clients of the fakes
here where they can talk to a local URL."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from typing import Any

import numpy as np
import pytest

from duplexsim.clients.base import ClientConfig
from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.openai_realtime.config import RealtimeOptions
from duplexsim.clients.openai_realtime.dialects import (
    AZURE,
    AZURE_PREVIEW,
    DIALECTS,
    OPENAI,
    QWEN,
    VOICE_LIVE,
    Dialect,
)
from duplexsim.clients.openai_realtime.fake import Send, ServerProtocol
from duplexsim.clients.openai_realtime.protocol import ClientProtocol, endpoint_url
from duplexsim.clients.openai_realtime.server import start_server
from duplexsim.clients.registry import client_class, fake_server_factory
from duplexsim.core.audio import float_to_pcm16
from duplexsim.core.errors import ConfigError, ProtocolError
from duplexsim.session.engine import run_session
from tests.helpers.sessions import context, settings, synthetic
from tests.helpers.virtualclock import run_virtual

KEY = "dialect-test-SECRET-77"
SETTINGS = settings(reply_timeout_s=1.5, deadline_margin_s=10.0)


def options(d: Dialect, **opts: Any) -> RealtimeOptions:
    return RealtimeOptions.from_options(opts, opts.pop("voice", None), d)


# --- what each dialect sends ----------------------------------------------------------------


def test_every_dialect_is_a_registered_protocol_with_a_fake() -> None:
    for d in DIALECTS.values():
        assert client_class(d.protocol).dialect is d
        assert fake_server_factory(d.protocol) is not None


def test_azure_sends_openais_ga_session() -> None:
    assert options(AZURE, voice="marin").session() == options(OPENAI, voice="marin").session()


def test_flat_dialects_send_the_beta_shape_with_their_own_formats() -> None:
    qwen = options(QWEN, voice="Cherry").session()
    assert qwen == {
        "modalities": ["text", "audio"],
        "input_audio_format": "pcm16",
        "output_audio_format": "pcm16",
        "turn_detection": {"type": "server_vad"},
        "voice": "Cherry",
    }
    live = options(VOICE_LIVE, sample_rate=16000, turn_detection="azure_semantic_vad").session()
    assert live["input_audio_sampling_rate"] == 16000 and live["output_audio_format"] == "pcm16"
    assert live["turn_detection"] == {"type": "azure_semantic_vad"} and "type" not in live
    assert options(QWEN, turn_detection="none").session()["turn_detection"] is None


@pytest.mark.parametrize(
    ("d", "opts", "complaint"),
    [
        (QWEN, {"sample_rate": 24000}, "allowed: 16000"),
        (AZURE, {"sample_rate": 16000}, "allowed: 24000"),
        (VOICE_LIVE, {"turn_detection": "semantic_vad"}, "azure_semantic_vad"),
        (QWEN, {"session_shape": "xai"}, "unknown option"),
    ],
)
def test_each_dialect_checks_its_options(d: Dialect, opts: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint):
        options(d, **opts)


def test_auth_and_endpoint_follow_the_dialect() -> None:
    assert AZURE.auth_headers(KEY) == {"api-key": KEY}
    assert QWEN.auth_headers(KEY) == {"Authorization": f"Bearer {KEY}"}
    # the fakes read the key only where their dialect sends it
    assert AZURE.key_from({"api-key": " k "}) == "k"
    assert AZURE.key_from({"Authorization": "Bearer k"}) is None
    assert OPENAI.key_from({"Authorization": "Basic k"}) is None
    assert OPENAI.key_from({"Authorization": "Bearer  "}) is None
    url = endpoint_url(
        "wss://r.services.ai.azure.com/voice-live/realtime", "gpt-realtime", VOICE_LIVE
    )
    assert url.endswith("/voice-live/realtime?api-version=2026-07-15&model=gpt-realtime")
    pinned = endpoint_url("wss://h/voice-live/realtime?api-version=2025-10-01", "m", VOICE_LIVE)
    assert pinned.endswith("?api-version=2025-10-01&model=m")  # the URL's own version wins
    assert endpoint_url("wss://h/openai/v1/realtime", "my-deploy", AZURE).endswith(
        "?model=my-deploy"
    )
    # Azure's preview API versions name the deployment, not the model
    preview = endpoint_url("wss://r.openai.azure.com/openai/realtime", "dep", AZURE_PREVIEW)
    assert preview.endswith("/openai/realtime?api-version=2025-04-01-preview&deployment=dep")


def test_capabilities_carry_the_dialects_rates() -> None:
    qwen = client_class("qwen-omni-realtime")(ClientConfig(url="ws://127.0.0.1:9"))
    assert (qwen.capabilities.input_rate, qwen.capabilities.output_rate) == (16000, 24000)
    live = client_class("azure-voice-live")(
        ClientConfig(url="ws://127.0.0.1:9", options={"sample_rate": 16000})
    )
    assert (live.capabilities.input_rate, live.capabilities.output_rate) == (16000, 24000)


def test_the_client_checks_the_rate_a_flat_server_reports() -> None:
    proto = ClientProtocol(options(VOICE_LIVE, sample_rate=16000))
    proto.receive_handshake('{"type":"session.created","session":{}}')
    with pytest.raises(ProtocolError, match="24000 Hz input"):
        proto.receive_handshake(
            json.dumps({"type": "session.updated", "session": {"input_audio_sampling_rate": 24000}})
        )


# --- what each fake accepts -------------------------------------------------------------------


def update(d: Dialect, session: Any) -> dict[str, Any]:
    server = ServerProtocol(behaviour_factory("echo"), dialect=d)
    [reply] = server.receive_text(json.dumps({"type": "session.update", "session": session}))
    assert isinstance(reply, Send)
    return json.loads(reply.message)


@pytest.mark.parametrize("d", list(DIALECTS.values()), ids=list(DIALECTS))
def test_each_fake_accepts_what_its_client_sends(d: Dialect) -> None:
    for td in ("server_vad", "none"):
        reply = update(
            d, options(d, voice=d.voices[0] if d.voices else None, turn_detection=td).session()
        )
        assert reply["type"] == "session.updated", reply


@pytest.mark.parametrize(
    ("d", "session", "param"),
    [
        (QWEN, options(OPENAI).session(), "session.type"),  # GA shape to a beta-shaped server
        (QWEN, {"modalities": ["audio"]}, "session.modalities"),  # DashScope wants text too
        (QWEN, {"output_audio_format": "wav"}, "session.output_audio_format"),
        (VOICE_LIVE, {"input_audio_sampling_rate": 44100}, "session.input_audio_sampling_rate"),
        (VOICE_LIVE, {"turn_detection": {"type": "semantic_vad"}}, "session.turn_detection.type"),
        (AZURE, options(QWEN).session(), "session.type"),  # beta shape to a GA server
    ],
)
def test_each_fake_refuses_another_dialects_session(
    d: Dialect, session: dict[str, Any], param: str
) -> None:
    reply = update(d, session)
    assert reply["type"] == "error" and reply["error"]["param"] == param, reply


def test_flat_fakes_open_with_their_session_and_send_beta_names() -> None:
    server = ServerProtocol(behaviour_factory("echo"), dialect=QWEN)
    [opening] = server.opening()
    assert isinstance(opening, Send)
    session = json.loads(opening.message)["session"]
    assert (session["input_audio_format"], session["output_audio_format"]) == ("pcm16", "pcm16")
    assert server._event("response.output_audio.delta").message.startswith(
        '{"type":"response.audio.delta"'
    )


# --- sessions over loopback -------------------------------------------------------------------


async def dialect_session(
    protocol: str, *, client_protocol: str | None = None, path: str | None = None, **params: Any
):
    start = fake_server_factory(protocol)
    server = await start(behaviour_factory("delayed-echo", **params), api_key=KEY)
    try:
        cls = client_class(client_protocol or protocol)
        url = server.url if path is None else f"ws://127.0.0.1:{server.port}{path}"
        client = cls(ClientConfig(url=url, model="m", api_key=KEY, connect_timeout_s=3.0))
        return await run_session(
            client,
            context(tail_s=0.4, rate=client.capabilities.input_rate, voice=synthetic),
            SETTINGS,
        )
    finally:
        await server.aclose()


def test_qwen_replies_at_24_khz_to_16_khz_input_on_time() -> None:
    # on the virtual clock: what the dialect adds, and nothing a loaded machine does
    out = run_virtual(dialect_session("qwen-omni-realtime", latency_s=0.5, hangover_s=0.25))
    assert out.status == "ok", out.error
    assert (out.input_rate, out.output_rate) == (16000, 24000)
    assert out.timing.latency_s == pytest.approx(0.5, abs=0.05)
    assert KEY not in json.dumps(out.events)


@pytest.mark.parametrize(
    ("server", "client"),
    [("azure-realtime", "openai-realtime"), ("openai-realtime", "azure-realtime")],
)
async def test_a_key_sent_the_wrong_way_is_refused_as_auth(server: str, client: str) -> None:
    out = await dialect_session(server, client_protocol=client)
    assert (out.status, out.end_reason, out.retryable) == ("failed", "auth", False), out.error


async def test_the_wrong_path_is_refused() -> None:
    out = await dialect_session("azure-voice-live", path=AZURE.path)
    assert out.status == "failed" and "HTTP 404" in (out.error or "")


# --- the providers' SDKs as clients of the fakes ----------------------------------------------


def pcm_b64(x: np.ndarray) -> str:
    return base64.b64encode(float_to_pcm16(x)).decode()


async def test_azure_voicelive_sdk_talks_to_the_voice_live_fake() -> None:
    voicelive = pytest.importorskip("azure.ai.voicelive.aio")
    from azure.core.credentials import AzureKeyCredential

    server = await start_server(
        behaviour_factory("echo", hangover_s=0.3), api_key=KEY, dialect="voice-live"
    )
    kinds: list[str] = []
    done: Any = None
    try:
        endpoint = server.url.replace("ws://", "http://").removesuffix(VOICE_LIVE.path)
        async with voicelive.connect(
            endpoint=endpoint, credential=AzureKeyCredential(KEY), model="gpt-realtime"
        ) as conn:
            await conn.session.update(
                session={"modalities": ["text", "audio"], "input_audio_format": "pcm16",
                         "turn_detection": {"type": "server_vad"}}
            )  # fmt: skip
            x = context(tail_s=0.4, rate=24000, voice=synthetic)
            for i in range(0, x.size, 480):
                await conn.input_audio_buffer.append(audio=pcm_b64(x[i : i + 480]))
            silence = pcm_b64(np.zeros(480, np.float32))
            async with asyncio.timeout(10):
                async for event in conn:
                    kinds.append(str(event.type))
                    if event.type == "response.done":
                        done = event
                        break
                    await conn.input_audio_buffer.append(audio=silence)
    finally:
        await server.aclose()
    assert kinds[:2] == ["session.created", "session.updated"]
    assert "input_audio_buffer.speech_started" in kinds and "response.audio.delta" in kinds
    # the usage, as the SDK's TokenUsage reads it (every field it requires is there)
    usage = done.response.usage
    assert type(usage).__name__ == "TokenUsage"
    assert (
        usage.output_token_details.audio_tokens > 0 and usage.input_token_details.audio_tokens > 0
    )
    assert usage.input_token_details.cached_tokens_details.audio_tokens == 0


def test_dashscope_sdk_talks_to_the_qwen_fake() -> None:
    omni = pytest.importorskip("dashscope.audio.qwen_omni")
    events: list[dict[str, Any]] = []
    done = threading.Event()

    class Callback(omni.OmniRealtimeCallback):
        def on_event(self, message: Any) -> None:
            events.append(message)
            if message.get("type") == "response.done":
                done.set()

    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, Any] = {}

    def serve() -> None:
        async def main() -> None:
            box["server"] = await start_server(
                behaviour_factory("echo", hangover_s=0.3), api_key=KEY, dialect="qwen"
            )
            started.set()
            box["stop"] = asyncio.Event()
            await box["stop"].wait()
            await box["server"].aclose()

        loop.run_until_complete(main())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert started.wait(5)
    try:
        conv = omni.OmniRealtimeConversation(
            model="qwen3-omni-flash-realtime",
            callback=Callback(),
            url=box["server"].url,
            api_key=KEY,
        )
        conv.connect()
        conv.update_session(
            output_modalities=[omni.MultiModality.AUDIO, omni.MultiModality.TEXT], voice="Cherry"
        )
        x = np.concatenate(
            (context(tail_s=0.4, rate=16000, voice=synthetic), np.zeros(16000 * 2, np.float32))
        )
        for i in range(0, x.size, 320):
            conv.append_audio(pcm_b64(x[i : i + 320]))
            if done.is_set():
                break
        assert done.wait(5), [e.get("type") for e in events]
        conv.close()
    finally:
        loop.call_soon_threadsafe(box["stop"].set)
        thread.join(5)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["session.created", "session.updated"], events[:2]
    deltas = [e for e in events if e["type"] == "response.audio.delta"]
    assert deltas and len(base64.b64decode(deltas[0]["delta"])) == 2 * 2400  # 100 ms at 24 kHz


async def test_a_fake_that_requires_the_model_asks_for_it_by_the_dialects_name() -> None:
    server = await start_server(
        behaviour_factory("silent"), dialect="azure-preview", require_model=True
    )
    try:
        cls = client_class("azure-realtime-preview")
        out = await run_session(
            cls(ClientConfig(url=server.url, api_key=KEY)),
            context(tail_s=0.4, rate=24000, voice=synthetic),
            SETTINGS,
        )
        assert out.status == "failed" and "HTTP 400" in (out.error or ""), out.error
        named = cls(ClientConfig(url=server.url, model="dep", api_key=KEY))
        await named.connect()  # ?deployment=dep&api-version=...: let in
        await named.aclose()
    finally:
        await server.aclose()
