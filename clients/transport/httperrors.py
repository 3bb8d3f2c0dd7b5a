"""What an HTTP refusal means, for every client: one mapping from status to error, one reading of
how long the server asks us to wait (pure).

A WebSocket upgrade refused with a status (every WebSocket client) and an SDP offer refused over
HTTP (openai-webrtc) mean the same things: a bad key is final, a rate limit is retried after the
server's delay, a bad URL or model is final, a server error is worth another try. The body is
searched for key words only, never quoted: OpenAI's 401 body echoes part of the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from duplexsim.core.errors import ConnectError, RateLimited, SessionError
from duplexsim.core.retry import ProviderLimit

__all__ = ["limits_from_headers", "refusal", "retry_after", "retry_in"]

# "Please try again in 1.5s" (OpenAI), "Please retry in 7s" (Google), "try again in 20ms"
_RETRY_IN = re.compile(r"(?:try again|retry) in\s+(\d+(?:\.\d+)?)\s*(ms|s)\b", re.IGNORECASE)
_KEY_WORDS = ("api key", "api_key", "apikey")
# "1s", "6m0s", "20ms", "1h2m3.5s": how OpenAI writes x-ratelimit-reset-*
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header; None when absent, negative or an HTTP date (a date
    would need a clock, and no provider here sends one)."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and seconds >= 0 else None


def retry_in(text: str) -> float | None:
    """Seconds from a server's "try again in 1.5s" / "retry in 7s" / "... in 20ms" wording."""
    match = _RETRY_IN.search(text)
    if match is None:
        return None
    return float(match.group(1)) / (1000.0 if match.group(2).lower() == "ms" else 1.0)


def refusal(
    status: int,
    headers: Mapping[str, str],
    *,
    what: str = "the WebSocket handshake",
    body: str = "",
    detail: str = "",
    credential: str = "the API key",
) -> SessionError:
    """The error for an HTTP ``status`` that refused ``what``. ``body`` is only searched for key
    words; ``detail`` (already redacted by the caller) is quoted after the status; a refused
    key says to check ``credential``."""
    text = f"server refused {what}: HTTP {status}"
    said = body.lower()
    if status in (401, 403) or (status == 400 and any(w in said for w in _KEY_WORDS)):
        return ConnectError(f"{text}{detail} (check {credential})", retryable=False, reason="auth")
    if "insufficient_quota" in said:  # OpenAI answers an empty account with 429 too
        return ConnectError(f"{text}{detail} (quota used up)", retryable=False, reason="quota")
    if status == 429 or "resource_exhausted" in said:
        after = retry_after(_header(headers, "Retry-After"))
        return RateLimited(text, retry_after_s=after if after is not None else retry_in(body))
    if status in (400, 404, 415, 422):
        return ConnectError(f"{text}{detail} (check the URL and the model name)", retryable=False)
    return ConnectError(f"{text}{detail}", retryable=status >= 500 or status == 408)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """A header whatever its case (websockets' Headers ignore case; a plain dict does not)."""
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    return next((v for k, v in headers.items() if k.lower() == lowered), None)


def limits_from_headers(headers: Mapping[str, str]) -> tuple[ProviderLimit, ...]:
    """The ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` headers (OpenAI's, and
    servers that copy them) as limits; what is absent or unreadable is left out."""
    found = []
    for name in ("requests", "tokens"):
        limit = _int_header(headers, f"x-ratelimit-limit-{name}")
        remaining = _int_header(headers, f"x-ratelimit-remaining-{name}")
        reset = _header(headers, f"x-ratelimit-reset-{name}")
        if limit is None and remaining is None:
            continue
        found.append(
            ProviderLimit(name, limit, remaining, None if reset is None else duration_s(reset))
        )
    return tuple(found)


def duration_s(text: str) -> float | None:
    """Seconds in "1.5", "20ms", "6m0s" or "1h2m3s"; None if it is none of those."""
    text = text.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def _int_header(headers: Mapping[str, str], name: str) -> int | None:
    value = _header(headers, name)
    try:
        return None if value is None else max(0, int(value.strip()))
    except ValueError:
        return None
