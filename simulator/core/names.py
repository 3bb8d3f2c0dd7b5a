"""Names that become file or folder names (run ids, profile names, sample ids): one rule.

A name is 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit, so it can
never be absolute, climb out with '..', hide as a dot-file, or carry a separator or a newline.
"""

from __future__ import annotations

import re

from duplexsim.core.errors import ConfigError

__all__ = ["NAME", "NAME_HINT", "check_name", "is_name"]

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
NAME_HINT = "1-128 letters, digits, '.', '_', '-', starting with a letter or digit"


def is_name(value: object) -> bool:
    # fullmatch: ``$`` in ``re.match`` would also accept a trailing newline
    return isinstance(value, str) and NAME.fullmatch(value) is not None


def check_name(value: str, what: str) -> str:
    """``value`` when it is a safe name; a ConfigError naming ``what`` otherwise."""
    if not is_name(value):
        raise ConfigError(f"{what} {value!r} cannot be a folder name (use {NAME_HINT})")
    return value
