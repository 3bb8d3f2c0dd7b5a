"""The official SDKs as clients of our fakes (hermetic: loopback, a dummy key, a local base URL).

A user dry-runs a hosted profile against a fake before spending money; the fake is only worth that
if the provider's own client holds a session with it. Each test opens a session with the SDK,
sends a spoken turn, then stops sending (as an SDK user does after a turn) and must still get the
whole reply and the end of turn: the fakes generate on wall-clock time.
Needs the test dependencies ``openai`` and ``google-genai`` (the ``dev`` extra).
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.core.audio import float_to_pcm16
from tests.helpers.signals import voiced_signal
from tests.helpers.tls import self_signed_tls

SPEECH_S = 2.5  # echo replies with the whole turn: longer than the fakes' first burst (1 s)
QUIET_S = 1.0  # then silence, enough for the turn to end; then the client sends nothing more


def turn_chunks(rate: int) -> list[bytes]:
    """PCM16 of a spoken turn and the silence after it, in 20 ms chunks."""
    x = np.concatenate([voiced_signal(SPEECH_S, rate), np.zeros(round(QUIET_S * rate))])
    step = rate // 50
    return [float_to_pcm16(x[i : i + step]) for i in range(0, x.size, step)]


# --- openai: the realtime WebSocket client -----------------------------------------------------


async def test_openai_sdk_realtime_client_holds_a_session_with_the_fake() -> None:
    openai = pytest.importorskip("openai")
    from openai.types.realtime import ResponseAudioDeltaEvent, ResponseDoneEvent

    from duplexsim.clients.openai_realtime.server import start_server

    async with await start_server(behaviour_factory("echo"), require_model=True) as server:
        client = openai.AsyncOpenAI(
            api_key="sk-test", base_url=f"http://127.0.0.1:{server.port}/v1"
        )
        async with client.realtime.connect(model="gpt-realtime") as conn:
            first = await asyncio.wait_for(conn.recv(), 5)
            assert first.type == "session.created"
            await conn.session.update(
                session={
                    "type": "realtime",
                    "output_modalities": ["audio"],
                    "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}}},
                }
            )
            for chunk in turn_chunks(24000):
                await conn.input_audio_buffer.append(audio=base64.b64encode(chunk).decode())
            kinds, audio, done = await _openai_reply(conn)
        await client.close()
    assert "session.updated" in kinds and "input_audio_buffer.speech_stopped" in kinds
    assert isinstance(done, ResponseDoneEvent) and done.response.status == "completed"
    usage = done.response.usage  # as the SDK's RealtimeResponseUsage reads it
    assert usage is not None and usage.output_token_details is not None
    assert usage.output_token_details.audio_tokens and usage.input_tokens
    assert audio >= 2 * round((SPEECH_S - 0.1) * 24000)  # the whole echo came
    assert ResponseAudioDeltaEvent.__name__ in kinds["response.output_audio.delta"]


async def _openai_reply(conn: Any) -> tuple[dict[str, str], int, Any]:
    """Events until response.done: each type with the SDK class it parsed into, audio bytes."""
    kinds: dict[str, str] = {}
    audio = 0
    async with asyncio.timeout(15):
        async for event in conn:
            kinds[event.type] = type(event).__name__
            if event.type == "response.output_audio.delta":
                audio += len(base64.b64decode(event.delta))
            if event.type == "error":
                raise AssertionError(f"the fake refused the SDK: {event.error}")
            if event.type == "response.done":
                return kinds, audio, event
    raise AssertionError("no response.done")


# --- google-genai: the live client -------------------------------------------------------------


@pytest.mark.parametrize(
    "version", [None, "v1beta", "v1alpha"], ids=["default", "v1beta", "v1alpha"]
)
async def test_google_genai_live_client_holds_a_session_with_the_fake(
    version: str | None, tmp_path: Path
) -> None:
    genai = pytest.importorskip("google.genai")
    from google.genai import types

    from duplexsim.clients.gemini_live.server import start_server

    server_tls, client_tls = self_signed_tls(tmp_path)  # the SDK speaks wss:// only
    fake = start_server(behaviour_factory("echo"), api_key="test-key", ssl_context=server_tls)
    async with await fake as server:
        options = types.HttpOptions(
            base_url=f"https://127.0.0.1:{server.port}",
            api_version=version,
            async_client_args={"ssl": client_tls},
        )
        client = genai.Client(api_key="test-key", http_options=options)
        config = types.LiveConnectConfig(
            response_modalities=[types.Modality.AUDIO], output_audio_transcription={}
        )
        async with client.aio.live.connect(model="gemini-3.8-live", config=config) as session:
            for chunk in turn_chunks(16000):
                blob = types.Blob(data=chunk, mime_type="audio/pcm;rate=16000")
                await session.send_realtime_input(audio=blob)
            audio, finished, usage = await _genai_turn(session)
    assert finished  # turnComplete, though the client sent nothing after its turn
    assert audio >= 2 * round((SPEECH_S - 0.1) * 24000)
    # its usage, as the SDK's UsageMetadata reads it: 32 tokens a second of reply audio
    assert usage is not None and usage.response_token_count == round(32 * audio / 2 / 24000)


async def _genai_turn(session: Any) -> tuple[int, bool, Any]:
    """Audio bytes of the model's turn, whether turnComplete ended it, and its usage."""
    audio = 0
    async with asyncio.timeout(15):
        async for message in session.receive():  # the SDK stops at turnComplete
            content = message.server_content
            if content is None:
                continue
            for part in content.model_turn.parts if content.model_turn else []:
                if part.inline_data is not None:
                    assert part.inline_data.mime_type == "audio/pcm;rate=24000"
                    audio += len(part.inline_data.data)
            if content.turn_complete:
                return audio, True, message.usage_metadata
    return audio, False, None


