"""Clients and fake servers registered by protocol name; heavy imports happen only on use.

A new built-in protocol is one line in each table below; a protocol from another package is an
entry point in the ``duplexsim.protocols`` group, or a ``module:Class`` name in a profile
(docs/extending.md).
"""

from __future__ import annotations

from typing import Any

from duplexsim.clients.base import DuplexClient
from duplexsim.core.errors import ConfigError
from duplexsim.core.plugins import PROTOCOLS_GROUP, is_object_name, load_object, plugin_names

__all__ = ["client_class", "client_protocols", "fake_server_factory", "server_protocols"]

# protocol name -> "module:attribute"
_CLIENTS: dict[str, str] = {
    "pcm-ws": "duplexsim.clients.pcm_ws.client:PcmWsClient",
    "moshi": "duplexsim.clients.moshi.client:MoshiClient",
    "gemini-live": "duplexsim.clients.gemini_live.client:GeminiLiveClient",
    "openai-webrtc": "duplexsim.clients.openai_webrtc.client:OpenAIWebRTCClient",
    "openai-realtime": "duplexsim.clients.openai_realtime.client:OpenAIRealtimeClient",
    "xai-realtime": "duplexsim.clients.openai_realtime.client:XaiRealtimeClient",
    "azure-realtime": "duplexsim.clients.openai_realtime.client:AzureRealtimeClient",
    "azure-realtime-preview": "duplexsim.clients.openai_realtime.client:AzurePreviewRealtimeClient",
    "azure-voice-live": "duplexsim.clients.openai_realtime.client:AzureVoiceLiveClient",
    "qwen-omni-realtime": "duplexsim.clients.openai_realtime.client:QwenOmniRealtimeClient",
    "freeze-omni": "duplexsim.clients.freeze_omni.client:FreezeOmniClient",
    "hume-evi": "duplexsim.clients.hume_evi.client:HumeEviClient",
    "nova-sonic": "duplexsim.clients.nova_sonic.client:NovaSonicClient",
    "replay": "duplexsim.clients.recorded:ReplayClient",
}

# protocol name -> "module:attribute" of an async factory, each a declaration the fake kit serves:
#   start(behaviour_factory, *, host, port, faults) -> duplexsim.clients.fakekit.fakeserver.RunningServer
_SERVERS: dict[str, str] = {
    "pcm-ws": "duplexsim.clients.pcm_ws.server:start_server",
    "moshi": "duplexsim.clients.moshi.server:start_server",
    "gemini-live": "duplexsim.clients.gemini_live.server:start_server",
    "openai-webrtc": "duplexsim.clients.openai_webrtc.server:start_server",
    "openai-realtime": "duplexsim.clients.openai_realtime.server:start_server",
    "xai-realtime": "duplexsim.clients.openai_realtime.server:start_xai",
    "azure-realtime": "duplexsim.clients.openai_realtime.server:start_azure",
    "azure-realtime-preview": "duplexsim.clients.openai_realtime.server:start_azure_preview",
    "azure-voice-live": "duplexsim.clients.openai_realtime.server:start_voice_live",
    "qwen-omni-realtime": "duplexsim.clients.openai_realtime.server:start_qwen",
    "freeze-omni": "duplexsim.clients.freeze_omni.server:start_server",
    "hume-evi": "duplexsim.clients.hume_evi.server:start_server",
    "nova-sonic": "duplexsim.clients.nova_sonic.server:start_server",
}


def _client_specs() -> dict[str, str]:
    """Built-in protocols and those installed packages declare (a built-in name wins)."""
    return plugin_names(PROTOCOLS_GROUP) | _CLIENTS


def client_protocols() -> list[str]:
    return sorted(_client_specs())


def server_protocols() -> list[str]:
    return sorted(_SERVERS)


def client_class(protocol: str) -> type[DuplexClient]:
    """The client of a protocol name, an installed plugin's name, or a ``module:Class`` name."""
    spec = protocol if is_object_name(protocol) else _client_specs().get(protocol)
    if spec is None:
        known = ", ".join(client_protocols())
        raise ConfigError(
            f"unknown protocol '{protocol}' (known: {known}; or a 'module:Class' name)"
        )
    cls = load_object(spec, f"the {protocol} protocol")
    if not (isinstance(cls, type) and issubclass(cls, DuplexClient)):
        raise ConfigError(f"protocol '{protocol}': {spec} is not a DuplexClient subclass")
    return cls


def fake_server_factory(protocol: str) -> Any:
    try:
        spec = _SERVERS[protocol]
    except KeyError:
        known = ", ".join(server_protocols())
        raise ConfigError(f"no fake server for protocol '{protocol}' (known: {known})") from None
    return load_object(spec, f"the {protocol} fake server")
