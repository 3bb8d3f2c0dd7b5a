"""JSON from outside (a model server, a scoring peer, a manifest line) parsed so that only one
error can escape: ``JsonError``, whatever the bytes.

``json.loads`` alone lets several errors through that no caller expects: ``RecursionError`` for
deep nesting, ``ValueError`` for an integer of more than 4300 digits, ``UnicodeDecodeError`` for
bytes. And a document nested a few hundred deep parses, only to blow the stack later in whatever
walks it (``repr``, ``json.dumps``, a recursive check). Here every one of those is a
``JsonError`` with a one-line reason, and nesting deeper than ``MAX_DEPTH`` is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_DEPTH", "JsonError", "loads"]

MAX_DEPTH = 64  # no message or manifest line we read nests deeper than a handful of levels


class JsonError(ValueError):
    """Text that is not JSON we accept; the message says why in one line."""


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def loads(
    data: str | bytes | bytearray | memoryview,
    *,
    max_depth: int = MAX_DEPTH,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
) -> Any:
    """The JSON value in ``data`` (UTF-8 when bytes); JsonError for anything else.

    ``object_pairs_hook`` builds each object, as in ``json``; a JsonError it raises (a
    duplicate key, say) passes through unchanged."""
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    decoder = _DECODER
    if object_pairs_hook is not None:
        decoder = json.JSONDecoder(
            parse_constant=_reject_constant, object_pairs_hook=object_pairs_hook
        )
    try:
        obj = decoder.decode(text)
    except JsonError:
        raise
    except RecursionError:
        raise JsonError(f"nested more than {max_depth} levels deep") from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}" if exc.lineno > 1 else f"column {exc.colno}"
        raise JsonError(f"{exc.msg} ({where})") from None
    except ValueError as exc:  # an integer past the digit limit, NaN or Infinity
        raise JsonError(_first_line(str(exc))) from None
    if depth_exceeds(obj, max_depth):
        raise JsonError(f"nested more than {max_depth} levels deep")
    return obj


def depth_exceeds(obj: Any, max_depth: int) -> bool:
    """Whether containers in ``obj`` nest deeper than ``max_depth`` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "not valid JSON"
    return line if len(line) <= 200 else line[:197] + "..."
