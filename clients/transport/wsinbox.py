"""The messages a WebSocket connection has received, whole and stamped, waiting to be taken.

Pure: frames in (websockets' sans-I/O ``Frame`` events), messages out; the connection that owns it
(``duplexsim.clients.transport.wsconn``) reads the clock and moves bytes. Fragments are joined into one message; each
message carries the time its last bytes were read. The inbox is bounded: past ``high`` bytes
waiting, ``full`` says so and the connection stops reading from the socket (backpressure on the
peer) until what is taken brings it under ``low``.
"""

from __future__ import annotations

from collections import deque

from websockets.frames import Frame, Opcode

from duplexsim.core.errors import ProtocolError

__all__ = ["HIGH_WATER", "Inbox", "Message", "decoded"]

Message = str | bytes
HIGH_WATER = 16 * 2**20  # bytes waiting before reading stops (minutes of audio at any rate)


class Inbox:
    """Whole messages as (payload, is text, arrival), oldest first."""

    def __init__(self, high: int = HIGH_WATER, low: int | None = None) -> None:
        if high <= 0:
            raise ValueError("high must be positive")
        self.high = high
        self.low = high // 4 if low is None else low
        self.size = 0  # bytes waiting
        self._messages: deque[tuple[bytes, bool, float]] = deque()
        self._fragments: list[Frame] = []

    def __len__(self) -> int:
        return len(self._messages)

    @property
    def full(self) -> bool:
        return self.size >= self.high

    @property
    def drained(self) -> bool:
        """Under the low-water mark: reading may resume."""
        return self.size <= self.low

    def add(self, frame: Frame, arrival: float) -> bool:
        """A data frame read at ``arrival``; True when it completed a message."""
        self._fragments.append(frame)
        if not frame.fin:
            return False
        frames, self._fragments = self._fragments, []
        data = bytes(frames[0].data) if len(frames) == 1 else b"".join(f.data for f in frames)
        self._messages.append((data, frames[0].opcode is Opcode.TEXT, arrival))
        self.size += len(data)
        return True

    def peek(self) -> tuple[bytes, bool, float]:
        return self._messages[0]

    def pop(self) -> tuple[bytes, bool, float]:
        data, text, arrival = self._messages.popleft()
        self.size -= len(data)
        return data, text, arrival


def decoded(data: bytes, text: bool, decode: bool | None) -> Message:
    """A message as ``recv(decode)`` returns it: None keeps text as str and binary as bytes."""
    if not (text if decode is None else decode):
        return data
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise ProtocolError("a text message is not valid UTF-8") from None
