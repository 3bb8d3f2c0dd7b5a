"""Hypothesis strategies for bytes from a hostile or broken peer: random and mutated messages,
deep nesting, huge numbers, wrong types. Shared by the decoder property tests."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

HUGE = "9" * 5000  # past Python's 4300-digit limit for int(str)
_HUGE_MARK = "\x00huge\x00"
_DEEP_MARK = "\x00deep\x00"


def deep(n: int, kind: str = "[") -> str:
    if kind == "[":
        return "[" * n + "]" * n
    return '{"a":' * n + "1" + "}" * n


def json_values(keys: tuple[str, ...] = ()) -> st.SearchStrategy[Any]:
    """Any JSON value, keys drawn partly from ``keys`` so mutations hit real field names."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
        st.sampled_from(["", "audio/pcm;rate=0", "audio/pcm;rate=²", "AAAA", "!!", "1e999"]),
        st.just(_HUGE_MARK),
        st.just(_DEEP_MARK),
    )
    key = st.one_of(st.sampled_from(keys), st.text(max_size=8)) if keys else st.text(max_size=8)
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(key, inner, max_size=4)
        ),
        max_leaves=12,
    )


def dumps(value: Any) -> str:
    """JSON text of ``value`` with the markers turned into a huge integer or deep nesting."""
    text = json.dumps(value)
    return text.replace(json.dumps(_HUGE_MARK), HUGE).replace(json.dumps(_DEEP_MARK), deep(3000))


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def _replace(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        return {**obj, head: _replace(obj[head], rest, value)}
    copy = list(obj)
    copy[head] = _replace(obj[head], rest, value)
    return copy


@st.composite
def mutated(draw: st.DrawFn, examples: list[Any], keys: tuple[str, ...] = ()) -> str:
    """A valid example with one value (at any depth) replaced by any JSON value, or deleted."""
    base = draw(st.sampled_from(examples))
    path = draw(st.sampled_from(_paths(base)))
    if path and draw(st.booleans()) and isinstance(parent := _get(base, path[:-1]), dict):
        smaller = {k: v for k, v in parent.items() if k != path[-1]}
        return dumps(_replace(base, path[:-1], smaller))
    return dumps(_replace(base, path, draw(json_values(keys))))


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        obj = obj[p]
    return obj


def hostile_text(examples: list[Any], keys: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    """Text frames a hostile peer might send."""
    return st.one_of(
        mutated(examples, keys),
        json_values(keys).map(dumps),
        st.text(max_size=40),
        st.sampled_from(
            [
                deep(5000),
                deep(5000, "{"),
                deep(100),
                HUGE,
                "[" + HUGE + "]",
                '{"type": ' + HUGE + "}",
                "NaN",
                '{"a": Infinity}',
                "1e999",
                "",
                "\ud800",
            ]
        ),
    )


def hostile_bytes(examples: list[Any], keys: tuple[str, ...] = ()) -> st.SearchStrategy[bytes]:
    return st.one_of(
        hostile_text(examples, keys).map(lambda t: t.encode("utf-8", "surrogatepass")),
        st.binary(max_size=64),
    )
