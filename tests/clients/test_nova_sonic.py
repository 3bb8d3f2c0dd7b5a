"""nova-sonic: the event-stream codec and SigV4 checked against botocore's own, the pure protocol
objects, then client and fake over loopback HTTP/2."""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import random
import uuid
from urllib.parse import quote

import numpy as np
import pytest

from duplexsim.clients.base import (
    AudioOut,
    ClientConfig,
    EndOfTurn,
    ErrorEvent,
    SpeechStarted,
    SpeechStopped,
    Transcript,
    UsageReport,
)
from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.fakekit.serveractions import Close, Send
from duplexsim.clients.nova_sonic import events as wire
from duplexsim.clients.nova_sonic.client import NovaSonicClient
from duplexsim.clients.nova_sonic.eventstream import (
    Byte,
    Long,
    MessageReader,
    Short,
    encode_message,
)
from duplexsim.clients.nova_sonic.fake import ServerProtocol
from duplexsim.clients.nova_sonic.protocol import (
    ClientProtocol,
    SonicSettings,
    http_error,
    stream_error,
)
from duplexsim.clients.nova_sonic.server import start_server
from duplexsim.clients.nova_sonic.sigv4 import (
    Credentials,
    EventSigner,
    event_signature,
    sign_request,
)
from duplexsim.core.audio import float_to_pcm16, pcm16_to_float
from duplexsim.core.errors import ConfigError, ProtocolError, RateLimited
from duplexsim.session.engine import run_session
from tests.helpers.sessions import context, settings
from tests.helpers.signals import voiced_signal
from tests.helpers.virtualclock import run_virtual

RATE = 16000
# a timer fires a little after its time (ticking at exactly MediaClock.when() can fall a float
# rounding short of the lapse and move nothing)
TIMER_LATE_S = 0.001
FRAME = 320
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
WHEN = datetime.datetime(2026, 11, 30, 12, 34, 56, 789000, tzinfo=datetime.UTC)
SETTINGS = settings(reply_timeout_s=1.2, stall_timeout_s=1.0, deadline_margin_s=10.0)
HEADERS = {
    "true": True, "false": False, "byte": Byte(-5), "short": Short(300), "int": 70000,
    "long": Long(2**40), "bytes": b"\x00\x01", "string": "héllo", "time": WHEN,
    "uuid": uuid.UUID(int=12345),
}  # fmt: skip


# --- event stream ------------------------------------------------------------------------


def test_messages_round_trip_whatever_the_split() -> None:
    data = encode_message(HEADERS, b"payload") + encode_message({}, b"") * 2
    for cut in range(1, len(data)):
        reader = MessageReader()
        got = reader.feed(data[:cut]) + reader.feed(data[cut:])
        assert [m.payload for m in got] == [b"payload", b"", b""]
        want = {**HEADERS, "time": WHEN.replace(microsecond=789000)}
        assert dict(got[0].headers) == want and reader.pending == 0


def test_botocores_decoder_reads_what_we_encode() -> None:
    eventstream = pytest.importorskip("botocore.eventstream")
    buffer = eventstream.EventStreamBuffer()
    buffer.add_data(encode_message(HEADERS, b'{"a":1}') + wire.chunk(wire.event("x", {"y": 1})))
    first, second = list(buffer)
    assert first.payload == b'{"a":1}'
    theirs = first.headers
    assert theirs["int"] == 70000 and theirs["long"] == 2**40 and theirs["byte"] == -5
    assert theirs["string"] == "héllo" and theirs["bytes"] == b"\x00\x01"
    assert theirs["true"] is True and theirs["false"] is False
    assert theirs["uuid"] == uuid.UUID(int=12345).bytes
    assert theirs["time"] == int(WHEN.timestamp() * 1000)
    assert second.headers[":event-type"] == "chunk"
    inner = json.loads(base64.b64decode(json.loads(second.payload)["bytes"]))
    assert inner == {"event": {"x": {"y": 1}}}


@pytest.mark.parametrize("flip", [2, 9, 14, 20, -1])
def test_corrupt_messages_are_protocol_errors(flip: int) -> None:
    data = bytearray(encode_message({"k": "v"}, b"payload"))
    data[flip] ^= 0x40
    reader = MessageReader()
    with pytest.raises(ProtocolError):
        reader.feed(bytes(data))
    with pytest.raises(ProtocolError, match="already failed"):
        reader.feed(b"")


