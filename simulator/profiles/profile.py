"""Model profiles: how to reach a model (protocol, endpoint, model id, voice, key variable).

A model is named on the command line as a profile file (``my-model.toml``), a built-in profile
name, ``fake:BEHAVIOUR[@PROTOCOL]`` for a local reference model, or a ``ws://`` URL of a pcm-ws server.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from duplexsim.clients.base import ClientConfig
from duplexsim.core.errors import ConfigError
from duplexsim.core.names import NAME_HINT, is_name
from duplexsim.core.prices import PriceTable
from duplexsim.core.provenance import endpoint_kind

__all__ = [
    "ModelProfile",
    "builtin_profiles",
    "client_config",
    "is_loopback_url",
    "load_profile",
    "resolve_model",
]

PROFILE_DIR = Path(__file__).with_name("builtin")
FAKE_KEY = "fake-local-key"
_FIELDS = {
    "name",
    "protocol",
    "url",
    "model",
    "voice",
    "api_key_env",
    "options",
    "connect_timeout_s",
    "description",
    "price",
}
# what a local reference model costs: nothing, and that is known
FAKE_PRICE = PriceTable(source="a local reference model: not billed")


@dataclass(frozen=True)
class ModelProfile:
    name: str
    protocol: str
    url: str | None = None
    model: str | None = None
    voice: str | None = None
    api_key_env: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    connect_timeout_s: float = 10.0
    description: str = ""
    fake_behaviour: str | None = None  # set for fake:BEHAVIOUR models, served locally
    source: str = ""
    url_overridden: bool = False  # ``url`` was replaced on the command line (``--url``)
    price: PriceTable | None = None  # what the provider bills (None: no table, cost unknown)

    @property
    def endpoint(self) -> str:
        """Where the model really is: hosted, local, fake or override (``endpoint_kind``)."""
        return endpoint_kind(
            self.url, fake=self.fake_behaviour is not None, overridden=self.url_overridden
        )

    def describe(self) -> dict[str, Any]:
        """Everything about the profile that is safe to record: the key's variable name, never its value."""
        return {
            "name": self.name,
            "protocol": self.protocol,
            "url": self.url,
            "model": self.model,
            "voice": self.voice,
            "api_key_env": self.api_key_env,
            "options": dict(self.options),
            "fake_behaviour": self.fake_behaviour,
            "source": self.source,
            "endpoint": self.endpoint,
            "url_overridden": self.url_overridden,
            "price": None if self.price is None else self.price.describe(),
        }


def builtin_profiles() -> dict[str, Path]:
    if not PROFILE_DIR.is_dir():
        return {}
    return {p.stem: p for p in sorted(PROFILE_DIR.glob("*.toml"))}


def load_profile(path: Path) -> ModelProfile:
    data = _read_toml(path)
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise ConfigError(f"{path}: unknown field(s) {', '.join(unknown)}")
    for key in ("protocol", "url"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise ConfigError(f"{path}: field '{key}' is required and must be a string")
    for key in ("name", "model", "voice", "api_key_env", "description"):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"{path}: field '{key}' must be a string")
    options = data.get("options", {})
    if not isinstance(options, dict):
        raise ConfigError(f"{path}: field 'options' must be a table")
    timeout = data.get("connect_timeout_s", 10.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < 1e6:
        raise ConfigError(f"{path}: field 'connect_timeout_s' must be a number of seconds > 0")
    name = data.get("name", path.stem)
    if not is_name(name):  # it names runs and their folders
        raise ConfigError(f"{path}: field 'name' {name!r} must be {NAME_HINT}")
    price = None
    if "price" in data:
        try:
            price = PriceTable.from_dict(data["price"])
        except ValueError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    return ModelProfile(
        name=name,
        protocol=data["protocol"],
        url=data["url"],
        model=data.get("model"),
        voice=data.get("voice"),
        api_key_env=data.get("api_key_env"),
        options=options,
        connect_timeout_s=float(timeout),
        description=data.get("description", ""),
        source=str(path),
        price=price,
    )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read profile ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: profile is not UTF-8 (byte {exc.start})") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML (nested too deeply)") from None
    except ValueError as exc:  # TOMLDecodeError, and integers past Python's digit limit
        raise ConfigError(f"{path}: invalid TOML ({str(exc).splitlines()[0][:200]})") from None


def resolve_model(spec: str) -> ModelProfile:
    if spec.startswith("fake:"):
        behaviour, _, protocol = spec[len("fake:") :].partition("@")
        if not behaviour:
            raise ConfigError(f"model '{spec}': expected fake:BEHAVIOUR[@PROTOCOL]")
        return ModelProfile(
            name=f"fake-{behaviour}",
            protocol=protocol or "pcm-ws",
            fake_behaviour=behaviour,
            source=spec,
            price=FAKE_PRICE,
        )
    if spec.startswith(("ws://", "wss://")):
        return ModelProfile(name="pcm-ws", protocol="pcm-ws", url=spec, source=spec)
    path = Path(spec)
    if path.suffix == ".toml" or path.exists():
        return load_profile(path)
    builtin = builtin_profiles()
    if spec in builtin:
        return load_profile(builtin[spec])
    known = ", ".join(builtin) or "none installed"
    raise ConfigError(
        f"unknown model '{spec}': not a profile file, a built-in profile ({known}), "
        "fake:BEHAVIOUR or a ws:// URL"
    )


def is_loopback_url(url: str) -> bool:
    """Whether ``url`` points at this machine (127.0.0.0/8, ::1 or localhost)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def client_config(
    profile: ModelProfile,
    *,
    url: str | None = None,
    clock: Callable[[], float] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ClientConfig:
    """The client's settings, with the API key read from the environment variable the profile names."""
    env = os.environ if environ is None else environ
    endpoint = url or profile.url
    if not endpoint:
        raise ConfigError(f"model '{profile.name}': no endpoint URL")
    api_key = None
    if profile.api_key_env:
        api_key = env.get(profile.api_key_env) or None
        # a dry run against a fake on this machine needs no real key
        if not api_key and not is_loopback_url(endpoint):
            raise ConfigError(
                f"model '{profile.name}': environment variable "
                f"{profile.api_key_env} is not set (it holds the API key)"
            )
    if api_key is None and (profile.fake_behaviour is not None or profile.api_key_env):
        api_key = FAKE_KEY  # local fakes check that a key is sent, not which
    extra: dict[str, Any] = {} if clock is None else {"clock": clock}
    return ClientConfig(
        url=endpoint,
        model=profile.model,
        voice=profile.voice,
        api_key=api_key,
        options=dict(profile.options),
        connect_timeout_s=profile.connect_timeout_s,
        **extra,
    )
