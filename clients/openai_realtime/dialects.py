"""The OpenAI-family dialects: every way a server speaking Realtime-style events differs from
OpenAI's own, as data. One client (``protocol``), one fake (``fake``) for all of them.

What differs: where the endpoint lives and how the key and the model travel (``path``,
``auth``, ``model_param``, ``query``); the shape of the ``session`` object (``shape``: OpenAI's
GA nesting, xAI's, or the flat shape of the retired beta that Azure Voice Live and DashScope
still speak); the event a server opens with; the event names it sends (GA or beta; the client
reads both); PCM rates (``input_rates``, ``output_rate``); turn-detection types; whether VAD
events carry audio positions; voices; keep-alive pings. Sources are in docs/profiles.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from duplexsim.clients.base import Metering

__all__ = ["DIALECTS", "Dialect", "dialect"]


@dataclass(frozen=True)
class Dialect:
    name: str
    protocol: str  # the registry name that speaks it
    path: str  # where the provider serves it (and the fake too)
    shape: str  # "ga" | "xai" | "flat": how the session object is laid out
    auth: str = "bearer"  # "bearer": Authorization: Bearer <key>; "api-key": api-key: <key>
    model_param: str = "model"  # the query parameter that names the model (or deployment)
    query: tuple[tuple[str, str], ...] = ()  # fixed query parameters (an API version)
    opening: str = "session.created"  # the server's first event
    beta_names: bool = False  # the server sends beta event names (response.audio.delta ...)
    input_rates: tuple[int, ...] = (24000,)  # PCM rates the input may have (first: default)
    output_rate: int | None = None  # fixed output rate; None: the input's
    vad_types: tuple[str, ...] = ("server_vad",)
    vad_positions: bool = True  # speech_started/stopped carry audio_start_ms/audio_end_ms
    voices: tuple[str, ...] = ()  # what the fake accepts (first: its default); () any
    pings: bool = False  # the server sends ``ping`` events
    modalities: tuple[str, ...] = ("audio",)  # what a flat session asks for
    formats: tuple[str, str] = ("pcm16", "pcm16")  # a flat session's input/output format names
    # other names the server takes for the same formats (the fake accepts them too)
    format_aliases: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    rate_field: str | None = None  # a flat session's input-rate field, where it has one
    # usage on every response.done; token rates where the provider publishes them
    metering: Metering = field(default_factory=lambda: Metering("per-response"))

    def auth_headers(self, key: str) -> dict[str, str]:
        if self.auth == "api-key":
            return {"api-key": key}
        return {"Authorization": f"Bearer {key}"}

    def key_from(self, headers: Any) -> str | None:
        """The key a request carries the way this dialect sends it (the fake checks it)."""
        if self.auth == "api-key":
            token = str(headers.get("api-key") or "")
        else:
            scheme, _, token = str(headers.get("Authorization", "")).partition(" ")
            if scheme.lower() != "bearer":
                return None
        return token.strip() or None

    def out_rate(self, input_rate: int) -> int:
        return self.output_rate or input_rate


# OpenAI's realtime costs guide: input audio 1 token per 100 ms, output 1 per 50 ms; with server
# VAD the silence streamed between turns is not billed
_OPENAI_METERING = Metering("per-response", 10.0, "context", 20.0)

_OPENAI_VOICES = (
    "marin", "cedar", "alloy", "ash", "ballad", "coral", "echo", "sage", "shimmer", "verse",
)  # fmt: skip

OPENAI = Dialect(
    name="openai",
    protocol="openai-realtime",
    path="/v1/realtime",
    shape="ga",
    vad_types=("server_vad", "semantic_vad"),
    voices=_OPENAI_VOICES,
    metering=_OPENAI_METERING,
)
XAI = Dialect(
    name="xai",
    protocol="xai-realtime",
    path="/v1/realtime",
    shape="xai",
    opening="conversation.created",
    input_rates=(24000, 8000, 16000, 21050, 32000, 44100, 48000),
    vad_positions=False,
    voices=("eve", "ara", "rex", "sal", "leo"),
    pings=True,
)
# Azure OpenAI's GA endpoint (/openai/v1/realtime): OpenAI's events, the deployment as model
AZURE = Dialect(
    name="azure",
    protocol="azure-realtime",
    path="/openai/v1/realtime",
    shape="ga",
    auth="api-key",
    vad_types=("server_vad", "semantic_vad"),
    voices=_OPENAI_VOICES,
    metering=_OPENAI_METERING,
)
# Azure OpenAI's preview endpoint (/openai/realtime?api-version=...-preview&deployment=...): the
# Realtime beta as Azure still serves it to preview API versions
AZURE_PREVIEW = Dialect(
    name="azure-preview",
    protocol="azure-realtime-preview",
    path="/openai/realtime",
    shape="flat",
    auth="api-key",
    model_param="deployment",
    query=(("api-version", "2025-04-01-preview"),),
    beta_names=True,
    vad_types=("server_vad", "semantic_vad"),
    voices=_OPENAI_VOICES,
    modalities=("text", "audio"),
    metering=_OPENAI_METERING,
)
# Azure Voice Live (azure-ai-voicelive): beta-shaped session and event names, its own VAD types
VOICE_LIVE = Dialect(
    name="voice-live",
    protocol="azure-voice-live",
    path="/voice-live/realtime",
    shape="flat",
    auth="api-key",
    query=(("api-version", "2026-07-15"),),
    beta_names=True,
    input_rates=(24000, 16000),
    output_rate=24000,
    vad_types=("server_vad", "azure_semantic_vad", "azure_semantic_vad_multilingual"),
    modalities=("text", "audio"),
    rate_field="input_audio_sampling_rate",
)
# DashScope Qwen-Omni-Realtime: beta-shaped, 16 kHz in, 24 kHz out, audio only with text
QWEN = Dialect(
    name="qwen",
    protocol="qwen-omni-realtime",
    path="/api-ws/v1/realtime",
    shape="flat",
    beta_names=True,
    input_rates=(16000,),
    output_rate=24000,
    vad_types=("server_vad", "semantic_vad"),
    voices=("Cherry", "Chelsie", "Ethan", "Serena", "Tina"),
    modalities=("text", "audio"),
    # DashScope's SDK sends pcm16 both ways (its 24 kHz output format is named pcm16 too); the
    # docs have also shown "pcm", and "pcm24" for the output
    format_aliases=(("pcm",), ("pcm", "pcm24")),
)

DIALECTS: dict[str, Dialect] = {
    d.name: d for d in (OPENAI, XAI, AZURE, AZURE_PREVIEW, VOICE_LIVE, QWEN)
}


def dialect(name: str) -> Dialect:
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"dialect must be one of {', '.join(DIALECTS)}, not {name!r}") from None