def test_any_bytes_raise_nothing_but_protocol_errors() -> None:
    """Mutated messages with their checksums made right again reach the header parser."""
    import struct
    import zlib

    rng = random.Random(5)
    good = encode_message(HEADERS, b"p")
    for _ in range(4000):
        data = bytearray(good)
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(12, len(data) - 4)] = rng.randrange(256)
        data[-4:] = struct.pack(">I", zlib.crc32(data[:-4]))
        with contextlib.suppress(ProtocolError):
            MessageReader().feed(bytes(data[: rng.randrange(len(data) + 1)]))


# --- signing ----------------------------------------------------------------------------


def test_request_signature_is_botocores() -> None:
    pytest.importorskip("botocore")
    from unittest import mock

    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCredentials

    host = "bedrock-runtime.us-east-1.amazonaws.com"
    path = f"/model/{quote('amazon.nova-2-sonic-v1:0', safe='')}/invoke-with-bidirectional-stream"
    content = {"Content-Type": "application/vnd.amazon.eventstream"}
    for token in (None, "session-token"):
        ours, _ = sign_request("POST", host, path, content,
                               Credentials("AKIDEXAMPLE", SECRET, token), "us-east-1", WHEN)  # fmt: skip
        request = AWSRequest(method="POST", url=f"https://{host}{path}", headers={
            **content, "X-Amz-Content-SHA256": "STREAMING-AWS4-HMAC-SHA256-EVENTS"})  # fmt: skip
        with mock.patch(
            "botocore.auth.get_current_datetime", return_value=WHEN.replace(tzinfo=None)
        ):
            SigV4Auth(
                BotoCredentials("AKIDEXAMPLE", SECRET, token), "bedrock", "us-east-1"
            ).add_auth(request)
        assert ours["authorization"] == request.headers["Authorization"]


def test_event_signatures_chain_from_the_request() -> None:
    signer = EventSigner(Credentials("AKID", SECRET), "us-east-1", "ab" * 32)
    envelope = MessageReader().feed(signer.wrap(b"event-1", WHEN))[0]
    assert envelope.payload == b"event-1" and envelope.headers[":date"] == WHEN
    sig = envelope.headers[":chunk-signature"]
    assert sig == event_signature(SECRET, "us-east-1", "ab" * 32, {":date": WHEN}, b"event-1",
                                  "20261130T123456Z")  # fmt: skip
    assert signer.prior == sig.hex()
    again = EventSigner(Credentials("AKID", SECRET), "us-east-1", "cd" * 32).wrap(b"event-1", WHEN)
    assert MessageReader().feed(again)[0].headers[":chunk-signature"] != sig  # the chain counts


# --- client protocol --------------------------------------------------------------------


def ready() -> ClientProtocol:
    return ClientProtocol(SonicSettings(system_prompt="Be brief.", endpointing="HIGH"), "p1")


def names(chunks: list[bytes]) -> list[str]:
    return [wire.decode_client_chunk(MessageReader().feed(c)[0])[0] for c in chunks]


def test_opening_and_closing_events_in_the_order_the_api_needs() -> None:
    proto = ready()
    opening = proto.opening()
    assert names(opening) == ["sessionStart", "promptStart", "contentStart", "textInput",
                              "contentEnd", "contentStart"]  # fmt: skip
    session = wire.decode_client_chunk(MessageReader().feed(opening[0])[0])[1]
    assert session["turnDetectionConfiguration"] == {"endpointingSensitivity": "HIGH"}
    audio = wire.decode_client_chunk(MessageReader().feed(opening[-1])[0])[1]
    assert audio["interactive"] and audio["audioInputConfiguration"]["sampleRateHertz"] == 16000
    assert names(proto.closing()) == ["contentEnd", "promptEnd", "sessionEnd"]
    x = voiced_signal(0.02)
    name, body = wire.decode_client_chunk(MessageReader().feed(proto.audio_chunk(x))[0])
    assert name == "audioInput" and body["contentName"] == "audio" and body["promptName"] == "p1"
    assert base64.b64decode(body["content"]) == float_to_pcm16(x)


