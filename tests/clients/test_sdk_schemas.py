"""Every message our clients send and our fakes send, checked against the official SDKs' own types.

Client messages must parse as the SDK's client events (openai's ``RealtimeClientEvent``,
google-genai's ``LiveClientMessage``); fake messages as its server events (``RealtimeServerEvent``,
``LiveServerMessage``). Messages are gathered from whole sessions run sans-I/O (our client
protocol talking to our fake's protocol), in every mode the clients use. A field the SDK's type
does not know is a failure too: when an SDK release changes a schema we rely on, the failure names
the message and the field.
Needs the test dependencies ``openai`` and ``google-genai`` (the ``dev`` extra).
"""

from __future__ import annotations

import base64
import json
import typing
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.fakekit.serveractions import Action, Send, expand
from duplexsim.core.audio import float_to_pcm16
from tests.helpers.signals import voiced_signal

openai_types = pytest.importorskip("openai.types.realtime")
genai_types = pytest.importorskip("google.genai.types")
pydantic = pytest.importorskip("pydantic")


def sends(actions: list[Action]) -> list[str | bytes]:
    return [a.message for a in expand(actions) if isinstance(a, Send)]


def turn(rate: int, speech_s: float = 2.0, quiet_s: float = 1.2) -> Iterator[np.ndarray]:
    speech = voiced_signal(speech_s, rate) if speech_s else np.zeros(0, np.float32)
    x = np.concatenate([speech, np.zeros(round(quiet_s * rate))])
    step = rate // 50
    for i in range(0, x.size, step):
        yield x[i : i + step].astype(np.float32)


# --- openai realtime -------------------------------------------------------------------------


def unknown_fields(model: Any, path: str = "") -> Iterator[str]:
    """Fields a parsed openai model kept as extras (its types allow unknown fields silently)."""
    if isinstance(model, pydantic.BaseModel):
        for name in model.model_extra or {}:
            yield f"{path}.{name}".lstrip(".")
        for name in type(model).model_fields:
            yield from unknown_fields(getattr(model, name), f"{path}.{name}")
    elif isinstance(model, list):
        for i, item in enumerate(model):
            yield from unknown_fields(item, f"{path}[{i}]")


# Fields the real service sends that the SDK's types do not declare (kept as extras by the SDK,
# so its clients read them): the live session object carries its id and object name (captured
# in the wild; see docs/protocols.md).
OPENAI_EXTRAS = {
    "session.created": {"session.id", "session.object"},
    "session.updated": {"session.id", "session.object"},
}


def event_classes(union: Any) -> dict[str, Any]:
    """The SDK's event class for each ``type`` in one of its event unions."""
    members = typing.get_args(typing.get_args(union)[0]) or typing.get_args(union)
    return {typing.get_args(m.model_fields["type"].annotation)[0]: m for m in members}


def check_openai(messages: list[str | bytes], union: Any) -> set[str]:
    """Each message validated as the SDK's class for its type; returns the event types seen."""
    classes = event_classes(union)
    seen: set[str] = set()
    for message in messages:
        body = json.loads(message)
        kind = body.get("type")
        assert kind in classes, f"{kind}: not an event type of the SDK's {union}"
        try:
            event = classes[kind].model_validate(body)
        except pydantic.ValidationError as exc:
            raise AssertionError(f"{kind}: the SDK's type refuses it: {exc}") from None
        extra = [f for f in unknown_fields(event) if f not in OPENAI_EXTRAS.get(kind, ())]
        assert not extra, f"{kind}: field(s) unknown to the SDK's {type(event).__name__}: {extra}"
        seen.add(kind)
    return seen


def openai_session(opts: dict[str, Any], *, cancel: bool = False) -> tuple[list[str], list[str]]:
    """(client messages, fake messages) of one session of our client with our fake."""
    from duplexsim.clients.openai_realtime.config import RealtimeOptions
    from duplexsim.clients.openai_realtime.fake import ServerProtocol
    from duplexsim.clients.openai_realtime.protocol import ClientProtocol

    client = ClientProtocol(RealtimeOptions.from_options(opts, opts.pop("voice", None)))
    server = ServerProtocol(behaviour_factory("echo"))
    sent: list[str] = []
    got: list[str] = [str(m) for m in sends(server.opening())]

    def deliver(message: str) -> None:
        sent.append(message)
        got.extend(str(m) for m in sends(server.receive(message, None)))

    for message in list(got):
        for reply in client.receive_handshake(message):
            deliver(reply)
    while not client.ready:  # session.updated came back from the update just sent
        for reply in client.receive_handshake(got[-1]):
            deliver(reply)
    for i, chunk in enumerate(turn(24000)):
        deliver(client.audio_message(chunk))
        if cancel and i == 140:  # the reply is under way: cancel it, truncate what was heard
            deliver(json.dumps({"type": "response.cancel"}))
            deliver(
                json.dumps(
                    {
                        "type": "conversation.item.truncate",
                        "item_id": "item_resp_1",
                        "content_index": 0,
                        "audio_end_ms": 100,
                    }
                )
            )
    for message in client.commit_messages():
        deliver(message)
    for chunk in turn(24000, 0.0, 3.0):  # silence while the reply finishes
        deliver(client.audio_message(chunk))
    deliver(json.dumps({"type": "input_audio_buffer.commit"}))  # too little audio: an error
    deliver(json.dumps({"type": "no.such.event"}))  # an error naming the event
    return sent, got


