"""The Nova Sonic client protocol without I/O: events to send, response bytes in, events out.

The opening: sessionStart (inference settings, and turn detection for Nova 2 Sonic),
promptStart (the reply's audio format and voice), the system prompt as a SYSTEM text content,
then one interactive USER audio content that stays open for the whole session: every frame is an
audioInput in it. The server's own VAD takes turns. A reply is an ASSISTANT AUDIO content whose
contentEnd says END_TURN (end of turn) or INTERRUPTED; a barge-in also comes as the textOutput
``{ "interrupted" : true }``. The USER text (the server's transcript of the user's turn) marks
where its VAD ended the turn. Arrival times are those the caller gives.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from numpy.typing import NDArray

from duplexsim.clients.base import (
    AudioOut,
    ClientEvent,
    EndOfTurn,
    ErrorEvent,
    SpeechStarted,
    SpeechStopped,
    Transcript,
    UsageReport,
)
from duplexsim.clients.nova_sonic import events as wire
from duplexsim.clients.nova_sonic.eventstream import MessageReader
from duplexsim.clients.transport.httperrors import refusal, retry_after
from duplexsim.core import safejson
from duplexsim.core.audio import float_to_pcm16, pcm16_to_float
from duplexsim.core.errors import (
    ProtocolError,
    RateLimited,
    RemoteError,
    SessionError,
)
from duplexsim.core.intake import CONTENT_BLOCKS, CONTENT_ID_CHARS
from duplexsim.core.redact import redact

__all__ = ["ClientProtocol", "SonicSettings", "http_error", "stream_error"]

SYSTEM, AUDIO = "system", "audio"  # our content names


@dataclass(frozen=True)
class SonicSettings:
    voice: str = "matthew"
    system_prompt: str | None = None
    endpointing: str | None = None  # Nova 2 Sonic: HIGH | MEDIUM | LOW
    max_tokens: int = 1024
    top_p: float = 0.9
    temperature: float = 0.7
    input_rate: int = 16000
    output_rate: int = 24000


def _audio_config(rate: int) -> dict[str, Any]:
    return {"mediaType": "audio/lpcm", "sampleRateHertz": rate, "sampleSizeBits": 16,
            "channelCount": 1, "audioType": "SPEECH", "encoding": "base64"}  # fmt: skip


class ClientProtocol:
    def __init__(self, settings: SonicSettings, prompt_name: str, secret: str | None = None):
        """``secret``: blanked out of every server text that goes into an error (more can be
        added to ``secrets`` once known: the access key id and session token)."""
        self.settings = settings
        self.prompt = prompt_name
        self.secrets: list[str] = [secret] if secret else []
        self._reader = MessageReader()
        self._final: dict[str, bool] = {}  # content id -> its text is FINAL (not SPECULATIVE)

    def opening(self) -> list[bytes]:
        s = self.settings
        session: dict[str, Any] = {
            "inferenceConfiguration": {
                "maxTokens": s.max_tokens, "topP": s.top_p, "temperature": s.temperature,
            },
        }  # fmt: skip
        if s.endpointing is not None:
            session["turnDetectionConfiguration"] = {"endpointingSensitivity": s.endpointing}
        output = {**_audio_config(s.output_rate), "voiceId": s.voice}
        events = [
            wire.event("sessionStart", session),
            wire.event("promptStart", {
                "promptName": self.prompt,
                "textOutputConfiguration": {"mediaType": "text/plain"},
                "audioOutputConfiguration": output,
            }),
        ]  # fmt: skip
        if s.system_prompt is not None:
            events += self._text_content(SYSTEM, "SYSTEM", s.system_prompt)
        events.append(wire.event("contentStart", {
            "promptName": self.prompt, "contentName": AUDIO, "type": "AUDIO", "interactive": True,
            "role": "USER", "audioInputConfiguration": _audio_config(s.input_rate),
        }))  # fmt: skip
        return [wire.chunk(e) for e in events]

    def _text_content(self, name: str, role: str, text: str) -> list[dict[str, Any]]:
        ids = {"promptName": self.prompt, "contentName": name}
        return [
            wire.event("contentStart", {**ids, "type": "TEXT", "interactive": False, "role": role,
                                        "textInputConfiguration": {"mediaType": "text/plain"}}),
            wire.event("textInput", {**ids, "content": text}),
            wire.event("contentEnd", ids),
        ]  # fmt: skip

    def audio_chunk(self, samples: NDArray[Any]) -> bytes:
        """The audioInput chunk of one frame (no state: can be made ahead of time)."""
        content = base64.b64encode(float_to_pcm16(samples)).decode()
        # built as text: it goes out every frame, and its fields are fixed
        raw = (
            '{"event":{"audioInput":{"promptName":' + json.dumps(self.prompt)
            + ',"contentName":"' + AUDIO + '","content":"' + content + '"}}}'
        )  # fmt: skip
        return wire.chunk_raw(raw.encode())

    def closing(self) -> list[bytes]:
        ids = {"promptName": self.prompt}
        return [
            wire.chunk(wire.event("contentEnd", {**ids, "contentName": AUDIO})),
            wire.chunk(wire.event("promptEnd", ids)),
            wire.chunk(wire.event("sessionEnd", {})),
        ]

    @property
    def pending_bytes(self) -> int:
        return self._reader.pending

    def receive(self, data: bytes, arrival: float) -> list[ClientEvent]:
        events: list[ClientEvent] = []
        for msg in self._reader.feed(data):
            events += self._event(wire.decode_server(msg), arrival)
        return events

    def _event(self, ev: wire.ServerEvent, arrival: float) -> list[ClientEvent]:
        match ev:
            case wire.AudioOutput(pcm=pcm):
                return [AudioOut(pcm16_to_float(pcm), arrival)]
            case wire.ContentStart():
                self._open(ev)
            case wire.TextOutput(content=text) if _interrupted(text):
                return [SpeechStarted(arrival)]  # the user talked over the reply
            case wire.TextOutput(content_id=cid, role="USER"):
                return [SpeechStopped(arrival)]  # its VAD ended the user's turn: a transcript
            case wire.TextOutput(content_id=cid, content=text) if self._final.get(cid, False):
                return [Transcript(text, arrival, True)]
            case wire.ContentEnd(type="AUDIO", stop_reason="END_TURN"):
                return [EndOfTurn(arrival)]
            case wire.UsageEvent(usage=usage):
                return [UsageReport(usage, arrival, cumulative=True, source="usageEvent")]
            case wire.StreamException(kind=kind, message=message):
                return [ErrorEvent(stream_error(kind, self.redact(message)), arrival, fatal=True)]
        return []

    def _open(self, start: wire.ContentStart) -> None:
        """A content block is kept (whether its text is final) for its text to come: so many
        blocks, of such ids, at most, whatever a server sends."""
        cid = start.content_id
        if len(cid) > CONTENT_ID_CHARS:
            raise ProtocolError(f"contentStart with a contentId of {len(cid)} characters")
        if cid not in self._final and len(self._final) >= CONTENT_BLOCKS:
            raise ProtocolError(f"server opened more than {CONTENT_BLOCKS} content blocks: a flood")
        self._final[cid] = start.stage == "FINAL"

    def redact(self, text: str) -> str:
        return redact(text, self.secrets)


def _interrupted(text: str) -> bool:
    try:
        obj = safejson.loads(text)
    except safejson.JsonError:
        return False
    return isinstance(obj, dict) and obj.get("interrupted") is True


_RETRYABLE = {"internalServerException", "serviceUnavailableException",
              "modelStreamErrorException", "modelTimeoutException", "modelNotReadyException"}  # fmt: skip


def stream_error(kind: str, message: str) -> SessionError:
    """An exception message in the response stream as an error."""
    name = kind[:1].lower() + kind[1:]  # members are lowerCamel, error codes UpperCamel
    text = f"Bedrock {kind or 'error'}: {message}"
    if name in ("throttlingException", "serviceQuotaExceededException"):
        return RateLimited(text)
    if name in ("accessDeniedException", "unrecognizedClientException"):
        return RemoteError(f"{text} (check the AWS credentials)", retryable=False, reason="auth")
    if name == "validationException":
        return ProtocolError(text)
    return RemoteError(text, retryable=name in _RETRYABLE)


def http_error(status: int, headers: Mapping[str, str], body: bytes) -> SessionError:
    """The error for a refused request (before any event): the shared mapping of statuses, with
    Bedrock's error name (x-amzn-ErrorType) and message quoted; a throttle is one whatever
    status carried it. SigV4 puts no secret in a response, so the body may be quoted."""
    kind = headers.get("x-amzn-errortype", "").split(":")[0]
    said = body[:300].decode("utf-8", "replace")
    detail = (f" {kind}" if kind else "") + (f": {said}" if said else "")
    if kind in ("ThrottlingException", "ServiceQuotaExceededException"):
        text = f"server refused the Bedrock stream: HTTP {status}{detail}"
        return RateLimited(text, retry_after_s=retry_after(headers.get("retry-after")))
    return refusal(
        status,
        headers,
        what="the Bedrock stream",
        body=said,
        detail=detail,
        credential="the AWS credentials",
    )