def out(name: str, **body) -> bytes:
    return wire.chunk(wire.event(name, body))


def test_server_events_become_stamped_events() -> None:
    proto = ready()
    stage = lambda s: '{"generationStage":"' + s + '"}'  # noqa: E731
    pcm = float_to_pcm16(voiced_signal(0.1, 24000))
    frames = [
        out("completionStart", completionId="c"),
        out("contentStart", contentId="u", type="TEXT", role="USER", additionalModelFields=stage("FINAL")),
        out("textOutput", contentId="u", role="USER", content="hi there"),
        out("contentStart", contentId="s", type="TEXT", role="ASSISTANT", additionalModelFields=stage("SPECULATIVE")),
        out("textOutput", contentId="s", role="ASSISTANT", content="Hello!"),
        out("contentStart", contentId="a", type="AUDIO", role="ASSISTANT"),
        out("audioOutput", contentId="a", content=base64.b64encode(pcm).decode()),
        out("contentEnd", contentId="a", type="AUDIO", stopReason="END_TURN"),
        out("contentStart", contentId="f", type="TEXT", role="ASSISTANT", additionalModelFields=stage("FINAL")),
        out("textOutput", contentId="f", role="ASSISTANT", content="Hello!"),
        out("textOutput", contentId="f", role="ASSISTANT", content='{ "interrupted" : true }'),
    ]  # fmt: skip
    events = proto.receive(b"".join(frames), 2.5)
    assert [type(e) for e in events] == [
        SpeechStopped,
        AudioOut,
        EndOfTurn,
        Transcript,
        SpeechStarted,
    ]
    assert all(e.arrival == 2.5 for e in events)
    np.testing.assert_array_equal(events[1].samples, pcm16_to_float(pcm))


def test_exceptions_and_refusals_map_to_errors() -> None:
    (event,) = ready().receive(wire.exception_message("throttlingException", "slow"), 1.0)
    assert isinstance(event, ErrorEvent) and isinstance(event.error, RateLimited)
    assert isinstance(stream_error("validationException", "x"), ProtocolError)
    assert stream_error("modelTimeoutException", "x").retryable
    assert not stream_error("somethingNew", "x").retryable
    auth = http_error(403, {"x-amzn-errortype": "UnrecognizedClientException:"}, b"{}")
    assert (auth.reason, auth.retryable) == ("auth", False)
    limit = http_error(429, {"retry-after": "2"}, b"")
    assert isinstance(limit, RateLimited) and limit.retry_after_s == 2.0
    assert http_error(503, {}, b"").retryable and not http_error(400, {}, b"").retryable


@pytest.mark.parametrize(
    "frame",
    [
        encode_message({":message-type": "event", ":event-type": "chunk"}, b"nope"),
        encode_message({":message-type": "event", ":event-type": "chunk"}, b'{"bytes":"**"}'),
        wire.chunk({"event": {"audioOutput": {"contentId": "a", "content": "AAA"}}}),
        wire.chunk({"event": {"textOutput": {"contentId": 1}}}),
        wire.chunk({"event": {}}),
        encode_message({":message-type": "surprise"}, b""),
    ],
)
def test_malformed_server_messages_are_protocol_errors(frame: bytes) -> None:
    with pytest.raises(ProtocolError):
        ready().receive(frame, 0.0)


def test_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="unknown option"):
        NovaSonicClient(ClientConfig(url="https://h", options={"regoin": "x"}))
    with pytest.raises(ConfigError, match="endpointing"):
        NovaSonicClient(ClientConfig(url="https://h", options={"endpointing": "FAST"}))


# --- fake server protocol -----------------------------------------------------------------


def fake_feed(server: ServerProtocol, chunks: list[bytes], signer: EventSigner) -> list:
    return [a for c in chunks for a in server.receive(signer.wrap(c, WHEN))]


