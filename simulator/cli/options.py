"""Options several commands share, spelled one way everywhere: which samples (``--limit``,
``--sample``), model options (``-M key=value``), and old spellings kept working with a warning."""

from __future__ import annotations

import argparse
import fnmatch
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from duplexsim.core.errors import ConfigError
from duplexsim.core.runfolder import RunFolder

__all__ = [
    "add_model_option_argument",
    "add_outside_paths_argument",
    "add_run_paths_argument",
    "add_selection_arguments",
    "deprecated_alias",
    "model_options",
    "run_folder",
    "select_samples",
]


def add_outside_paths_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-outside-paths",
        action="store_true",
        help="let manifest audio paths lead outside the benchmark folder (absolute, '..', symlinks)",
    )


def add_run_paths_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-outside-paths",
        action="store_true",
        help="read the files a run folder names outside itself (absolute, '..', symlinks) and "
        "session audio that is not its benchmark's; only for run folders you trust",
    )


def run_folder(path: Path, args: argparse.Namespace) -> RunFolder:
    """A run folder as a command reads it (``--allow-outside-paths``, where it has it)."""
    return RunFolder(path, allow_outside=bool(getattr(args, "allow_outside_paths", False)))


def add_selection_arguments(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument(
        "--sample",
        action="append",
        default=[],
        metavar="ID",
        help="only samples whose id matches (a glob such as 'en-*'; repeatable)",
    )
    p.add_argument(
        "--limit", type=int, metavar="N", help="only the first N samples (after --sample)"
    )


def select_samples(ids: Sequence[str], patterns: Sequence[str], limit: int | None) -> list[str]:
    """The ids that ``patterns`` match (all without any), in their order, at most ``limit``.

    A pattern that matches nothing is an error: a typo never silently selects fewer samples."""
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(i, pattern) for i in ids):
            raise ConfigError(f"--sample {pattern!r} matches no sample id")
    chosen = [i for i in ids if not patterns or any(fnmatch.fnmatchcase(i, p) for p in patterns)]
    return chosen if limit is None else chosen[:limit]


def add_model_option_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-M",
        "--model-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="model_option",
        help="a model option over the profile's [options] (VALUE read as TOML, else as text; "
        "repeatable), e.g. -M sample_rate=24000",
    )


def model_options(items: Sequence[str], base: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with each ``KEY=VALUE`` of ``items`` set over it."""
    options = dict(base)
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"-M {item!r}: expected KEY=VALUE")
        options[key.strip()] = _value(text)
    return options


def _value(text: str) -> Any:
    """24000 -> int, 0.5 -> float, true -> bool, [1, 2] -> list; anything else is the text."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def deprecated_alias(new: str) -> type[argparse.Action]:
    """An argparse action for an old spelling: stores into the new option's dest and says once,
    on stderr, which spelling to use."""

    class _Alias(argparse.Action):
        def __call__(
            self,
            parser: argparse.ArgumentParser,
            namespace: argparse.Namespace,
            values: str | Sequence[Any] | None,
            option_string: str | None = None,
        ) -> None:
            print(f"duplexsim: {option_string} is deprecated; use {new}", file=sys.stderr)
            setattr(namespace, self.dest, values)

    return _Alias
