"""The AWS SDK for Python (aws-sdk-bedrock-runtime, Python 3.12+) as a client of the nova-sonic
fake: run by tests/test_nova_sonic.py under an interpreter that has the SDK, when one is named.

    python3.12 tests/nova_sdk_client.py URL CA_FILE

Streams 1.4 s of a voiced tone (speech for the fake's VAD) then silence through the SDK's own
event-stream encoder and signer, over its own HTTP/2 client (awscrt), and prints one JSON line:
the output event names it decoded, in order. Depends on nothing of duplexsim's.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import struct
import sys

import awscrt.io as crt_io
from aws_sdk_bedrock_runtime.client import AsyncBedrockRuntimeClient
from aws_sdk_bedrock_runtime.config import AsyncBedrockRuntimeConfig
from aws_sdk_bedrock_runtime.models import (
    BidirectionalInputPayloadPart,
    InvokeModelWithBidirectionalStreamInputChunk,
    InvokeModelWithBidirectionalStreamOperationInput,
)
from smithy_aws_core.identity import AWSCredentialsIdentity
from smithy_aws_core.identity.static import StaticCredentialsResolver
from smithy_http.aio.crt import AWSCRTHTTPClient, AWSCRTHTTPClientConfig

PROMPT, AUDIO = "p", "a"


class TrustingClient(AWSCRTHTTPClient):
    """The SDK's CRT client, trusting the fake's self-signed certificate."""

    def __init__(self, ca_file: str) -> None:
        super().__init__(client_config=AWSCRTHTTPClientConfig(force_http_2=True))
        options = crt_io.TlsContextOptions()
        options.override_default_trust_store_from_path(None, ca_file)
        self._tls_ctx = crt_io.ClientTlsContext(options)


def event(name: str, body: dict) -> InvokeModelWithBidirectionalStreamInputChunk:
    raw = json.dumps({"event": {name: body}}).encode()
    return InvokeModelWithBidirectionalStreamInputChunk(
        value=BidirectionalInputPayloadPart(bytes_=raw)
    )


def frame(n: int) -> bytes:
    """20 ms of 16 kHz PCM16: a buzzy 150 Hz tone with harmonics for 1.4 s, then silence."""
    samples = []
    for k in range(320):
        t = (n * 320 + k) / 16000
        voiced = 0.2 <= t < 1.6
        x = sum(math.sin(2 * math.pi * 150 * h * t) / h for h in range(1, 8)) if voiced else 0.0
        samples.append(int(6000 * x))
    return struct.pack("<320h", *samples)


async def main(url: str, ca_file: str) -> list[str]:
    config = await AsyncBedrockRuntimeConfig.resolve(
        endpoint_uri=url,
        region="us-east-1",
        aws_credentials_identity_resolver=StaticCredentialsResolver(
            AWSCredentialsIdentity(access_key_id="AKIDSDK", secret_access_key="sdk-secret")
        ),
        transport=TrustingClient(ca_file),
    )
    client = AsyncBedrockRuntimeClient(config=config)
    stream = await client.invoke_model_with_bidirectional_stream(
        InvokeModelWithBidirectionalStreamOperationInput(model_id="amazon.nova-2-sonic-v1:0")
    )
    audio_config = {"mediaType": "audio/lpcm", "sampleRateHertz": 16000, "sampleSizeBits": 16,
                    "channelCount": 1, "audioType": "SPEECH", "encoding": "base64"}  # fmt: skip
    for name, body in [
        ("sessionStart", {"inferenceConfiguration": {"maxTokens": 1024}}),
        ("promptStart", {"promptName": PROMPT, "audioOutputConfiguration": {
            **audio_config, "sampleRateHertz": 24000, "voiceId": "matthew"}}),
        ("contentStart", {"promptName": PROMPT, "contentName": AUDIO, "type": "AUDIO",
                          "interactive": True, "role": "USER",
                          "audioInputConfiguration": audio_config}),
    ]:  # fmt: skip
        await stream.input_stream.send(event(name, body))
    names: list[str] = []

    async def receive() -> None:
        _, output = await stream.await_output()
        async for item in output:
            raw = getattr(getattr(item, "value", None), "bytes_", None)
            if raw is None:
                names.append(type(item).__name__)
                continue
            (name,) = json.loads(raw)["event"]
            names.append(name)
            if name == "completionEnd":
                return

    reader = asyncio.create_task(receive())
    for n in range(150):  # 3 s, in real time
        content = base64.b64encode(frame(n)).decode()
        body = {"promptName": PROMPT, "contentName": AUDIO, "content": content}
        await stream.input_stream.send(event("audioInput", body))
        await asyncio.sleep(0.02)
    for name, body in [
        ("contentEnd", {"promptName": PROMPT, "contentName": AUDIO}),
        ("promptEnd", {"promptName": PROMPT}),
        ("sessionEnd", {}),
    ]:
        await stream.input_stream.send(event(name, body))
    await stream.input_stream.close()
    await asyncio.wait_for(reader, 10)
    return names


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