# --- openai: the WebRTC calls endpoint ---------------------------------------------------------


async def test_openai_sdk_creates_a_webrtc_call_with_the_fake() -> None:
    """``client.realtime.calls.create`` (multipart SDP offer and session) answers with an SDP
    that an aiortc peer connects with: session.created on the oai-events channel, audio back."""
    openai = pytest.importorskip("openai")
    pytest.importorskip("aiortc")
    from aiortc import RTCSessionDescription

    from duplexsim.clients.openai_webrtc.server import start_server
    from duplexsim.clients.transport.rtc import (
        OutgoingAudioTrack,
        loopback_ice,
        new_peer_connection,
    )

    async with await start_server(behaviour_factory("echo"), api_key="sk-test") as server:
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=f"{server.url}/v1")
        pc = new_peer_connection()
        track = OutgoingAudioTrack()
        pc.addTrack(track)
        channel = pc.createDataChannel("oai-events")
        opened: asyncio.Queue[str] = asyncio.Queue()
        channel.on("message", opened.put_nowait)
        heard = asyncio.Event()
        listening: list[asyncio.Task[None]] = []

        @pc.on("track")
        def _on_track(remote: Any) -> None:
            async def listen() -> None:
                await remote.recv()
                heard.set()

            listening.append(asyncio.ensure_future(listen()))

        try:
            with loopback_ice():
                await pc.setLocalDescription(await pc.createOffer())
            answer = await client.realtime.calls.create(
                sdp=pc.localDescription.sdp, session={"type": "realtime", "model": "gpt-realtime"}
            )
            sdp = answer.text if hasattr(answer, "text") else str(answer)
            assert sdp.startswith("v=0")
            await pc.setRemoteDescription(RTCSessionDescription(sdp, "answer"))
            first = await asyncio.wait_for(opened.get(), 10)
            assert '"session.created"' in first
            track.push(voiced_signal(0.5, 48000))
            await asyncio.wait_for(heard.wait(), 10)
        finally:
            track.stop()
            await pc.close()
            await client.close()


async def test_google_genai_live_client_ends_its_turn_with_audio_stream_end(tmp_path: Path) -> None:
    """Speech, then ``audio_stream_end=True`` instead of silence (the microphone went off)."""
    genai = pytest.importorskip("google.genai")
    from google.genai import types

    from duplexsim.clients.gemini_live.server import start_server

    server_tls, client_tls = self_signed_tls(tmp_path)
    fake = start_server(behaviour_factory("echo"), ssl_context=server_tls)
    async with await fake as server:
        options = types.HttpOptions(
            base_url=f"https://127.0.0.1:{server.port}", async_client_args={"ssl": client_tls}
        )
        client = genai.Client(api_key="test-key", http_options=options)
        config = types.LiveConnectConfig(response_modalities=[types.Modality.AUDIO])
        async with client.aio.live.connect(model="gemini-3.8-live", config=config) as session:
            speech = float_to_pcm16(voiced_signal(SPEECH_S, 16000))
            for i in range(0, len(speech), 640):
                blob = types.Blob(data=speech[i : i + 640], mime_type="audio/pcm;rate=16000")
                await session.send_realtime_input(audio=blob)
            await session.send_realtime_input(audio_stream_end=True)
            audio, finished, _ = await _genai_turn(session)
    assert finished and audio >= 2 * round((SPEECH_S - 0.1) * 24000)


async def test_google_genai_live_client_against_serve_model_over_tls(tmp_path: Path) -> None:
    """What a user does: ``serve-model --protocol gemini-live --tls-cert ... --tls-key ...`` and
    the SDK pointed at it (its live client speaks wss:// only)."""
    genai = pytest.importorskip("google.genai")
    from google.genai import types

    from duplexsim.run.fakes import FakeModelProcess

    _, client_tls = self_signed_tls(tmp_path)
    cert, key = str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")
    args = ("--tls-cert", cert, "--tls-key", key)
    async with FakeModelProcess("gemini-live", "echo", *args) as fake:
        assert fake.url.startswith("wss://127.0.0.1:")
        base = "https://" + fake.url.removeprefix("wss://").split("/", 1)[0]
        options = types.HttpOptions(base_url=base, async_client_args={"ssl": client_tls})
        client = genai.Client(api_key="test-key", http_options=options)
        config = types.LiveConnectConfig(response_modalities=[types.Modality.AUDIO])
        async with client.aio.live.connect(model="gemini-3.8-live", config=config) as session:
            for chunk in turn_chunks(16000):
                await session.send_realtime_input(
                    audio=types.Blob(data=chunk, mime_type="audio/pcm;rate=16000")
                )
            audio, finished, _ = await _genai_turn(session)
    assert finished and audio > 0


def test_serve_model_tls_needs_both_files_and_a_protocol_that_serves_it(
    tmp_path: Path, capsys
) -> None:
    from duplexsim.cli import main

    self_signed_tls(tmp_path)
    cert = str(tmp_path / "cert.pem")
    assert main(["serve-model", "--protocol", "gemini-live", "--tls-cert", cert]) == 2
    assert "go together" in capsys.readouterr().err
    args = ["--tls-cert", cert, "--tls-key", str(tmp_path / "key.pem"), "--port", "0"]
    assert main(["serve-model", "--protocol", "pcm-ws", *args]) == 2
    assert "does not serve TLS" in capsys.readouterr().err
    assert main(["serve-model", "--tls-cert", cert, "--tls-key", cert]) == 2  # not a key
    assert "cannot load" in capsys.readouterr().err