def test_fake_checks_the_event_order_and_the_signature_chain() -> None:
    proto = ready()
    server = ServerProtocol(behaviour_factory("echo"), secret=SECRET, seed_signature="00" * 32)
    signer = EventSigner(Credentials("AKID", SECRET), "us-east-1", "00" * 32)
    assert fake_feed(server, proto.opening(), signer) == []
    forged = EventSigner(Credentials("AKID", "wrong"), "us-east-1", signer.prior)
    acts = fake_feed(server, [proto.audio_chunk(np.zeros(FRAME, np.float32))], forged)
    assert "accessDeniedException" in str(acts[0]) and isinstance(acts[-1], Close)
    server = ServerProtocol(behaviour_factory("echo"))
    acts = fake_feed(server, [proto.audio_chunk(np.zeros(FRAME, np.float32))], signer)
    assert b"validationException" in acts[0].message


def test_fake_reply_starts_exactly_at_the_behaviours_onset() -> None:
    proto = ready()
    server = ServerProtocol(behaviour_factory("delayed-echo", latency_s=0.5, hangover_s=0.25))
    signer = EventSigner(Credentials("AKID", SECRET), "us-east-1", "00" * 32)
    fake_feed(server, proto.opening(), signer)
    x = np.concatenate([context(tail_s=0.2), np.zeros(RATE * 3, np.float32)])
    client = ClientProtocol(SonicSettings(), "p1")
    first = None
    for i in range(0, x.size - FRAME + 1, FRAME):
        acts = fake_feed(server, [proto.audio_chunk(x[i : i + FRAME])], signer)
        data = b"".join(a.message for a in acts if isinstance(a, Send))
        for event in client.receive(data, i / RATE):
            if isinstance(event, AudioOut) and first is None:
                first = i / RATE + np.flatnonzero(event.samples)[0] / 24000
    assert first == pytest.approx(0.2 + 1.0 + 0.5, abs=0.03)


# --- over loopback -------------------------------------------------------------------------


async def _session(
    behaviour: str, secret: str | None, key: str, monkeypatch, faults=None, **params
):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    server = await start_server(
        behaviour_factory(behaviour, **params), secret=secret, faults=faults
    )
    try:
        client = NovaSonicClient(ClientConfig(url=server.url, api_key=key, connect_timeout_s=5.0))
        return await run_session(client, context(tail_s=0.2), SETTINGS)
    finally:
        await server.aclose()


def test_signed_session_recovers_the_latency(monkeypatch) -> None:
    out = run_virtual(  # the latency the protocol gives, however loaded the machine
        _session("delayed-echo", SECRET, SECRET, monkeypatch, latency_s=0.4, hangover_s=0.25)
    )
    assert out.status == "ok", out.error
    assert out.timing.latency_s == pytest.approx(0.4, abs=0.06)
    kinds = [e["kind"] for e in out.events]
    assert "end_of_turn" in kinds and "speech_stopped" in kinds and "transcript" in kinds
    assert SECRET not in json.dumps(out.events) and "AKIDTEST" not in json.dumps(out.events)


async def test_a_wrong_secret_is_an_auth_failure(monkeypatch) -> None:
    out = await _session("echo", SECRET, "not-the-secret", monkeypatch)
    assert (out.status, out.end_reason, out.retryable) == ("failed", "auth", False)
    assert "403" in out.error and "AWS credentials" in out.error
    assert "not-the-secret" not in out.error


async def test_a_hung_server_is_found_by_http2_pings(monkeypatch) -> None:
    out = await _session("silent", None, SECRET, monkeypatch, faults=Faults(stall_after_s=0.3))
    assert (out.status, out.end_reason, out.retryable) == ("failed", "stalled", True), out.error


