"""The openai-realtime client without I/O: text frames in, events or text frames out.

``ClientProtocol`` runs the handshake (wait for ``session.created``, send ``session.update``, wait
for ``session.updated``) and turns server events into ``duplexsim.clients.base`` events stamped with the
arrival time it is given. No sockets, no clock.

Every dialect of the family (``dialects``) goes through this one object: what differs is data
(the session's shape, where the server reports what it configured), never a branch on a name.

Output audio arrives faster than real time: a whole reply lands in one burst and ``response.done``
right after it. Every event, ``EndOfTurn`` included, carries its arrival time and nothing else: the
session places the audio on its timeline (``OutputTrack``) and ends the reply once what was placed
has played, not when its last byte arrived.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from numpy.typing import NDArray

from duplexsim.clients.base import (
    AudioOut,
    ClientEvent,
    EndOfTurn,
    ErrorEvent,
    RateLimits,
    SpeechStarted,
    SpeechStopped,
    Transcript,
    UsageReport,
)
from duplexsim.clients.openai_realtime import events as wire
from duplexsim.clients.openai_realtime.dialects import OPENAI, Dialect
from duplexsim.clients.transport.httperrors import retry_in
from duplexsim.core.errors import ProtocolError, RateLimited, RemoteError, SessionError
from duplexsim.core.redact import redact
from duplexsim.core.retry import ProviderLimit

__all__ = [
    "ClientProtocol",
    "SessionOptions",
    "VadMark",
    "classify_error",
    "endpoint_url",
]

# error codes and types as the Realtime API reports them (realtime_error.py: type, code)
_AUTH_CODES = frozenset(
    {"invalid_api_key", "invalid_authentication", "unauthorized", "permission_denied"}
)
_AUTH_TYPES = frozenset({"authentication_error", "permission_error"})
_FINAL_CODES = frozenset({"insufficient_quota", "model_not_found", "unsupported_model"})
_SESSION_CODES = frozenset({"session_expired", "session_not_found", "invalid_session"})


@dataclass(frozen=True)
class VadMark:
    """A server VAD edge: when it arrived and where the server put it on the input (ms), if said."""

    kind: str  # "speech_started" | "speech_stopped"
    arrival: float
    server_ms: int | None


class SessionOptions(Protocol):
    """What the core needs of a transport's options (``RealtimeOptions``, ``WebRTCOptions``)."""

    @property
    def dialect(self) -> Dialect: ...

    @property
    def manual(self) -> bool: ...

    @property
    def sample_rate(self) -> int | None: ...  # None: negotiated elsewhere (WebRTC's codec)

    def session(self) -> dict[str, Any]: ...