@pytest.mark.parametrize(
    "opts",
    [
        {},
        {"turn_detection": "none"},
        {"turn_detection": "semantic_vad", "voice": "marin", "instructions": "Be brief."},
    ],
    ids=["server-vad", "manual-turns", "semantic-vad"],
)
def test_openai_client_and_fake_messages_parse_as_the_sdks_events(opts: dict[str, Any]) -> None:
    from openai.types.realtime import RealtimeClientEvent, RealtimeServerEvent

    sent, got = openai_session(dict(opts))
    ours = sent[: len(sent) - 2]  # the last two are this test's own bad messages
    client_kinds = check_openai(ours, RealtimeClientEvent)
    assert {"session.update", "input_audio_buffer.append"} <= client_kinds
    if opts.get("turn_detection") == "none":
        assert {"input_audio_buffer.commit", "response.create"} <= client_kinds
    server_kinds = check_openai(got, RealtimeServerEvent)
    assert {"session.created", "session.updated", "response.output_audio.delta"} <= server_kinds
    assert {"response.done", "error"} <= server_kinds
    # the usage the fake bills with (checked field by field above) is the real thing's shape
    done = [json.loads(m) for m in got if json.loads(m)["type"] == "response.done"]
    used = [d["response"]["usage"] for d in done if d["response"]["output"]]
    assert used and all(u["output_token_details"]["audio_tokens"] > 0 for u in used)
    assert all(u["input_token_details"]["audio_tokens"] > 0 for u in used)


def test_openai_fake_cancel_and_truncate_messages_parse_as_the_sdks_events() -> None:
    from openai.types.realtime import RealtimeClientEvent, RealtimeServerEvent

    sent, got = openai_session({}, cancel=True)
    check_openai(sent[:-2], RealtimeClientEvent)
    kinds = check_openai(got, RealtimeServerEvent)
    assert "conversation.item.truncated" in kinds
    done = [json.loads(m) for m in got if json.loads(m)["type"] == "response.done"]
    assert done[0]["response"]["status"] == "cancelled"


# --- gemini live -----------------------------------------------------------------------------


def genai_gaps() -> dict[tuple[str, str], Any]:
    """Fields python-genai's live client sends (its live converters put them there) that its own
    message types lack: (message field, field) -> the SDK type their value is checked against."""
    return {("setup", "realtimeInputConfig"): genai_types.RealtimeInputConfig}


def check_genai(messages: list[str | bytes], model: Any) -> set[str]:
    """Each message validated as ``model`` (google-genai forbids unknown fields); returns the
    top-level fields seen."""
    seen: set[str] = set()
    for message in messages:
        body = json.loads(message)
        fields = sorted(body)
        for (outer, name), kind in genai_gaps().items():
            inner = body.get(outer)
            if isinstance(inner, dict) and name in inner:
                _validate(kind, json.dumps(inner.pop(name)), f"{outer}.{name}")
        _validate(model, json.dumps(body), str(fields))
        seen.update(fields)
    return seen


def _validate(model: Any, text: str, what: str) -> None:
    try:
        model.model_validate_json(text)
    except pydantic.ValidationError as exc:
        raise AssertionError(f"{what}: the SDK's {model.__name__} refuses it: {exc}") from None


