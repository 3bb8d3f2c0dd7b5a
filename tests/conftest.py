from __future__ import annotations

import json
import ssl
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from simulator.core.timing import TimingBudget

# for tests of something other than the machine's pacing (retries, resume, reports): a budget no
# loaded machine breaks, so a session is not run again because six other jobs share the cores.
# Timing validity itself is tested on the virtual clock (test_session_timing.py).
LENIENT = TimingBudget(
    send_p99_ms=1000.0,
    send_max_ms=5000.0,
    loop_lag_max_ms=5000.0,
    recv_lag_max_ms=5000.0,
    latency_ms=1000.0,
)
LENIENT_ARGS = ["--timing-budget", "1000/5000"]


def voiced_signal(
    seconds: float, rate: int = 16000, *, f0: float = 140.0, peak: float = 0.3
) -> np.ndarray:
    """A speech-like signal (harmonics under a 4 Hz syllable envelope) that webrtcvad calls speech."""
    t = np.arange(round(seconds * rate)) / rate
    tone = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 8))
    envelope = 0.6 + 0.4 * np.sin(2 * np.pi * 4.0 * t)
    x = tone * envelope
    return (peak * x / np.max(np.abs(x))).astype(np.float32)


def write_wav(path: Path, samples: np.ndarray, rate: int = 16000) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, samples, rate, subtype="PCM_16")
    return path


@pytest.fixture
def make_benchmark(tmp_path: Path) -> Callable[..., Path]:
    """Writes a small valid benchmark; ``lines`` override or replace the manifest lines."""

    def make(lines: list[object] | None = None, *, n: int = 2) -> Path:
        root = tmp_path / "bench"
        for i in range(n):
            write_wav(root / "audio" / f"s{i}.context.wav", voiced_signal(1.0))
            write_wav(root / "audio" / f"s{i}.reference.wav", voiced_signal(0.5, f0=200.0))
        if lines is None:
            lines = [
                {
                    "id": f"s{i}",
                    "language": "en",
                    "emotion": "Amusement",
                    "context": f"audio/s{i}.context.wav",
                    "reference": f"audio/s{i}.reference.wav",
                }
                for i in range(n)
            ]
        text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
        (root / "manifest.jsonl").write_text(text + "\n", encoding="utf-8")
        return root

    return make


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Benchmark reference caches of the whole session (module fixtures) stay out of ~/.cache."""
    import os

    os.environ["DUPLEXSIM_CACHE"] = str(tmp_path_factory.mktemp("duplexsim-cache"))


@pytest.fixture(autouse=True)
def _test_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no benchmark reference cache of its own (counts do not depend on
    which tests ran before)."""
    monkeypatch.setenv("DUPLEXSIM_CACHE", str(tmp_path_factory.mktemp("cache")))


def self_signed_tls(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a fresh self-signed certificate for 127.0.0.1, and a client
    context that trusts it."""
    crypto = pytest.importorskip("cryptography")
    del crypto
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_pem = tmp_path / "cert.pem"
    key_pem = tmp_path / "key.pem"
    cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_pem, key_pem)
    client = ssl.create_default_context(cafile=str(cert_pem))
    return server, client
