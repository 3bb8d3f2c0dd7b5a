"""Wire messages of the Gemini Live API (BidiGenerateContent): JSON objects over one WebSocket.

Client to server: text frames, each one JSON object with exactly one of ``setup``,
``realtimeInput``, ``clientContent`` or ``toolResponse`` (ai.google.dev/api/live). ``setup`` comes
first; audio goes as ``realtimeInput.audio`` = base64 PCM16 LE mono with mimeType
``audio/pcm;rate=16000``.

Server to client: binary frames of UTF-8 JSON (python-genai live.py reads ``recv(decode=False)``);
text frames are accepted too. One message may carry several things (audio parts, transcriptions and
turn flags together on 3.x models), so ``decode_server`` returns a list of parts in the order a
client should act on them: content before the flags that close it.

Parsing is strict about what duplexsim uses (wrong JSON types, bad base64, odd-length PCM are a
ProtocolError naming the problem) and ignores fields and top-level keys it does not know, because
the API adds them often (sessionResumptionUpdate, voiceActivity, ...). ``usageMetadata`` (what
a turn used, python-genai's ``UsageMetadata``) is read into ``Usage``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from duplexsim.core import safejson
from duplexsim.core.errors import ProtocolError
from duplexsim.core.usage import Usage

__all__ = [
    "ActivityEnd",
    "ActivityStart",
    "ApiError",
    "AudioIn",
    "AudioStreamEnd",
    "ClientContent",
    "ClientMessage",
    "GenerationComplete",
    "GoAway",
    "InputTranscription",
    "Interrupted",
    "ModelAudio",
    "ModelText",
    "OutputTranscription",
    "ServerPart",
    "Setup",
    "SetupComplete",
    "TurnComplete",
    "UsageMetadata",
    "decode_client",
    "decode_server",
    "encode_client",
    "encode_server",
    "mime_rate",
    "usage_of",
]

INPUT_RATE = 16000
OUTPUT_RATE = 24000
T = TypeVar("T")

# --- client messages -----------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    model: str  # "models/<name>"
    voice: str | None = None
    automatic_activity_detection: bool = True
    activity_handling: str | None = None  # START_OF_ACTIVITY_INTERRUPTS | NO_INTERRUPTION
    start_sensitivity: str | None = None  # START_SENSITIVITY_HIGH | START_SENSITIVITY_LOW
    end_sensitivity: str | None = None  # END_SENSITIVITY_HIGH | END_SENSITIVITY_LOW
    prefix_padding_ms: int | None = None
    silence_duration_ms: int | None = None
    output_transcription: bool = True
    system_instruction: str | None = None
    language_code: str | None = None


@dataclass(frozen=True)
class AudioIn:
    pcm: bytes  # PCM16 little-endian mono
    rate: int = INPUT_RATE


@dataclass(frozen=True)
class ActivityStart:
    pass


@dataclass(frozen=True)
class ActivityEnd:
    pass


@dataclass(frozen=True)
class AudioStreamEnd:
    pass


@dataclass(frozen=True)
class ClientContent:
    turn_complete: bool = False


ClientMessage = Setup | AudioIn | ActivityStart | ActivityEnd | AudioStreamEnd | ClientContent


def encode_client(msg: ClientMessage) -> str:
    body: dict[str, Any]
    match msg:
        case Setup():
            body = {"setup": _setup_body(msg)}
        case AudioIn(pcm=pcm, rate=rate):
            blob = {"data": base64.b64encode(pcm).decode("ascii"), "mimeType": _mime(rate)}
            body = {"realtimeInput": {"audio": blob}}
        case ActivityStart():
            body = {"realtimeInput": {"activityStart": {}}}
        case ActivityEnd():
            body = {"realtimeInput": {"activityEnd": {}}}
        case AudioStreamEnd():
            body = {"realtimeInput": {"audioStreamEnd": True}}
        case ClientContent(turn_complete=done):
            body = {"clientContent": {"turnComplete": done}}
    return json.dumps(body, separators=(",", ":"))


def _setup_body(s: Setup) -> dict[str, Any]:
    speech: dict[str, Any] = {}
    if s.voice:
        speech["voiceConfig"] = {"prebuiltVoiceConfig": {"voiceName": s.voice}}
    if s.language_code:
        speech["languageCode"] = s.language_code
    generation: dict[str, Any] = {"responseModalities": ["AUDIO"]}
    if speech:
        generation["speechConfig"] = speech
    detection: dict[str, Any] = {"disabled": not s.automatic_activity_detection}
    optional = {
        "startOfSpeechSensitivity": s.start_sensitivity,
        "endOfSpeechSensitivity": s.end_sensitivity,
        "prefixPaddingMs": s.prefix_padding_ms,
        "silenceDurationMs": s.silence_duration_ms,
    }
    detection.update({k: v for k, v in optional.items() if v is not None})
    realtime: dict[str, Any] = {"automaticActivityDetection": detection}
    if s.activity_handling:
        realtime["activityHandling"] = s.activity_handling
    body: dict[str, Any] = {
        "model": s.model,
        "generationConfig": generation,
        "realtimeInputConfig": realtime,
    }
    if s.output_transcription:
        body["outputAudioTranscription"] = {}
    if s.system_instruction:
        body["systemInstruction"] = {"parts": [{"text": s.system_instruction}]}
    return body


def decode_client(text: str | bytes) -> ClientMessage:
    """One client frame -> its message, for the fake server; ProtocolError says what is wrong."""
    # proto-JSON accepts a field's lowerCamel name and its proto name, at every depth;
    # python-genai sends ``realtime_input.audio.mime_type`` (live.py)
    obj = _camel_keys(_object(text, "client message"), "client message")
    present = [k for k in obj if k in _CLIENT_KEYS]
    if len(present) != 1:
        want = ", ".join(_CLIENT_KEYS)
        raise ProtocolError(f"a client message needs exactly one of {want}; got {sorted(obj)}")
    key = present[0]
    value = _typed(obj[key], dict, key)
    if key == "setup":
        return _decode_setup(value)
    if key == "realtimeInput":
        return _decode_realtime(value)
    if key == "clientContent":
        return ClientContent(_field(value, "turnComplete", bool, key, False))
    raise ProtocolError(f"'{key}' is not supported here")


_CLIENT_KEYS = ("setup", "realtimeInput", "clientContent", "toolResponse")


def _decode_setup(s: dict[str, Any]) -> Setup:
    model = _field(s, "model", str, "setup", None)
    if model is None:
        raise ProtocolError("setup lacks 'model'")
    generation = _field(s, "generationConfig", dict, "setup", {})
    speech = _field(generation, "speechConfig", dict, "generationConfig", {})
    voice_config = _field(speech, "voiceConfig", dict, "speechConfig", {})
    prebuilt = _field(voice_config, "prebuiltVoiceConfig", dict, "voiceConfig", {})
    realtime = _field(s, "realtimeInputConfig", dict, "setup", {})
    detection = _field(realtime, "automaticActivityDetection", dict, "realtimeInputConfig", {})
    where = "automaticActivityDetection"
    system = _field(s, "systemInstruction", dict, "setup", {})
    parts = _field(system, "parts", list, "systemInstruction", [])
    texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return Setup(
        model=model,
        voice=_field(prebuilt, "voiceName", str, "prebuiltVoiceConfig", None),
        automatic_activity_detection=not _field(detection, "disabled", bool, where, False),
        activity_handling=_field(realtime, "activityHandling", str, "realtimeInputConfig", None),
        start_sensitivity=_field(detection, "startOfSpeechSensitivity", str, where, None),
        end_sensitivity=_field(detection, "endOfSpeechSensitivity", str, where, None),
        prefix_padding_ms=_field(detection, "prefixPaddingMs", int, where, None),
        silence_duration_ms=_field(detection, "silenceDurationMs", int, where, None),
        output_transcription="outputAudioTranscription" in s,
        system_instruction="".join(texts) or None,
        language_code=_field(speech, "languageCode", str, "speechConfig", None),
    )


def _decode_realtime(r: dict[str, Any]) -> ClientMessage:
    kinds = [
        k
        for k in ("audio", "mediaChunks", "activityStart", "activityEnd", "audioStreamEnd")
        if k in r
    ]
    if len(kinds) != 1:
        raise ProtocolError(f"realtimeInput needs exactly one supported field; got {sorted(r)}")
    kind = kinds[0]
    if kind == "activityStart":
        return ActivityStart()
    if kind == "activityEnd":
        return ActivityEnd()
    if kind == "audioStreamEnd":
        return AudioStreamEnd()
    if kind == "mediaChunks":  # the deprecated form, one blob per message here
        chunks = _typed(r[kind], list, kind)
        if len(chunks) != 1:
            raise ProtocolError(f"mediaChunks with {len(chunks)} blobs; send one")
        blob = _typed(chunks[0], dict, kind)
    else:
        blob = _typed(r[kind], dict, kind)
    mime = _field(blob, "mimeType", str, kind, None)
    data = _field(blob, "data", str, kind, None)
    if mime is None or data is None:
        raise ProtocolError(f"{kind} blob needs 'mimeType' and 'data'")
    if not mime.startswith("audio/pcm"):
        raise ProtocolError(f"unsupported audio mimeType '{mime}' (want audio/pcm;rate=...)")
    return AudioIn(_pcm(data, kind), mime_rate(mime, INPUT_RATE))


# --- server messages -----------------------------------------------------------------------


@dataclass(frozen=True)
class SetupComplete:
    session_id: str | None = None


@dataclass(frozen=True)
class ModelAudio:
    pcm: bytes  # PCM16 little-endian mono
    rate: int = OUTPUT_RATE


@dataclass(frozen=True)
class ModelText:
    text: str


@dataclass(frozen=True)
class InputTranscription:
    text: str
    finished: bool = False


@dataclass(frozen=True)
class OutputTranscription:
    text: str
    finished: bool = False


@dataclass(frozen=True)
class Interrupted:
    pass


@dataclass(frozen=True)
class GenerationComplete:
    pass


@dataclass(frozen=True)
class TurnComplete:
    pass


@dataclass(frozen=True)
class GoAway:
    time_left: str | None = None  # a proto Duration, e.g. "5s"


@dataclass(frozen=True)
class ApiError:
    """A top-level ``error`` object; python-genai treats such a message as an API error."""

    code: int | None
    message: str
    status: str = ""


@dataclass(frozen=True)
class UsageMetadata:
    """What a turn used. On the wire: ``promptTokenCount``, ``responseTokenCount`` ... and the
    counts by modality (``promptTokensDetails``, ``cacheTokensDetails``,
    ``responseTokensDetails``: ``[{modality, tokenCount}]``), all of which ``body`` keeps."""

    body: dict[str, Any]

    @property
    def usage(self) -> Usage:
        return usage_of(self.body)


ServerPart = (
    SetupComplete
    | ModelAudio
    | ModelText
    | InputTranscription
    | OutputTranscription
    | Interrupted
    | GenerationComplete
    | TurnComplete
    | GoAway
    | ApiError
    | UsageMetadata
)


def encode_server(parts: Sequence[ServerPart]) -> bytes:
    """One server message carrying ``parts``, as the binary frame's UTF-8 JSON."""
    body: dict[str, Any] = {}
    content: dict[str, Any] = {}
    model_parts: list[dict[str, Any]] = []
    for p in parts:
        match p:
            case SetupComplete(session_id=sid):
                body["setupComplete"] = {} if sid is None else {"sessionId": sid}
            case ModelAudio(pcm=pcm, rate=rate):
                data = base64.b64encode(pcm).decode("ascii")
                model_parts.append({"inlineData": {"mimeType": _mime(rate), "data": data}})
            case ModelText(text=text):
                model_parts.append({"text": text})
            case InputTranscription(text=text, finished=done):
                content["inputTranscription"] = {
                    "text": text,
                    **({"finished": True} if done else {}),
                }
            case OutputTranscription(text=text, finished=done):
                content["outputTranscription"] = {
                    "text": text,
                    **({"finished": True} if done else {}),
                }
            case Interrupted():
                content["interrupted"] = True
            case GenerationComplete():
                content["generationComplete"] = True
            case TurnComplete():
                content["turnComplete"] = True
            case GoAway(time_left=left):
                body["goAway"] = {} if left is None else {"timeLeft": left}
            case ApiError(code=code, message=message, status=status):
                body["error"] = {"code": code, "message": message, "status": status}
            case UsageMetadata(body=usage):
                body["usageMetadata"] = usage
    if model_parts:
        content["modelTurn"] = {"parts": model_parts}
    if content:
        body["serverContent"] = content
    return json.dumps(body, separators=(",", ":")).encode()


