"""Secret redaction: the one function every text a server can say back passes through before it
is shown, logged or written (close reasons, error messages, transcripts, URLs).

A server may echo the key it was given (in an error, a close reason, even a transcript), so the
key itself is replaced wherever it appears, in clear or URL-encoded. Text that merely looks like a
credential (a ``key=`` query parameter, a bearer token, the shapes of OpenAI, Google and xAI keys)
is replaced as well: a server may quote a key that is not the one we sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote

__all__ = ["MASK", "redact"]

MASK = "***"
_MIN_SECRET = 4  # shorter "secrets" would mask ordinary words

_PATTERNS = (
    # query parameters that carry credentials (Gemini takes its key as ?key=)
    re.compile(r"(?i)([?&;](?:key|api[_-]?key|access_token|token|auth)=)[^&#\s\"']+"),
    re.compile(r"(?i)(\bBearer\s+)[A-Za-z0-9._~+/=-]+"),
    re.compile(r"()\b(?:sk|rk|ek|xai)[-_][A-Za-z0-9_-]{12,}"),  # OpenAI, xAI
    re.compile(r"()\bAIza[0-9A-Za-z_-]{30,}"),  # Google API keys
)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every secret, and anything shaped like a credential, replaced by ***."""
    for secret in secrets:
        if secret and len(secret) >= _MIN_SECRET:
            text = text.replace(secret, MASK)
            encoded = quote(secret, safe="")
            if encoded != secret:
                text = text.replace(encoded, MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + MASK, text)
    return text
