"""Where the service may listen, and CURVE encryption for its sockets.

The broker binds loopback by default. Binding anything a second machine can reach carries the
users' audio over the network and lets anyone there submit work or pose as a worker, so it needs
CURVE (the broker holds a secret key; clients and workers are given its public key) or an explicit
``allow_insecure``. ``ipc://`` and ``inproc://`` are local and need neither.

Keys are Z85 text (40 characters) or files written by ``create_keys`` / ``zmq.auth``:
``NAME.key`` holds the public key, ``NAME.key_secret`` the secret one (keep it private).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import zmq
import zmq.auth

from duplexsim.core.errors import ConfigError

__all__ = [
    "KeyInput",
    "check_bind",
    "create_keys",
    "is_local_endpoint",
    "load_public_key",
    "load_secret_key",
    "secure_client",
    "secure_server",
]

KeyInput = str | bytes | Path

_LOCAL_NAMES = {"localhost", "ip6-localhost", "lo", "lo0"}


def is_local_endpoint(endpoint: str) -> bool:
    """True when only this machine can reach ``endpoint``."""
    scheme, _, rest = endpoint.partition("://")
    if scheme in ("ipc", "inproc"):
        return True
    if scheme != "tcp" or not rest:
        return False
    host = rest.rsplit(":", 1)[0] if ":" in rest else rest
    host = host.split(";")[-1].strip("[]")  # "source;dest" form: the destination host counts
    if host in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # "*", an interface name or a host name: could be reachable


def check_bind(endpoint: str, *, curve: bool, allow_insecure: bool) -> None:
    """Refuse a bind that others can reach when it is neither encrypted nor explicitly allowed."""
    if curve or allow_insecure or is_local_endpoint(endpoint):
        return
    raise ConfigError(
        f"refusing to bind {endpoint} without encryption: anyone who can reach it could send "
        "audio for scoring or register as a worker and receive users' audio. Give the broker a "
        "CURVE secret key (create one with `duplexsim scoring keys DIR`; clients and workers "
        "then need its public key), bind 127.0.0.1, or pass --insecure on a network you trust"
    )


def create_keys(directory: str | Path, name: str = "broker") -> tuple[Path, Path]:
    """Write a CURVE key pair; returns (public key file, secret key file)."""
    _require_curve()
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    public, secret = zmq.auth.create_certificates(str(folder), name)
    Path(secret).chmod(0o600)
    return Path(public), Path(secret)


def load_secret_key(value: KeyInput) -> bytes:
    return _load_key(value, secret=True)


def load_public_key(value: KeyInput) -> bytes:
    return _load_key(value, secret=False)


def secure_server(socket: zmq.Socket[Any], secret_key: bytes) -> None:
    _require_curve()
    socket.curve_secretkey = secret_key
    socket.curve_server = True


def secure_client(socket: zmq.Socket[Any], server_public_key: bytes) -> None:
    """CURVE client with a fresh key pair of its own (the server authenticates, not the client)."""
    _require_curve()
    public, secret = zmq.curve_keypair()
    socket.curve_serverkey = server_public_key
    socket.curve_publickey = public
    socket.curve_secretkey = secret


def _load_key(value: KeyInput, *, secret: bool) -> bytes:
    kind = "secret" if secret else "public"
    raw = value.encode() if isinstance(value, str) else value
    if isinstance(raw, bytes) and _is_z85_key(raw):
        return raw
    path = Path(value.decode() if isinstance(value, bytes) else value)
    if not path.is_file():
        raise ConfigError(
            f"CURVE {kind} key: '{path}' is neither a 40-character Z85 key nor a file"
        )
    try:
        public, private = zmq.auth.load_certificate(str(path))
    except (ValueError, OSError) as e:
        raise ConfigError(f"CURVE {kind} key file {path}: {e}") from None
    key = private if secret else public
    if not key:
        raise ConfigError(f"CURVE key file {path} holds no {kind} key")
    return key


def _is_z85_key(raw: bytes) -> bool:
    if len(raw) != 40:
        return False
    try:
        return len(zmq.utils.z85.decode(raw)) == 32
    except (ValueError, KeyError):
        return False


def _require_curve() -> None:
    if not zmq.has("curve"):
        raise ConfigError("this libzmq was built without CURVE support")