def decode_server(data: str | bytes) -> list[ServerPart]:
    """One server frame -> its parts, content first; ProtocolError says what is wrong."""
    obj = _object(data, "server message")
    parts: list[ServerPart] = []
    if "setupComplete" in obj:
        done = _typed(obj["setupComplete"], dict, "setupComplete")
        parts.append(SetupComplete(_field(done, "sessionId", str, "setupComplete", None)))
    if "serverContent" in obj:
        parts += _decode_content(_typed(obj["serverContent"], dict, "serverContent"))
    if "usageMetadata" in obj:  # after the content it accounts for
        usage = _camel_keys(_typed(obj["usageMetadata"], dict, "usageMetadata"), "usageMetadata")
        usage_of(usage)  # checked now: a malformed report fails where it arrived
        parts.append(UsageMetadata(usage))
    if "goAway" in obj:
        away = _typed(obj["goAway"], dict, "goAway")
        parts.append(GoAway(_field(away, "timeLeft", str, "goAway", None)))
    if "error" in obj:
        err = _typed(obj["error"], dict, "error")
        code = err.get("code")
        parts.append(
            ApiError(
                code if isinstance(code, int) and not isinstance(code, bool) else None,
                str(err.get("message", "")),
                str(err.get("status", "")),
            )
        )
    return parts


