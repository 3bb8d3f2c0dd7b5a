"""Broker <-> worker frames: pure encoding and decoding of the backend protocol.

Every message starts with the wire version and a verb (the DEALER's routing id is added and
removed by zmq)::

    worker -> broker  [VERSION, b"READY", JSON {"scorers": [str], "capacity": int, "heartbeat_s": s}]
                      [VERSION, b"HEARTBEAT"]
                      [VERSION, b"DONE", token, <reply frames>]
                      [VERSION, b"DRAIN"]   stop sending me work; I finish what I hold
                      [VERSION, b"BYE"]     I am leaving; re-queue anything I still hold
    broker -> worker  [VERSION, b"WORK", token, <request frames>]
                      [VERSION, b"HEARTBEAT"]
                      [VERSION, b"RESET"]   I do not know you (declared dead?): send READY again

``token`` is the broker's own id for one accepted request; the worker echoes it untouched.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from duplexsim.core import safejson
from duplexsim.scoring.service.errors import WireError
from duplexsim.scoring.service.wire import VERSION

__all__ = [
    "Bye",
    "ControlMessage",
    "Done",
    "Drain",
    "Heartbeat",
    "Ready",
    "Reset",
    "Work",
    "encode",
    "parse",
]


@dataclass(frozen=True)
class Ready:
    scorers: tuple[str, ...]
    capacity: int
    heartbeat_s: float


@dataclass(frozen=True)
class Heartbeat:
    pass


@dataclass(frozen=True)
class Work:
    token: bytes
    request: list[bytes]


@dataclass(frozen=True)
class Done:
    token: bytes
    reply: list[bytes]


@dataclass(frozen=True)
class Drain:
    pass


@dataclass(frozen=True)
class Bye:
    pass


@dataclass(frozen=True)
class Reset:
    pass


ControlMessage = Ready | Heartbeat | Work | Done | Drain | Bye | Reset

_VERBS: dict[type, bytes] = {
    Ready: b"READY",
    Heartbeat: b"HEARTBEAT",
    Work: b"WORK",
    Done: b"DONE",
    Drain: b"DRAIN",
    Bye: b"BYE",
    Reset: b"RESET",
}


def encode(msg: ControlMessage) -> list[bytes]:
    head = [VERSION, _VERBS[type(msg)]]
    if isinstance(msg, Ready):
        body = {
            "scorers": list(msg.scorers),
            "capacity": msg.capacity,
            "heartbeat_s": msg.heartbeat_s,
        }
        return [*head, json.dumps(body).encode()]
    if isinstance(msg, Work):
        return [*head, msg.token, *msg.request]
    if isinstance(msg, Done):
        return [*head, msg.token, *msg.reply]
    return head


def parse(frames: Sequence[bytes]) -> ControlMessage:
    if len(frames) < 2:
        raise WireError(f"control message of {len(frames)} frame(s) is too short")
    if frames[0] != VERSION:
        raise WireError(f"unsupported wire version {bytes(frames[0][:32])!r}")
    verb, rest = bytes(frames[1]), [bytes(f) for f in frames[2:]]
    if verb == b"READY" and len(rest) == 1:
        return _ready(rest[0])
    if verb in (b"WORK", b"DONE") and len(rest) >= 1:
        return (Work if verb == b"WORK" else Done)(rest[0], rest[1:])
    simple: dict[bytes, ControlMessage] = {
        b"HEARTBEAT": Heartbeat(),
        b"DRAIN": Drain(),
        b"BYE": Bye(),
        b"RESET": Reset(),
    }
    if verb in simple and not rest:
        return simple[verb]
    raise WireError(f"bad control message {verb[:32]!r} with {len(rest)} extra frame(s)")


def _ready(raw: bytes) -> Ready:
    try:
        obj: Any = safejson.loads(raw)
    except safejson.JsonError as e:
        raise WireError(f"READY body is not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise WireError("READY body must be a JSON object")
    scorers: Any = obj.get("scorers")
    capacity: Any = obj.get("capacity")
    beat: Any = obj.get("heartbeat_s")
    if not (isinstance(scorers, list) and scorers and all(isinstance(s, str) for s in scorers)):
        raise WireError("READY 'scorers' must be a non-empty list of names")
    if type(capacity) is not int or capacity < 1:
        raise WireError("READY 'capacity' must be a positive integer")
    if type(beat) not in (int, float) or not math.isfinite(beat) or beat <= 0:
        raise WireError("READY 'heartbeat_s' must be a positive number")
    return Ready(tuple(scorers), capacity, float(beat))
