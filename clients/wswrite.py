"""Writing one whole WebSocket message straight to the socket, for clients and fakes alike.

websockets' ``send`` enters an async context manager and awaits a drain for every message; at
tens of thousands of audio frames a second that overhead is most of a frame's cost. When nothing
stands in the way (the connection is open, no fragmented send is under way, writing is not
paused) the frame is serialized and handed to the transport at once; otherwise ``send`` runs.
"""

from __future__ import annotations

from websockets.asyncio.connection import Connection
from websockets.protocol import State

__all__ = ["send_message", "try_write"]


def try_write(connection: Connection, message: str | bytes) -> bool:
    """Write one whole message at once if nothing stands in its way; False if something does
    (then ``send`` must carry it)."""
    if (
        connection.send_in_progress is not None
        or connection.paused
        or connection.protocol.state is not State.OPEN
    ):
        return False
    if isinstance(message, str):
        connection.protocol.send_text(message.encode())
    else:
        connection.protocol.send_binary(message)
    connection.send_data()
    return True


async def send_message(connection: Connection, message: str | bytes) -> None:
    """``connection.send(message)`` for one whole message; raises ConnectionClosed like it."""
    if not try_write(connection, message):
        await connection.send(message)