def gemini_session(options: dict[str, Any]) -> tuple[list[str], list[bytes]]:
    from duplexsim.clients.gemini_live import events as wire
    from duplexsim.clients.gemini_live.fake import ServerProtocol
    from duplexsim.clients.gemini_live.protocol import ClientProtocol, setup_from_options

    client = ClientProtocol(setup_from_options("gemini-3.8-live", "Puck", options))
    server = ServerProtocol(behaviour_factory("echo"))
    sent: list[str] = []
    got: list[bytes] = []

    def deliver(message: str) -> None:
        sent.append(message)
        got.extend(m for m in sends(server.receive(message, None)) if isinstance(m, bytes))

    deliver(client.setup_message())
    client.receive_setup_reply(got[0])
    for chunk in turn(16000):
        for message in client.audio_messages(chunk):
            deliver(message)
    for message in client.commit_messages():
        deliver(message)
    for chunk in turn(16000, 0.0, 3.0):
        for message in client.audio_messages(chunk):
            deliver(message)
    deliver(wire.encode_client(wire.AudioStreamEnd()))
    assert any(isinstance(p, wire.TurnComplete) for m in got for p in wire.decode_server(m))
    return sent, got


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"automatic_activity_detection": False},
        {
            "activity_handling": "NO_INTERRUPTION",
            "start_sensitivity": "START_SENSITIVITY_LOW",
            "end_sensitivity": "END_SENSITIVITY_HIGH",
            "prefix_padding_ms": 100,
            "silence_duration_ms": 400,
            "system_instruction": "Be brief.",
            "language_code": "en-US",
        },
    ],
    ids=["auto-vad", "manual-activity", "every-option"],
)
def test_gemini_client_and_fake_messages_parse_as_the_sdks_messages(
    options: dict[str, Any],
) -> None:
    from google.genai.types import LiveClientMessage, LiveServerMessage

    sent, got = gemini_session(options)
    client_fields = check_genai(sent, LiveClientMessage)
    assert {"setup", "realtimeInput"} <= client_fields
    server_fields = check_genai(got, LiveServerMessage)
    assert {"setupComplete", "serverContent"} <= server_fields


def test_gemini_fake_error_and_go_away_messages_parse_as_the_sdks_messages() -> None:
    from google.genai.types import LiveServerMessage

    from duplexsim.clients.gemini_live import events as wire

    messages = [
        wire.encode_server([wire.GoAway(time_left="5s")]),
        wire.encode_server([wire.Interrupted()]),
        wire.encode_server([wire.InputTranscription("hello", finished=True)]),
        wire.encode_server([wire.OutputTranscription("hi"), wire.ModelAudio(b"\x00\x00")]),
        wire.encode_server([wire.GenerationComplete()]),
        wire.encode_server([wire.SetupComplete(session_id="s1")]),
    ]
    check_genai(messages, LiveServerMessage)


def test_a_schema_change_names_the_message_and_field() -> None:
    """The checks fail loudly, naming what changed (as a field renamed by an SDK release)."""
    from google.genai.types import LiveClientMessage
    from openai.types.realtime import RealtimeClientEvent

    pcm = base64.b64encode(float_to_pcm16(np.zeros(4, np.float32))).decode()
    renamed = json.dumps({"type": "input_audio_buffer.append", "audio": pcm, "audio_b64": pcm})
    with pytest.raises(AssertionError, match=r"input_audio_buffer\.append.*audio_b64"):
        check_openai([renamed], RealtimeClientEvent)
    moved = json.dumps({"realtimeInput": {"audio": {"data": pcm, "mime": "audio/pcm"}}})
    with pytest.raises(AssertionError, match=r"realtimeInput.*mime"):
        check_genai([moved], LiveClientMessage)


def test_openai_webrtc_channel_messages_parse_as_the_sdks_events() -> None:
    """The data channel carries the same events: our WebRTC client's and the fake call's."""
    pytest.importorskip("aiortc")
    from openai.types.realtime import RealtimeClientEvent, RealtimeServerEvent

    from duplexsim.clients.openai_webrtc.fake import SendEvent, ServerProtocol
    from duplexsim.clients.openai_webrtc.protocol import ClientProtocol, WebRTCOptions

    for opts in ({}, {"turn_detection": "none"}):
        client = ClientProtocol(WebRTCOptions.from_options(dict(opts)))
        server = ServerProtocol(behaviour_factory("echo"), rate=24000)
        sent: list[str] = []
        got: list[str] = []

        def deliver(actions: list[Any], got: list[str] = got) -> None:
            got.extend(a.text for a in actions if isinstance(a, SendEvent))

        deliver(server.open())
        for reply in client.receive_handshake(got[0]):
            sent.append(reply)
            deliver(server.receive_text(reply))
        client.receive_handshake(got[-1])
        assert client.ready
        for chunk in turn(24000):
            deliver(server.receive_audio(chunk))
        for message in client.commit_messages():
            sent.append(message)
            deliver(server.receive_text(message))
        for chunk in turn(24000, 0.0, 3.0):
            deliver(server.receive_audio(chunk))
        check_openai(sent, RealtimeClientEvent)
        kinds = check_openai(got, RealtimeServerEvent)
        assert {"output_audio_buffer.started", "output_audio_buffer.stopped"} <= kinds
        assert "response.done" in kinds
