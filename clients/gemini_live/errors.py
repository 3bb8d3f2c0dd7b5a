"""How the Gemini Live API refuses or ends a connection, mapped to duplexsim errors (pure).

The API has no in-band error event in normal use. It refuses the upgrade with an HTTP status, or
closes the socket with a code and a reason (python-genai live.py turns the close into
APIError(code, reason)): 1007 for an invalid argument, 1008 for a policy refusal (a bad key, an
unknown model), 1011 for an internal error, RESOURCE_EXHAUSTED in the reason when a quota or the
concurrent-session limit is hit (GoogleCloudPlatform/generative-ai#1576 shows such a close).
Every text here may come from the server: callers blank the API key out of it first.
"""

from __future__ import annotations

from duplexsim.clients.transport.httperrors import retry_in
from duplexsim.core.errors import (
    ConnectError,
    Disconnected,
    ProtocolError,
    RateLimited,
    RemoteError,
    SessionError,
)
from duplexsim.core.redact import redact

__all__ = ["api_error", "close_error", "close_text", "redact_url"]

_AUTH_WORDS = (
    "api key",
    "api_key",
    "unauthenticated",
    "permission_denied",
    "permission",
    "credential",
)


def close_error(
    code: int | None, reason: str, *, during_setup: bool = False
) -> SessionError | None:
    """Map a close code and reason (already redacted) to an error; None for a normal close."""
    text = close_text(code, reason)
    lowered = reason.lower()
    if "resource_exhausted" in lowered or "quota" in lowered:
        return RateLimited(f"server closed the connection: {text}", retry_after_s=retry_in(reason))
    if code == 1000:
        return None
    if code == 1008:
        if not reason or any(w in lowered for w in _AUTH_WORDS):
            return ConnectError(
                f"server refused the session: {text} (check the API key)",
                retryable=False,
                reason="auth",
            )
        return RemoteError(f"server refused the session: {text}", retryable=False)
    if code == 1007:
        return ProtocolError(f"server rejected a message as invalid: {text}")
    if code in (1002, 1003, 1009):
        return ProtocolError(f"server closed the connection: {text}")
    # 1011 internal, 1001 going away, 1006 lost, 1012-1014 restarts: all worth another try
    if during_setup:
        return ConnectError(f"connection closed during setup: {text}")
    return Disconnected(f"server closed the connection: {text}")


def api_error(code: int | None, status: str, message: str) -> SessionError:
    """An in-band ``error`` object (google.rpc.Status shape) -> an error."""
    said = " ".join(str(x) for x in (code, status) if x)
    text = f"server error {said or '(no code)'}: {message}"
    if status == "RESOURCE_EXHAUSTED" or code == 429:
        return RateLimited(text, retry_after_s=retry_in(message))
    if status in ("UNAUTHENTICATED", "PERMISSION_DENIED") or code in (401, 403):
        return RemoteError(f"{text} (check the API key)", retryable=False, reason="auth")
    retryable = status in ("UNAVAILABLE", "INTERNAL", "ABORTED", "DEADLINE_EXCEEDED") or (
        code is not None and code >= 500
    )
    return RemoteError(text, retryable=retryable)


def redact_url(url: str, secret: str | None = None) -> str:
    """``url`` with any ``key=`` query value (and ``secret`` anywhere) blanked out."""
    return redact(url, (secret,))


def close_text(code: int | None, reason: str) -> str:
    if code is None:
        return "no close frame (connection lost)"
    return f"code {code}" + (f" ({reason})" if reason else "")
