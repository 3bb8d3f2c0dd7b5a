"""What a fake declares for the kit to serve (pure: no I/O).

A fake is a pure server protocol (``<protocol>/fake.py``) plus one of these declarations, which
also names the transport: ``WebSocketFake``, ``Http2Fake`` or ``WebRTCFake``. The kit
(``fakeserver.serve_fake``) listens, answers each opening request with ``refuse`` (the
protocol's own checks and the injected handshake faults, in the order its service makes them),
hands each request it lets through to ``accept`` (or, for a call, ``offer`` and ``call``) and
carries out the actions the protocol object returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from numpy.typing import NDArray

from duplexsim.clients.fakekit.callactions import CallAction
from duplexsim.clients.fakekit.faults import Faults, Rejection
from duplexsim.clients.fakekit.serveractions import Action, Close

__all__ = [
    "CallProtocol",
    "Conversation",
    "Http2Fake",
    "Offer",
    "Refuse",
    "Request",
    "Session",
    "Untimed",
    "WebRTCFake",
    "WebSocketFake",
    "faults_only",
    "faults_then",
]

Data = str | bytes


@dataclass(frozen=True)
class Request:
    """An opening request: the WebSocket upgrade, the HTTP/2 request or the HTTP POST of an
    offer. ``path`` keeps the query; ``headers`` ignore case for WebSocket and are lower-case
    for HTTP/2 (pseudo-headers included) and HTTP/1.1."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes = b""


Refuse = Callable[[Request, Faults], Rejection | None]


def faults_only(request: Request, faults: Faults) -> Rejection | None:
    """No checks of the protocol's own: only the injected handshake faults."""
    return faults.admit()


def faults_then(check: Callable[[Request], Rejection | None]) -> Refuse:
    """The handshake faults first, then the protocol's own ``check``."""

    def refuse(request: Request, faults: Faults) -> Rejection | None:
        return faults.admit() or check(request)

    return refuse


class Conversation(Protocol):
    """A fake server's pure protocol object as the kit drives it: client messages in, with their
    arrival times; ``tick`` at ``wake_at`` for what the wall clock makes due (a reply generated
    on while the client sends nothing)."""

    def receive(self, message: Data, now: float | None = None) -> list[Action]: ...

    def tick(self, now: float) -> list[Action]: ...

    def wake_at(self) -> float | None: ...


class Untimed:
    """A protocol paced by its input alone (Moshi's servers make one frame per frame heard)."""

    def __init__(self, receive: Callable[[Data], list[Action]]) -> None:
        self._receive = receive

    def receive(self, message: Data, now: float | None = None) -> list[Action]:
        return self._receive(message)

    def tick(self, now: float) -> list[Action]:
        return []

    def wake_at(self) -> float | None:
        return None


@dataclass(frozen=True)
class Session:
    """One accepted connection: what the server sends first, then the conversation."""

    conversation: Conversation
    opening: Sequence[Action] = ()
    headers: Mapping[str, str] = field(default_factory=dict)  # HTTP/2: the 200 response's
    takes_turn: bool = True  # False: turned away at once, before any lock or opening delay
    ended: Callable[[], None] = lambda: None  # called once the connection is over

    @classmethod
    def turned_away(cls, code: int, reason: str) -> Session:
        """A connection closed as soon as it is open."""
        return cls(Untimed(lambda message: []), [Close(code, reason)], takes_turn=False)


@dataclass(frozen=True)
class WebSocketFake:
    """A fake served over WebSocket (ws://, or wss:// with a certificate)."""

    accept: Callable[[Request], Session]
    path: str = ""  # the path in the server's URL
    refuse: Refuse = faults_only
    exclusive: bool = False  # one conversation at a time: later connections wait their turn
    opening_delay_s: float = 0.0  # work before the opening (a model's system prompts)


@dataclass(frozen=True)
class Http2Fake:
    """A fake served as one long HTTP/2 request stream per connection (cleartext with prior
    knowledge, or TLS with ALPN h2). A Close with code 1000 ends the stream, any other resets
    it."""

    accept: Callable[[Request], Session]
    refuse: Refuse = faults_only


class CallProtocol(Protocol):
    """A fake's pure protocol object for one WebRTC call: the data channel's text both ways,
    the input track's audio in (at the declared rate), the output track's audio out."""

    def open(self) -> list[CallAction]: ...

    def receive_text(self, text: str) -> list[CallAction]: ...

    def receive_audio(self, samples: NDArray[Any]) -> list[CallAction]: ...


@dataclass(frozen=True)
class Offer:
    """An SDP offer, and whatever settings came with it (the protocol's to read)."""

    sdp: str
    settings: dict[str, Any] | None = None


@dataclass(frozen=True)
class WebRTCFake:
    """A fake served as WebRTC calls, signalled by an HTTP POST of an SDP offer to ``path``
    (201, the answer and a ``Location``): one audio track each way and one data channel."""

    path: str
    offer: Callable[[Request], Offer]  # raises ProtocolError for an offer it cannot read
    call: Callable[[str, dict[str, Any] | None], CallProtocol]  # call id, the offer's settings
    channel: str  # the data channel's label
    refuse: Refuse = faults_only
    rate: int = 48000  # the protocol hears and speaks audio at this rate
    call_ids: str = "call"  # calls are named {call_ids}_1, _2, ...