class ClientProtocol:
    """The session core of every OpenAI-family transport: the handshake, the events, the errors.
    A transport whose audio or end of turn travels otherwise (WebRTC) overrides ``map``."""

    def __init__(self, options: SessionOptions, *, secrets: Sequence[str] = ()) -> None:
        self.options = options
        self.state = "opening"  # -> "updating" -> "ready"
        self.session: dict[str, Any] | None = None  # as session.updated reported it
        self.rate_limits: tuple[wire.RateLimit, ...] = ()
        self.vad_marks: list[VadMark] = []
        self.unknown_types: Counter[str] = Counter()
        self._secrets = tuple(s for s in secrets if s)
        self._ids = itertools.count(1)

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    # --- handshake -------------------------------------------------------------------------

    def receive_handshake(self, text: str) -> list[str]:
        """Feed one frame during the handshake; returns the frames to send. Check ``ready``."""
        msg = self._decode(text)
        if isinstance(msg, wire.Error):
            error, _ = classify_error(msg, self._secrets)
            if type(error) is RemoteError and error.reason == "remote":  # e.g. a rejected option
                raise RemoteError(f"session set-up failed: {error}", retryable=error.retryable)
            raise error
        if self.state == "opening" and isinstance(
            msg, wire.SessionCreated | wire.ConversationCreated
        ):
            self.state = "updating"
            return [wire.session_update(self.options.session(), self._event_id())]
        if self.state == "updating" and isinstance(msg, wire.SessionUpdated):
            self._check_session(msg.session)
            self.session = msg.session
            self.state = "ready"
        return []  # pings, rate limits, a default session.updated before ours: not the answer

    def _check_session(self, session: dict[str, Any]) -> None:
        """What the server says it configured must match what we asked, where it says it."""
        where = self.options.dialect
        audio_in = _table(_table(session.get("audio")).get("input"))
        holder = audio_in if where.shape == "ga" else session
        if "turn_detection" in holder and (holder["turn_detection"] is None) != self.options.manual:
            got = "off" if holder["turn_detection"] is None else "on"
            asked = "off" if self.options.manual else "on"
            raise ProtocolError(
                f"server has turn detection {got}, we asked for {asked} "
                f"(does the {where.protocol} dialect fit this server?)"
            )
        rate = _table(audio_in.get("format")).get("rate")
        if where.rate_field is not None:
            rate = session.get(where.rate_field, rate)
        if rate is not None and self.options.sample_rate and rate != self.options.sample_rate:
            raise ProtocolError(f"server set {rate} Hz input; we asked {self.options.sample_rate}")

    # --- streaming -------------------------------------------------------------------------

    def audio_message(self, samples: NDArray[Any]) -> str:
        return wire.audio_append(samples)

    def commit_messages(self) -> list[str]:
        """End of the user's turn: commit and ask for a response, only when turn detection is off."""
        if not self.options.manual:
            return []
        return [wire.commit(self._event_id()), wire.response_create(self._event_id())]

    def receive_text(self, text: str, arrival: float) -> list[ClientEvent]:
        return self.map(self._decode(text), arrival)

    def map(self, msg: wire.Message, arrival: float) -> list[ClientEvent]:
        """One decoded server event -> the session's events, stamped with its arrival."""
        match msg:
            case wire.AudioDelta(pcm=pcm):
                return [AudioOut(wire.pcm_samples(pcm), arrival)]
            case wire.TranscriptDelta(delta=text_delta):
                return [Transcript(text_delta, arrival, False)]
            case wire.TranscriptDone(transcript=said):
                return [Transcript(said, arrival, True)]
            case wire.SpeechStarted(audio_start_ms=ms):
                self.vad_marks.append(VadMark("speech_started", arrival, ms))
                return [SpeechStarted(arrival)]
            case wire.SpeechStopped(audio_end_ms=ms):
                self.vad_marks.append(VadMark("speech_stopped", arrival, ms))
                return [SpeechStopped(arrival)]
            case wire.ResponseDone(usage=usage):
                used = (
                    [] if usage is None else [UsageReport(usage, arrival, source="response.done")]
                )
                return [*used, self._response_done(msg, arrival)]
            case wire.Error():
                error, fatal = classify_error(msg, self._secrets)
                return [ErrorEvent(error, arrival, fatal)]
            case wire.RateLimitsUpdated(rate_limits=limits):
                self.rate_limits = limits
                stated = tuple(
                    ProviderLimit(x.name, x.limit, x.remaining, x.reset_seconds)
                    for x in limits
                    if x.name is not None
                )
                return [RateLimits(stated, arrival, "rate_limits.updated")] if stated else []
            case wire.Unknown(type=kind):
                self.unknown_types[kind] += 1
        return []

    def _response_done(self, done: wire.ResponseDone, arrival: float) -> ClientEvent:
        if done.status == "failed":
            details = done.status_details or {}
            err = _table(details.get("error"))
            cause = wire.Error(
                message=_text(err.get("message")) or "the response failed",
                type=_text(err.get("type")) or "server_error",
                code=_text(err.get("code")) or None,
            )
            error, _ = classify_error(cause, self._secrets)
            return ErrorEvent(error, arrival, fatal=True)
        # completed, incomplete or cancelled: what was said so far is the reply
        return EndOfTurn(arrival)

    # --- helpers ---------------------------------------------------------------------------

    def _decode(self, text: str) -> wire.Message:
        try:
            return wire.decode(text)
        except ProtocolError as exc:
            raise ProtocolError(_scrub(exc.message, self._secrets)) from None

    def _event_id(self) -> str:
        return f"evt_duplexsim_{next(self._ids)}"


def classify_error(err: wire.Error, secrets: Sequence[str] = ()) -> tuple[SessionError, bool]:
    """A server ``error`` event -> (the error, whether it ends the session)."""
    code, kind = err.code or "", err.type or ""
    where = f" (param {err.param})" if err.param else ""
    text = _scrub(f"server error {code or kind or 'unknown'}: {err.message}{where}", secrets)
    if code == "beta_api_shape_disabled":
        return ProtocolError(
            f"{text} -- the server rejected the retired Realtime beta shape; this client speaks "
            "the GA interface, so something (a proxy, a wrong URL) sent 'OpenAI-Beta: realtime=v1' "
            "or a beta endpoint is configured"
        ), True
    if code in _AUTH_CODES or kind in _AUTH_TYPES:
        return RemoteError(f"{text} (check the API key)", retryable=False, reason="auth"), True
    if code in _FINAL_CODES:
        return RemoteError(text, retryable=False), True
    if "rate_limit" in code or "rate_limit" in kind:
        return RateLimited(text, retry_after_s=retry_in(err.message)), True
    if code in _SESSION_CODES:
        return RemoteError(text, retryable=True), True
    if kind == "server_error":
        return RemoteError(text, retryable=True), False  # a failed response says so itself
    return RemoteError(text, retryable=False), False  # e.g. a bad parameter: the session goes on


def endpoint_url(url: str, model: str | None, dialect: Dialect = OPENAI) -> str:
    """``url`` with the model (or deployment) and the dialect's fixed parameters in its query,
    unless the query names them already."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    named = {k for k, _ in query}
    wanted = [*dialect.query, *([(dialect.model_param, model)] if model else [])]
    query += [(k, v) for k, v in wanted if k not in named]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _scrub(text: str, secrets: Sequence[str]) -> str:
    return redact(text, secrets)


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
