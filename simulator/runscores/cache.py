"""Score caches: values per clip, tied to the clip's digest, all from one scorer identity.

``scores/<scorer>.json`` in a run directory holds every score of the run (replies and
references), so a run folder reports on its own. A cache is read as one that may have been edited
by hand: an item whose values are not one finite number per dimension is left out and said in
``problems`` (its clip reads as unscored). References are also kept once per benchmark and
scorer identity (``references/<benchmark digest>/<identity key>.json`` under the cache folder:
``$DUPLEXSIM_CACHE``, else ``$XDG_CACHE_HOME/duplexsim``, else ``~/.cache/duplexsim``), so a
second run on a benchmark scores no reference again.

A cache made by another identity (other weights, precision or scorer code) is read as empty when
an identity is asked for; without one (reports) it is taken with the identity it records. Caches
of version 1 recorded only the scorer's name and precision: their identity is unknown, so they are
reported (marked) but always rescored.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.core import safejson
from duplexsim.core.emotions import EMOTIONS
from duplexsim.core.errors import ConfigError, RunFolderError, StorageError
from duplexsim.core.files import write_text_atomic
from duplexsim.core.provenance import ScorerIdentity
from duplexsim.core.runbench import DIGEST
from duplexsim.core.runfolder import MAX_SCORES_BYTES, RunFolder, read_regular
from duplexsim.scoring.models.base import emotion_matrix

__all__ = [
    "CACHE_VERSION",
    "ScoreCache",
    "cache_path",
    "cache_root",
    "manifest_key",
    "reference_cache_path",
]

CACHE_VERSION = 2
EMOTION_HEADS = [e.head for e in EMOTIONS]
MAX_DIMENSIONS = 4096
MAX_SCORE = 1e9  # no scorer's value is larger; anything past it is not a score


def cache_path(run: RunFolder | Path, scorer: str) -> Path:
    """The run's cache of ``scorer``'s scores, checked to lie inside the run folder."""
    return RunFolder.of(run).scores_path(scorer)


def cache_root() -> Path:
    env = os.environ.get("DUPLEXSIM_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "duplexsim"


def reference_cache_path(benchmark_digest: str, identity: ScorerIdentity) -> Path:
    """The shared cache of a benchmark's references: only ever for a digest that was checked
    against the benchmark's files (``RunBenchmark.verified_digest``), and never a path."""
    if not DIGEST.fullmatch(benchmark_digest):
        raise ConfigError(f"benchmark digest {benchmark_digest[:80]!r} is not a digest")
    safe = benchmark_digest.replace(":", "-")
    return cache_root() / "references" / safe / f"{identity.name}-{identity.key}.json"


def manifest_key(identity: ScorerIdentity) -> str:
    """The key under a manifest's ``reference_scores`` whose scores this identity made."""
    return f"{identity.name}@{identity.key}"


