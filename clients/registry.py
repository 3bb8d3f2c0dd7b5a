"""Clients and fake servers registered by protocol name; heavy imports happen only on use."""

from __future__ import annotations

import importlib
from typing import Any

from clients.base import DuplexClient
from simulator.core.errors import ConfigError

__all__ = ["client_class", "client_protocols", "fake_server_factory", "server_protocols"]

# protocol name -> "module:attribute"
_CLIENTS: dict[str, str] = {
    "pcm-ws": "clients.pcm_ws.client:PcmWsClient",
    "moshi": "clients.moshi.client:MoshiClient",
    "gemini-live": "clients.gemini_live.client:GeminiLiveClient",
    "openai-webrtc": "clients.openai_webrtc.client:OpenAIWebRTCClient",
    "openai-realtime": "clients.openai_realtime.client:OpenAIRealtimeClient",
    "xai-realtime": "clients.openai_realtime.client:XaiRealtimeClient",
    "azure-realtime": "clients.openai_realtime.client:AzureRealtimeClient",
    "azure-voice-live": "clients.openai_realtime.client:AzureVoiceLiveClient",
    "qwen-omni-realtime": "clients.openai_realtime.client:QwenOmniRealtimeClient",
    "replay": "clients.replay:ReplayClient",
}

# protocol name -> "module:attribute" of an async factory:
#   start(behaviour_factory, *, host, port, faults) -> clients.fakeserver.RunningServer
_SERVERS: dict[str, str] = {
    "pcm-ws": "clients.pcm_ws.server:start_server",
    "moshi": "clients.moshi.server:start_server",
    "gemini-live": "clients.gemini_live.server:start_server",
    "openai-webrtc": "clients.openai_webrtc.server:start_server",
    "openai-realtime": "clients.openai_realtime.server:start_server",
    "xai-realtime": "clients.openai_realtime.server:start_xai",
    "azure-realtime": "clients.openai_realtime.server:start_azure",
    "azure-voice-live": "clients.openai_realtime.server:start_voice_live",
    "qwen-omni-realtime": "clients.openai_realtime.server:start_qwen",
}


def _load(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def client_protocols() -> list[str]:
    return sorted(_CLIENTS)


def server_protocols() -> list[str]:
    return sorted(_SERVERS)


def client_class(protocol: str) -> type[DuplexClient]:
    try:
        spec = _CLIENTS[protocol]
    except KeyError:
        known = ", ".join(client_protocols())
        raise ConfigError(f"unknown protocol '{protocol}' (known: {known})") from None
    cls: type[DuplexClient] = _load(spec)
    return cls


def fake_server_factory(protocol: str) -> Any:
    try:
        spec = _SERVERS[protocol]
    except KeyError:
        known = ", ".join(server_protocols())
        raise ConfigError(f"no fake server for protocol '{protocol}' (known: {known})") from None
    return _load(spec)
