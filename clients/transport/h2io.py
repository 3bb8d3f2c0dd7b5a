"""One HTTP/2 connection carrying one long request stream, for the client and the fake alike.

``H2Peer`` is an asyncio protocol around an ``h2`` connection (the sans-I/O HTTP/2 state
machine): bytes read are stamped with ``clock`` when they arrive and handed to the owner with the
h2 events they make; bytes to send on the stream wait in a queue until flow control lets them
out, in frames no bigger than the peer allows. Received data is acknowledged at once and the
receive windows are opened wide: a reader that falls behind must never slow the sender, which
would skew arrival times.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable
from typing import Any

from duplexsim.core.errors import ProtocolError
from duplexsim.core.extras import missing_extra

try:
    from h2.config import H2Configuration
    from h2.connection import H2Connection
    from h2.events import (
        ConnectionTerminated,
        DataReceived,
        Event,
        InformationalResponseReceived,
        PingAckReceived,
        RequestReceived,
        ResponseReceived,
        StreamEnded,
        StreamReset,
        WindowUpdated,
    )
    from h2.exceptions import H2Error
    from h2.settings import SettingCodes
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise missing_extra(exc, "the nova-sonic protocol") or exc from None

__all__ = [  # the h2 events the client and the fake use come from here, with the import check
    "WINDOW",
    "ConnectionTerminated",
    "DataReceived",
    "Event",
    "H2Peer",
    "InformationalResponseReceived",
    "PingAckReceived",
    "RequestReceived",
    "ResponseReceived",
    "StreamEnded",
    "StreamReset",
    "is_broken",
    "response_head",
]

WINDOW = 2**24  # receive window, per stream and for the connection
_FINAL = re.compile(r"[2-5][0-9][0-9]")
_INFORMATIONAL = re.compile(r"1[0-9][0-9]")  # h2 takes any status starting with "1" for one


class H2Peer(asyncio.Protocol):
    def __init__(
        self,
        *,
        client_side: bool,
        on_events: Callable[[list[Event], float], None],
        clock: Callable[[], float],
    ) -> None:
        self.conn = H2Connection(H2Configuration(client_side=client_side, header_encoding="utf-8"))
        self._on_events = on_events
        self._clock = clock
        self.transport: asyncio.Transport | None = None
        self.closed = asyncio.get_running_loop().create_future()
        self._queues: dict[int, bytearray] = {}
        self._ending: set[int] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.conn.initiate_connection()
        self.conn.update_settings({SettingCodes.INITIAL_WINDOW_SIZE: WINDOW})
        self.conn.increment_flow_control_window(WINDOW - 65535)
        self.flush()

    def data_received(self, data: bytes) -> None:
        arrival = self._clock()
        try:
            events = self.conn.receive_data(data)
        # h2 decodes header bytes with the configured codec and lets its error through
        except (H2Error, UnicodeDecodeError) as exc:
            self._on_events([_Broken(str(exc))], arrival)
            self.abort()
            return
        for ev in events:
            if isinstance(ev, DataReceived) and ev.flow_controlled_length:
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            if isinstance(ev, WindowUpdated):
                self._drain()
        self._on_events(events, arrival)
        self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def send(self, stream_id: int, data: bytes, *, end: bool = False) -> None:
        """Queue ``data`` on the stream (and the stream's end); sent as the window allows."""
        self._queues.setdefault(stream_id, bytearray()).extend(data)
        if end:
            self._ending.add(stream_id)
        self._drain()
        self.flush()

    def queued(self, stream_id: int) -> int:
        return len(self._queues.get(stream_id, b""))

    def _drain(self) -> None:
        for stream_id, queue in list(self._queues.items()):
            try:
                while queue:
                    room = min(
                        self.conn.local_flow_control_window(stream_id),
                        self.conn.max_outbound_frame_size,
                        len(queue),
                    )
                    if room <= 0:
                        break
                    self.conn.send_data(stream_id, bytes(queue[:room]))
                    del queue[:room]
                if not queue and stream_id in self._ending:
                    self._ending.discard(stream_id)
                    self.conn.end_stream(stream_id)
            except H2Error:
                queue.clear()  # the stream is gone (reset or closed): nothing more goes on it

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class _Broken(Event):
    """Bytes the h2 state machine refused (a peer that does not speak HTTP/2 properly)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"<_Broken {self.reason!r}>"


def is_broken(event: Any) -> str | None:
    return event.reason if isinstance(event, _Broken) else None


def response_head(
    headers: Iterable[tuple[Any, Any]], *, informational: bool = False
) -> tuple[int, dict[str, str]]:
    """A response's status and headers (names lower-case), parsed strictly: h2 checks the
    header block's form, not what ``:status`` holds. ProtocolError unless it is three ASCII
    digits, of a final response (2xx-5xx) or of an ``informational`` one (1xx)."""
    fields = {str(name).lower(): str(value) for name, value in headers}
    status = fields.get(":status", "")
    if not (_INFORMATIONAL if informational else _FINAL).fullmatch(status):
        shown = repr(status[:20]) + ("..." if len(status) > 20 else "")
        raise ProtocolError(f"the server's HTTP/2 response has :status {shown}, not a status")
    return int(status), fields
