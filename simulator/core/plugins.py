"""Plugins: names that installed packages declare as entry points, and ``module:attr`` names.

A package adds a protocol or a scorer without touching duplexsim by declaring, in its own
pyproject.toml::

    [project.entry-points."duplexsim.protocols"]
    my-proto = "mypkg.client:MyClient"

    [project.entry-points."duplexsim.scorers"]
    my-scorer = "mypkg.scorer:MyScorer"

or a profile names the class itself (``protocol = "mypkg.client:MyClient"``), as ``score
--scorer mypkg.scorer:MyScorer`` does.
"""

from __future__ import annotations

import functools
import importlib
import sys
from importlib import metadata

from duplexsim.core.errors import ConfigError
from duplexsim.core.extras import missing_extra

__all__ = ["PROTOCOLS_GROUP", "SCORERS_GROUP", "is_object_name", "load_object", "plugin_names"]

PROTOCOLS_GROUP = "duplexsim.protocols"
SCORERS_GROUP = "duplexsim.scorers"


def is_object_name(name: str) -> bool:
    """Whether ``name`` is a ``module:attr`` reference rather than a registered name."""
    module, sep, attr = name.partition(":")
    return bool(sep and module and attr) and "/" not in name


def plugin_names(group: str) -> dict[str, str]:
    """name -> ``module:attr`` of every entry point in ``group`` of the installed packages."""
    return dict(_entry_points(group, tuple(sys.path)))


@functools.lru_cache(maxsize=16)
def _entry_points(group: str, path: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    # reading every installed package's metadata takes milliseconds: once per group and search
    # path, never per session on the loop that paces the others (a new path looks again)
    return tuple((ep.name, ep.value) for ep in metadata.entry_points(group=group))


def load_object(spec: str, what: str) -> object:
    """The object ``module:attr`` names (``attr`` may be dotted); ConfigError naming ``what`` when
    it cannot be imported, or MissingExtra when an optional dependency of ours is missing."""
    module, sep, attr = spec.partition(":")
    if not (sep and module and attr):
        raise ConfigError(f"{what}: expected 'module:attribute', got {spec!r}")
    try:
        found: object = importlib.import_module(module)
    except ImportError as exc:
        raise missing_extra(exc, what) or ConfigError(
            f"{what}: cannot import {module} ({type(exc).__name__}: {exc})"
        ) from None
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise ConfigError(f"{what}: {module} has no attribute {attr!r}") from None
    return found