def _decode_content(c: dict[str, Any]) -> list[ServerPart]:
    parts: list[ServerPart] = []
    turn = _field(c, "modelTurn", dict, "serverContent", {})
    for i, part in enumerate(_field(turn, "parts", list, "modelTurn", [])):
        where = f"modelTurn.parts[{i}]"
        p = _typed(part, dict, where)
        if "inlineData" in p:
            blob = _typed(p["inlineData"], dict, f"{where}.inlineData")
            mime = _field(blob, "mimeType", str, f"{where}.inlineData", "")
            if mime.startswith("audio/pcm"):
                data = _field(blob, "data", str, f"{where}.inlineData", "")
                parts.append(ModelAudio(_pcm(data, where), mime_rate(mime, OUTPUT_RATE)))
        elif isinstance(p.get("text"), str) and not p.get("thought"):
            parts.append(ModelText(p["text"]))
    for key, cls in (
        ("inputTranscription", InputTranscription),
        ("outputTranscription", OutputTranscription),
    ):
        if key in c:
            t = _typed(c[key], dict, key)
            parts.append(
                cls(_field(t, "text", str, key, ""), _field(t, "finished", bool, key, False))
            )
    for key, flag in (
        ("interrupted", Interrupted()),
        ("generationComplete", GenerationComplete()),
        ("turnComplete", TurnComplete()),
    ):
        if _field(c, key, bool, "serverContent", False):
            parts.append(flag)
    return parts


