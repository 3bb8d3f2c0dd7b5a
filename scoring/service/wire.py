"""The scoring service's wire format: pure encoding and strict decoding, no sockets, no pickle.

A request is three zmq frames::

    [b"DSCORE/1", header, samples]
    header  = UTF-8 JSON {"id": str, "scorer": str, "sample_rate": 16000, "dtype": "float32",
                          "shape": [n], "deadline": unix seconds (float)}
    samples = n little-endian float32 samples, 16 kHz mono, in [-1, 1]

A reply is three frames::

    [b"DSCORE/1", header, scores]
    header  = UTF-8 JSON {"id": str, "scorer": str, "ok": bool, "error": str | null,
                          "code": str | null, "retryable": bool, "dimensions": [str, ...],
                          "precision": str | null, "weights": str | null,
                          "version": str | null}
    scores  = len(dimensions) little-endian float32 values when ok, else empty

``precision`` is the numeric precision the worker's scorer computed at (``fp32``, ``bf16`` ...;
null for a scorer without one); ``weights`` the digest of the weights it loaded and ``version``
the version of its code (``duplexsim.core.provenance.ScorerIdentity``). They are optional: older
workers do not send them (read as null).

The deadline is absolute unix time so it means the same on every machine (up to clock skew).
Unknown header fields are ignored, so version 1 can grow optional fields; anything else that is
off (version, JSON, a missing or mistyped field, dtype, sample rate, byte count, total size) is a
``WireError`` naming the problem.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.core import safejson
from duplexsim.scoring.service.errors import RETRYABLE_CODES, WireError

__all__ = [
    "DEFAULT_MAX_AUDIO_S",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DTYPE",
    "MAX_HEADER_BYTES",
    "SAMPLE_RATE",
    "VERSION",
    "Reply",
    "Request",
    "RequestHeader",
    "as_wire_samples",
    "decode_reply",
    "decode_request",
    "encode_reply",
    "encode_request",
    "error_reply",
    "max_message_bytes_for",
    "parse_request_header",
    "request_id_of",
]

VERSION = b"DSCORE/1"
SAMPLE_RATE = 16000
DTYPE = "float32"
_WIRE_DTYPE = np.dtype("<f4")
MAX_HEADER_BYTES = 16 * 1024
MAX_ID_CHARS = 200
# 30 s is what MIRRORING scores; the slack lets a slightly over-long clip reach the worker and get
# a per-item "too long" answer instead of a wire error.
DEFAULT_MAX_AUDIO_S = 40.0


def max_message_bytes_for(max_audio_s: float) -> int:
    """Largest request (all frames) carrying ``max_audio_s`` seconds of audio."""
    return int(max_audio_s * SAMPLE_RATE) * _WIRE_DTYPE.itemsize + MAX_HEADER_BYTES + len(VERSION)


DEFAULT_MAX_MESSAGE_BYTES = max_message_bytes_for(DEFAULT_MAX_AUDIO_S)


@dataclass(frozen=True)
class RequestHeader:
    id: str
    scorer: str
    n_samples: int
    deadline: float  # unix time
    sample_rate: int = SAMPLE_RATE
    dtype: str = DTYPE


@dataclass(frozen=True)
class Request:
    header: RequestHeader
    samples: NDArray[np.float32]

    @classmethod
    def of(cls, request_id: str, scorer: str, samples: Any, deadline: float) -> Request:
        """A request built in memory (no bytes), with the same sample checks as the wire."""
        x = as_wire_samples(samples)
        return cls(RequestHeader(request_id, scorer, int(x.size), float(deadline)), x)


@dataclass(frozen=True)
class Reply:
    id: str
    scorer: str
    ok: bool
    dimensions: tuple[str, ...] = ()
    values: NDArray[np.float32] | None = field(default=None, compare=False)
    error: str | None = None
    code: str | None = None
    retryable: bool = False
    precision: str | None = None
    weights: str | None = None
    version: str | None = None


# ---- requests ---------------------------------------------------------------------------------


def as_wire_samples(samples: Any) -> NDArray[np.float32]:
    """Samples as contiguous little-endian float32, 1-D; WireError for anything else."""
    x = np.asarray(samples)
    if x.ndim != 1:
        raise WireError(f"samples must be mono 1-D, got shape {x.shape}")
    if not np.issubdtype(x.dtype, np.floating):
        raise WireError(f"samples must be floating point in [-1, 1], got {x.dtype}")
    return np.ascontiguousarray(x, dtype=_WIRE_DTYPE)


def encode_request(
    request_id: str,
    scorer: str,
    samples: Any,
    deadline: float,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> list[bytes]:
    x = as_wire_samples(samples)
    header = {
        "id": request_id,
        "scorer": scorer,
        "sample_rate": SAMPLE_RATE,
        "dtype": DTYPE,
        "shape": [int(x.size)],
        "deadline": float(deadline),
    }
    frames = [VERSION, _dump(header), x.tobytes()]
    parse_request_header(frames, max_message_bytes=max_message_bytes)  # one set of rules
    return frames


def parse_request_header(
    frames: Sequence[bytes], *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> RequestHeader:
    """Validate a request completely without decoding its samples (what the broker needs)."""
    _check_envelope(frames, max_message_bytes)
    obj = _load(frames[1])
    header = RequestHeader(
        id=_text(obj, "id"),
        scorer=_text(obj, "scorer"),
        n_samples=_shape(obj),
        deadline=_number(obj, "deadline"),
        sample_rate=_integer(obj, "sample_rate"),
        dtype=_text(obj, "dtype"),
    )
    if header.sample_rate != SAMPLE_RATE:
        raise WireError(f"sample_rate must be {SAMPLE_RATE}, got {header.sample_rate}")
    if header.dtype != DTYPE:
        raise WireError(f"dtype must be '{DTYPE}', got '{header.dtype}'")
    expected = header.n_samples * _WIRE_DTYPE.itemsize
    if len(frames[2]) != expected:
        raise WireError(
            f"shape [{header.n_samples}] needs {expected} sample bytes, got {len(frames[2])}"
        )
    return header


def decode_request(
    frames: Sequence[bytes], *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> Request:
    header = parse_request_header(frames, max_message_bytes=max_message_bytes)
    # a writable copy: scorers may normalise in place
    samples = np.frombuffer(frames[2], dtype=_WIRE_DTYPE).astype(np.float32)
    return Request(header, samples)


def request_id_of(frames: Sequence[bytes]) -> tuple[str, str]:
    """Best-effort (id, scorer) of a request that failed validation, for its error reply."""
    try:
        obj = (
            safejson.loads(frames[1])
            if len(frames) > 1 and len(frames[1]) <= MAX_HEADER_BYTES
            else {}
        )
    except (safejson.JsonError, TypeError):
        return "", ""
    if not isinstance(obj, dict):
        return "", ""
    rid, scorer = obj.get("id"), obj.get("scorer")
    return (
        rid if isinstance(rid, str) and len(rid) <= MAX_ID_CHARS else "",
        scorer if isinstance(scorer, str) and len(scorer) <= MAX_ID_CHARS else "",
    )


# ---- replies ----------------------------------------------------------------------------------


def error_reply(
    request_id: str, scorer: str, code: str, message: str, *, retryable: bool | None = None
) -> Reply:
    return Reply(
        id=request_id,
        scorer=scorer,
        ok=False,
        error=f"{code}: {message}",
        code=code,
        retryable=code in RETRYABLE_CODES if retryable is None else retryable,
    )


def encode_reply(reply: Reply) -> list[bytes]:
    if reply.ok:
        if reply.values is None:
            raise WireError("an ok reply needs values")
        values = np.ascontiguousarray(reply.values, dtype=_WIRE_DTYPE).reshape(-1)
        if values.size != len(reply.dimensions):
            raise WireError(f"{values.size} values for {len(reply.dimensions)} dimensions")
        scores = values.tobytes()
    else:
        scores = b""
    header = {
        "id": reply.id,
        "scorer": reply.scorer,
        "ok": reply.ok,
        "error": reply.error,
        "code": reply.code,
        "retryable": reply.retryable,
        "dimensions": list(reply.dimensions),
        "precision": reply.precision,
        "weights": reply.weights,
        "version": reply.version,
    }
    return [VERSION, _dump(header), scores]


def decode_reply(frames: Sequence[bytes]) -> Reply:
    _check_envelope(frames, max_message_bytes=MAX_HEADER_BYTES * 4)
    obj = _load(frames[1])
    ok = _flag(obj, "ok")
    dims = obj.get("dimensions")
    if not isinstance(dims, list) or not all(isinstance(d, str) for d in dims):
        raise WireError("header field 'dimensions' must be a list of strings")
    error, code = obj.get("error"), obj.get("code")
    if error is not None and not isinstance(error, str):
        raise WireError("header field 'error' must be a string or null")
    if code is not None and not isinstance(code, str):
        raise WireError("header field 'code' must be a string or null")
    precision, weights, version = (
        _optional_text(obj, k) for k in ("precision", "weights", "version")
    )
    values: NDArray[np.float32] | None = None
    if ok:
        if len(frames[2]) != len(dims) * _WIRE_DTYPE.itemsize:
            raise WireError(f"{len(dims)} dimensions need {len(dims) * 4} bytes of scores")
        values = np.frombuffer(frames[2], dtype=_WIRE_DTYPE).astype(np.float32)
    elif frames[2]:
        raise WireError("an error reply carries no scores")
    return Reply(
        id=_text(obj, "id", allow_empty=True),
        scorer=_text(obj, "scorer", allow_empty=True),
        ok=ok,
        dimensions=tuple(dims),
        values=values,
        error=error,
        code=code,
        retryable=_flag(obj, "retryable"),
        precision=precision,
        weights=weights,
        version=version,
    )


# ---- helpers ----------------------------------------------------------------------------------


def _optional_text(obj: dict[str, Any], name: str) -> str | None:
    value = obj.get(name)
    if value is not None and not isinstance(value, str):
        raise WireError(f"header field '{name}' must be a string or null")
    return value


def _check_envelope(frames: Sequence[bytes], max_message_bytes: int) -> None:
    if len(frames) != 3:
        raise WireError(f"expected 3 frames (version, header, payload), got {len(frames)}")
    if frames[0] != VERSION:
        shown = bytes(frames[0][:32])
        raise WireError(f"unsupported wire version {shown!r} (this side speaks {VERSION!r})")
    if len(frames[1]) > MAX_HEADER_BYTES:
        raise WireError(f"header of {len(frames[1])} bytes exceeds {MAX_HEADER_BYTES} bytes")
    total = sum(len(f) for f in frames)
    if total > max_message_bytes:
        seconds = (max_message_bytes - MAX_HEADER_BYTES) / (SAMPLE_RATE * _WIRE_DTYPE.itemsize)
        raise WireError(
            f"message of {total} bytes exceeds the limit of {max_message_bytes} bytes "
            f"(about {seconds:.0f} s of 16 kHz float32 audio)"
        )


def _dump(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()


def _load(raw: bytes) -> dict[str, Any]:
    try:
        obj = safejson.loads(raw)
    except safejson.JsonError as e:
        raise WireError(f"header is not UTF-8 JSON: {e}") from None
    if not isinstance(obj, dict):
        raise WireError(f"header must be a JSON object, got {type(obj).__name__}")
    return obj


def _get(obj: dict[str, Any], name: str) -> Any:
    if name not in obj:
        raise WireError(f"header lacks the field '{name}'")
    return obj[name]


def _text(obj: dict[str, Any], name: str, *, allow_empty: bool = False) -> str:
    value = _get(obj, name)
    if not isinstance(value, str) or (not value and not allow_empty):
        raise WireError(f"header field '{name}' must be a non-empty string")
    if len(value) > MAX_ID_CHARS:
        raise WireError(f"header field '{name}' is longer than {MAX_ID_CHARS} characters")
    return value


def _integer(obj: dict[str, Any], name: str) -> int:
    value = _get(obj, name)
    if type(value) is not int:  # bool is an int subclass; refuse it
        raise WireError(f"header field '{name}' must be an integer")
    return value


def _number(obj: dict[str, Any], name: str) -> float:
    value = _get(obj, name)
    if type(value) not in (int, float) or not math.isfinite(value):
        raise WireError(f"header field '{name}' must be a finite number")
    return float(value)


def _flag(obj: dict[str, Any], name: str) -> bool:
    value = _get(obj, name)
    if not isinstance(value, bool):
        raise WireError(f"header field '{name}' must be true or false")
    return value


def _shape(obj: dict[str, Any]) -> int:
    shape = _get(obj, "shape")
    if not (isinstance(shape, list) and len(shape) == 1 and type(shape[0]) is int):
        raise WireError(f"header field 'shape' must be [n] (mono samples), got {shape!r}")
    if shape[0] < 0:
        raise WireError(f"header field 'shape' must not be negative, got {shape!r}")
    return int(shape[0])