class ScoreCache:
    def __init__(self, path: Path, identity: ScorerIdentity | str, *, fresh: bool = False) -> None:
        """``identity``: the one asked for (a cache of another reads as empty), or a scorer's
        name (read whatever it holds). ``fresh``: ignore what is there (``--rescore``)."""
        self.path = path
        self.wanted = identity if isinstance(identity, ScorerIdentity) else None
        name = identity.name if isinstance(identity, ScorerIdentity) else identity
        self.identity: ScorerIdentity = self.wanted or ScorerIdentity(name, None, None, None)
        self.dimensions: list[str] = []
        self.items: dict[str, dict[str, Any]] = {}
        self.problems: dict[str, str] = {}  # key -> why its cached item is left out
        if os.path.lexists(path) and not fresh:
            self._load()

    @property
    def scorer(self) -> str:
        return self.identity.name

    def _load(self) -> None:
        try:
            data = safejson.loads(read_regular(self.path, MAX_SCORES_BYTES))
            recorded = _recorded_identity(data)
            if recorded is None or recorded.name != self.identity.name:
                return  # stale format or another scorer: start afresh
            dimensions = _names(data.get("dimensions"), "dimensions")
            items = data.get("items")
            if not isinstance(items, dict):
                raise ValueError("field 'items' is not an object")
        except (RunFolderError, ValueError, TypeError, KeyError) as exc:
            why = str(exc).removeprefix(f"{self.path}: ")
            raise ConfigError(
                f"{self.path}: unreadable score cache ({why}); delete it to rescore"
            ) from None
        if self.wanted is not None and not self.wanted.matches(recorded):
            return  # other weights, precision or code: start afresh
        self.identity = recorded
        self.dimensions = dimensions
        for key, item in items.items():
            problem = _item_problem(item, dimensions)
            if problem is None:
                self.items[key] = item
            else:
                self.problems[key] = problem

    def get(self, key: str, digest: str) -> list[float] | None:
        item = self.items.get(key)
        if item is None or item.get("digest") != digest:
            return None
        values: list[float] = item["values"]
        return values

    def put(
        self,
        key: str,
        digest: str,
        dimensions: Sequence[str],
        values: Sequence[float],
        source: str | None = None,
    ) -> None:
        """One clip's values; ``dimensions`` other than the cache's are kept with the item (a
        reference's 12 emotions from a manifest beside a scorer's own dimensions)."""
        if not self.dimensions:
            self.dimensions = list(dimensions)
        item: dict[str, Any] = {"digest": digest, "values": [float(v) for v in values]}
        if list(dimensions) != self.dimensions:
            item["dimensions"] = list(dimensions)
        if source:
            item["source"] = source
        self.items[key] = item

    def save(self) -> None:
        """Write the cache; a read-only or full disk is a StorageError naming the file."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(self.path.parent, exc, "create") from None
        data = {
            "version": CACHE_VERSION,
            "scorer": self.identity.name,
            "identity": self.identity.to_dict(),
            "dimensions": self.dimensions,
            "items": self.items,
        }
        write_text_atomic(self.path, json.dumps(data))

    def vector(self, key: str) -> list[float] | None:
        item = self.items.get(key)
        return None if item is None else list(item["values"])

    def dimensions_of(self, key: str) -> list[str]:
        """The dimensions of one item's values (its own where it keeps them)."""
        item = self.items.get(key, {})
        return list(item.get("dimensions", self.dimensions))

    def emotions(self, key: str) -> NDArray[np.float64] | None:
        """The 12 MIRRORING emotions' values of one clip, in ``EMOTIONS`` order (None: not
        cached, or its dimensions lack some of them: said in ``problems``)."""
        item = self.items.get(key)
        if item is None:
            return None
        dims = item.get("dimensions", self.dimensions)
        if not _has_emotions(dims):
            self.problems.setdefault(key, "its dimensions lack the 12 emotions")
            return None
        row: NDArray[np.float64] = emotion_matrix(np.asarray([item["values"]], np.float32), dims)[0]
        return row

    def speaker_emotions(
        self, keys: Sequence[str], normalise: Normaliser | None
    ) -> dict[str, NDArray[np.float64]]:
        """The 12 emotions of the clips ``keys`` (those cached), taken as one speaker's clips:
        ``normalise`` (the scorer's ``speaker_normalise``) sees all of them at once. Items kept
        with other dimensions (a manifest's 12 emotions) are used as they are."""
        found = [k for k in keys if k in self.items]
        own = [k for k in found if "dimensions" not in self.items[k]]
        if own and not _has_emotions(self.dimensions):
            for k in own:
                self.problems.setdefault(k, "its dimensions lack the 12 emotions")
            found, own = [k for k in found if k not in own], []
        out = {k: e for k in found if k not in own and (e := self.emotions(k)) is not None}
        if own:
            rows = np.asarray([self.items[k]["values"] for k in own], np.float32)
            if normalise is not None:
                rows = normalise(rows, self.dimensions)
            for k, row in zip(own, emotion_matrix(rows, self.dimensions), strict=True):
                out[k] = row
        return out


Normaliser = Callable[[NDArray[np.float32], Sequence[str]], NDArray[np.float32]]


def _recorded_identity(data: object) -> ScorerIdentity | None:
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    version = data.get("version")
    if version == 1:  # name and precision only: the weights and code are unknown
        precision = data.get("precision")
        return ScorerIdentity(
            str(data["scorer"]), None, precision if isinstance(precision, str) else None, None
        )
    if version != CACHE_VERSION or not isinstance(data.get("identity"), dict):
        return None
    return ScorerIdentity.from_dict(data["identity"])


def _names(value: object, field: str) -> list[str]:
    if (
        not isinstance(value, list)
        or len(value) > MAX_DIMENSIONS
        or not all(isinstance(v, str) for v in value)
    ):
        raise ValueError(f"field '{field}' is not a list of at most {MAX_DIMENSIONS} names")
    return list(value)


def _item_problem(item: object, dimensions: list[str]) -> str | None:
    """Why a cached item cannot be used (None: it can): its values must be finite numbers, one
    for each of its dimensions (its own, or the cache's)."""
    if not isinstance(item, dict):
        return "not a JSON object"
    if not isinstance(item.get("digest"), str):
        return "field 'digest' is not a string"
    if not isinstance(item.get("source", ""), str):
        return "field 'source' is not a string"
    dims = dimensions
    if "dimensions" in item:
        try:
            dims = _names(item["dimensions"], "dimensions")
        except ValueError as exc:
            return str(exc)
    values = item.get("values")
    if not isinstance(values, list) or not all(_score(v) for v in values):
        return f"field 'values' is not a list of finite numbers up to {MAX_SCORE:g}"
    if len(values) != len(dims):
        return f"field 'values': {len(values)} values for {len(dims)} dimensions"
    return None


def _score(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and abs(value) <= MAX_SCORE
    )


def _has_emotions(dimensions: Sequence[str]) -> bool:
    return set(EMOTION_HEADS) <= set(dimensions)