def usage_of(body: dict[str, Any]) -> Usage:
    """``usageMetadata`` as ``Usage``: the counts by modality; prompt tokens no modality covers
    count as text (an unspecified modality "is treated as TEXT", python-genai's MediaModality),
    thinking tokens as output text (they are billed as output); a report without any breakdown
    counts as audio, what a speech session sends and receives."""
    where = "usageMetadata"
    by: dict[str, dict[str, int]] = {}
    for key in ("promptTokensDetails", "cacheTokensDetails", "responseTokensDetails"):
        counts: dict[str, int] = {}
        for i, item in enumerate(_field(body, key, list, where, [])):
            entry = _typed(item, dict, f"{where}.{key}[{i}]")
            modality = _field(entry, "modality", str, f"{where}.{key}[{i}]", "TEXT").upper()
            modality = "TEXT" if modality == "MODALITY_UNSPECIFIED" else modality
            n = _field(entry, "tokenCount", int, f"{where}.{key}[{i}]", 0)
            counts[modality] = counts.get(modality, 0) + n
        by[key] = counts
    prompt = _field(body, "promptTokenCount", int, where, None)
    response = _field(body, "responseTokenCount", int, where, None)
    thoughts = _field(body, "thoughtsTokenCount", int, where, 0)
    inputs = by["promptTokensDetails"]
    cached = by["cacheTokensDetails"]
    outputs = by["responseTokensDetails"]
    if not inputs and prompt is not None:
        inputs = {"AUDIO": prompt}
    elif prompt is not None and prompt > sum(inputs.values()):
        inputs["TEXT"] = inputs.get("TEXT", 0) + prompt - sum(inputs.values())
    if not outputs and response is not None:
        outputs = {"AUDIO": response}
    if thoughts:
        outputs["TEXT"] = outputs.get("TEXT", 0) + thoughts
    return Usage(
        input_audio_tokens=inputs.get("AUDIO"),
        input_text_tokens=inputs.get("TEXT"),
        cached_audio_tokens=cached.get("AUDIO"),
        cached_text_tokens=cached.get("TEXT"),
        output_audio_tokens=outputs.get("AUDIO"),
        output_text_tokens=outputs.get("TEXT"),
    )