async def test_the_model_talking_over_the_user_is_recorded_as_a_barge_in(monkeypatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    server = await start_server(behaviour_factory("barge-in", barge_after_s=0.3, hangover_s=0.3))
    try:
        client = NovaSonicClient(
            ClientConfig(url=server.url, api_key=SECRET, connect_timeout_s=5.0)
        )
        x = np.concatenate([context(2.0, tail_s=0.2), np.zeros(RATE, np.float32)])
        out = await run_session(client, x, SETTINGS)
    finally:
        await server.aclose()
    assert out.status == "ok", out.error
    assert out.timing.latency_s < 0  # it talked over the user


def test_fake_talks_on_by_the_wall_clock_when_the_client_stops_sending() -> None:
    proto = ready()
    server = ServerProtocol(behaviour_factory("delayed-echo", latency_s=0.5, hangover_s=0.25))
    signer = EventSigner(Credentials("AKID", SECRET), "us-east-1", "00" * 32)
    for chunk in proto.opening():
        server.receive(signer.wrap(chunk, WHEN), now=0.0)
    # stops before the reply
    x = np.concatenate([context(tail_s=0.2), np.zeros(int(0.3 * RATE), np.float32)])
    for i in range(0, x.size - FRAME + 1, FRAME):
        acts = server.receive(signer.wrap(proto.audio_chunk(x[i : i + FRAME]), WHEN), now=i / RATE)
        assert acts == []
    client = ClientProtocol(SonicSettings(), "p1")
    got: list[type] = []
    while (at := server.wake_at()) is not None and EndOfTurn not in got:
        data = b"".join(a.message for a in server.tick(at + TIMER_LATE_S) if isinstance(a, Send))
        got += [type(e) for e in client.receive(data, at)]
    said = [kind for kind in got if kind is not UsageReport]  # the fake reports usage too
    assert AudioOut in said and said[-2:] == [EndOfTurn, Transcript]


def test_every_credential_is_blanked_out_of_server_text() -> None:
    proto = ready()
    proto.secrets = [SECRET, "AKIDTEST", "session-token-123"]
    quoted = f"canonical: x-amz-security-token:session-token-123 Credential=AKIDTEST {SECRET}"
    (event,) = proto.receive(wire.exception_message("validationException", quoted), 0.0)
    text = event.error.message
    assert "session-token-123" not in text and "AKIDTEST" not in text and SECRET not in text


async def test_a_session_token_is_signed_and_checked(monkeypatch) -> None:
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token-123")
    out = await _session("echo", SECRET, SECRET, monkeypatch, hangover_s=0.3)
    assert out.status == "ok", out.error


def _self_signed(tmp_path):
    """A certificate for localhost and its key, as files."""
    crypto = pytest.importorskip("cryptography")  # noqa: F841 - the modules below are its own
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    alt = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(alt, critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


async def test_the_aws_sdk_talks_to_the_fake(tmp_path) -> None:
    """The official SDK (aws-sdk-bedrock-runtime needs Python 3.12+, so it runs in the
    interpreter DUPLEXSIM_AWS_SDK_PYTHON names) over its own HTTP/2 client and TLS: the fake
    checks its request signature and every event's, and the SDK decodes every reply event."""
    import asyncio
    import os
    import ssl
    from pathlib import Path

    python = os.environ.get("DUPLEXSIM_AWS_SDK_PYTHON")
    if not python:
        pytest.skip("set DUPLEXSIM_AWS_SDK_PYTHON to a Python 3.12+ with aws-sdk-bedrock-runtime")
    cert, key = _self_signed(tmp_path)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    server = await start_server(
        behaviour_factory("echo", hangover_s=0.3), ssl_context=tls, secret="sdk-secret"
    )
    script = Path(__file__).parents[1] / "helpers" / "nova_sdk_client.py"
    try:
        url = server.url.replace("127.0.0.1", "localhost")
        proc = await asyncio.create_subprocess_exec(
            python, str(script), url, str(cert),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        await server.aclose()
    assert proc.returncode == 0, err.decode()[-2000:]
    names = json.loads(out.decode().splitlines()[-1])
    assert names[:2] == ["completionStart", "contentStart"] and "audioOutput" in names
    assert names[-2:] == ["usageEvent", "completionEnd"]


async def test_our_client_speaks_http2_over_tls_with_alpn(tmp_path, monkeypatch) -> None:
    import ssl

    cert, key = _self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the default context trusts it
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    server = await start_server(
        behaviour_factory("delayed-echo", latency_s=0.4, hangover_s=0.25),
        ssl_context=tls,
        secret=SECRET,
    )
    try:
        url = server.url.replace("127.0.0.1", "localhost")
        client = NovaSonicClient(ClientConfig(url=url, api_key=SECRET, connect_timeout_s=5.0))
        out = await run_session(client, context(tail_s=0.2), SETTINGS)
    finally:
        await server.aclose()
    assert out.status == "ok", out.error
    assert out.timing.latency_s == pytest.approx(0.4, abs=0.06)
