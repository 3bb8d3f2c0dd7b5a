"""AWS Signature Version 4 for Bedrock's bidirectional stream: the request, then each event (pure).

The request is signed as any SigV4 request whose payload hash is the literal
``STREAMING-AWS4-HMAC-SHA256-EVENTS``. Every event the client sends is then wrapped in a message
with two headers, ``:date`` (timestamp) and ``:chunk-signature`` (32 bytes), whose payload is the
encoded event; the signature covers the previous signature (the request's first), so the events
form a chain: ``AWS4-HMAC-SHA256-PAYLOAD``, the time, the scope, the previous signature in hex,
SHA-256 of the encoded ``:date`` header and SHA-256 of the payload. A final wrapper with an empty
payload ends the stream. Time is always passed in: nothing here reads a clock.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

from duplexsim.clients.nova_sonic.eventstream import encode_message

__all__ = ["EVENTS_PAYLOAD", "Credentials", "EventSigner", "sign_request", "signing_key"]

ALGORITHM = "AWS4-HMAC-SHA256"
EVENTS_PAYLOAD = "STREAMING-AWS4-HMAC-SHA256-EVENTS"
SERVICE = "bedrock"


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)


def amz_date(when: datetime.datetime) -> str:
    return when.astimezone(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")


def scope(stamp: str, region: str) -> str:
    return f"{stamp[:8]}/{region}/{SERVICE}/aws4_request"


def signing_key(secret: str, stamp: str, region: str) -> bytes:
    key = _hmac(f"AWS4{secret}".encode(), stamp[:8])
    for part in (region, SERVICE, "aws4_request"):
        key = _hmac(key, part)
    return key


def sign_request(
    method: str,
    host: str,
    path: str,
    headers: Mapping[str, str],
    credentials: Credentials,
    region: str,
    when: datetime.datetime,
) -> tuple[dict[str, str], str]:
    """The headers to send (``headers`` plus host, date, payload hash, token, authorization)
    and the signature in hex, which seeds the event chain. ``path`` is as sent (encoded once)."""
    stamp = amz_date(when)
    signed = {k.lower(): v.strip() for k, v in headers.items()}
    signed.update({"host": host, "x-amz-date": stamp, "x-amz-content-sha256": EVENTS_PAYLOAD})
    if credentials.session_token:
        signed["x-amz-security-token"] = credentials.session_token
    names = sorted(signed)
    canonical = "\n".join(
        [
            method,
            quote(path, safe="/~"),  # every segment encoded a second time (all but S3)
            "",
            "".join(f"{n}:{signed[n]}\n" for n in names),
            ";".join(names),
            EVENTS_PAYLOAD,
        ]
    )
    to_sign = "\n".join([ALGORITHM, stamp, scope(stamp, region), _sha256(canonical.encode())])
    signature = hmac.new(
        signing_key(credentials.secret_access_key, stamp, region), to_sign.encode(), "sha256"
    ).hexdigest()
    signed["authorization"] = (
        f"{ALGORITHM} Credential={credentials.access_key_id}/{scope(stamp, region)}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    signed.pop("host")  # HTTP/2 carries it as :authority
    return signed, signature


class EventSigner:
    """Wraps each event in its signed envelope, carrying the chain from the request's signature."""

    def __init__(self, credentials: Credentials, region: str, seed_signature: str) -> None:
        self._secret = credentials.secret_access_key
        self._region = region
        self.prior = seed_signature  # hex
        self._key: tuple[str, bytes] = ("", b"")  # the day's signing key, made once a day

    def wrap(self, event: bytes, when: datetime.datetime) -> bytes:
        """The envelope message of one encoded event (``b""`` for the final, empty one)."""
        stamp = amz_date(when)
        date = {":date": when.astimezone(datetime.UTC)}
        if self._key[0] != stamp[:8]:
            self._key = (stamp[:8], signing_key(self._secret, stamp, self._region))
        signature = event_signature(
            self._secret, self._region, self.prior, date, event, stamp, key=self._key[1]
        )
        self.prior = signature.hex()
        return encode_message({**date, ":chunk-signature": signature}, event)


def event_signature(
    secret: str,
    region: str,
    prior: str,
    date_header: Mapping[str, datetime.datetime],
    payload: bytes,
    stamp: str,
    *,
    key: bytes | None = None,
) -> bytes:
    """The ``:chunk-signature`` of one envelope (also what a server checks it against);
    ``key``: the signing key for ``stamp``'s day, if already made."""
    encoded_date = encode_message(date_header)[12:-4]  # just the encoded header
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256-PAYLOAD",
            stamp,
            scope(stamp, region),
            prior,
            _sha256(encoded_date),
            _sha256(payload),
        ]
    )
    key = key or signing_key(secret, stamp, region)
    return hmac.new(key, to_sign.encode(), "sha256").digest()


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), "sha256").digest()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