# --- helpers -------------------------------------------------------------------------------


def mime_rate(mime: str, default: int) -> int:
    """The ``rate`` parameter of an ``audio/pcm;rate=N`` MIME type; ``default`` when absent."""
    for param in mime.split(";")[1:]:
        name, _, value = param.strip().partition("=")
        if name.strip().lower() == "rate":
            try:
                rate = int(value.strip())
            except ValueError:
                rate = 0
            if not 1000 <= rate <= 192000:
                raise ProtocolError(f"bad rate in mimeType '{mime}'")
            return rate
    return default


def _mime(rate: int) -> str:
    return f"audio/pcm;rate={rate}"


def _pcm(data: str, where: str) -> bytes:
    try:
        # proto-JSON bytes: standard base64; the URL-safe alphabet is accepted as well
        pcm = base64.b64decode(data.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError(f"{where}: audio data is not valid base64") from None
    if len(pcm) % 2:
        raise ProtocolError(f"{where}: {len(pcm)} bytes of audio; PCM16 needs an even length")
    return pcm


def _object(data: str | bytes, what: str) -> dict[str, Any]:
    try:
        text = data.decode() if isinstance(data, bytes) else data
        obj = safejson.loads(text)
    except UnicodeDecodeError:
        raise ProtocolError(f"{what} is not UTF-8") from None
    except safejson.JsonError as exc:
        raise ProtocolError(f"{what} is not valid JSON ({exc}): {data[:60]!r}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"{what} is JSON {type(obj).__name__}, not an object")
    return obj


def _camel_keys(value: Any, where: str) -> Any:
    """``value`` with every object key in lowerCamel spelling (``mime_type`` -> ``mimeType``);
    both spellings of one field in one object is an error, as in proto-JSON. Free-form
    contents (function arguments, schemas) are renamed too: this fake reads none of them."""
    if isinstance(value, list):
        return [_camel_keys(v, where) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, v in value.items():
        head, *rest = key.split("_")
        name = head + "".join(w[:1].upper() + w[1:] for w in rest)
        if name in out:
            raise ProtocolError(f"{where}: field '{name}' is given twice ('{key}')")
        out[name] = _camel_keys(v, f"{where}.{name}")
    return out


def _typed(value: Any, want: type[T], where: str) -> T:
    # bool is an int in Python, but not on this wire
    if not isinstance(value, want) or (want is int and isinstance(value, bool)):
        raise ProtocolError(f"'{where}' must be {_name(want)}, got {_name(type(value))}")
    return value


def _field(obj: dict[str, Any], key: str, want: type[T], where: str, default: Any) -> Any:
    """``obj[key]`` checked against ``want``; ``default`` when absent or null."""
    value = obj.get(key)
    if value is None:
        return default
    return _typed(value, want, f"{where}.{key}")


def _name(cls: type) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        cls, cls.__name__
    )
