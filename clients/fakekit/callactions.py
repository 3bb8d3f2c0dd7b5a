"""What a fake's pure protocol object asks of a WebRTC call (``declare.CallProtocol``): an event
on the data channel, audio on the outgoing track, hanging up, or stalling."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numpy.typing import NDArray

from duplexsim.clients.fakekit.serveractions import Stall

__all__ = ["CallAction", "Close", "SendAudio", "SendEvent", "Stall"]


@dataclass(frozen=True)
class SendEvent:
    text: str


@dataclass(frozen=True)
class SendAudio:
    samples: NDArray[Any]  # at the declared rate


@dataclass(frozen=True)
class Close:
    """Hang up."""

    reason: str


CallAction = SendEvent | SendAudio | Close | Stall
