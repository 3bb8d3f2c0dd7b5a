"""Score caches: values per clip, tied to the clip's digest, all from one scorer identity.

``scores/<scorer>.json`` in a run directory holds every score of the run (replies and
references), so a run folder reports on its own. References are also kept once per benchmark and
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
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.emotions import EMOTIONS
from duplexsim.core.errors import ConfigError, StorageError
from duplexsim.core.files import write_text_atomic
from duplexsim.core.provenance import ScorerIdentity
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


def cache_path(run_dir: Path, scorer: str) -> Path:
    return run_dir / "scores" / f"{scorer}.json"


def cache_root() -> Path:
    env = os.environ.get("DUPLEXSIM_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "duplexsim"


def reference_cache_path(benchmark_digest: str, identity: ScorerIdentity) -> Path:
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
        if path.exists() and not fresh:
            self._load()

    @property
    def scorer(self) -> str:
        return self.identity.name

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            recorded = _recorded_identity(data)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise ConfigError(
                f"{self.path}: unreadable score cache ({exc}); delete it to rescore"
            ) from None
        if recorded is None or recorded.name != self.identity.name:
            return  # stale format or another scorer: start afresh
        if self.wanted is not None and not self.wanted.matches(recorded):
            return  # other weights, precision or code: start afresh
        self.identity = recorded
        self.dimensions = list(data["dimensions"])
        self.items = dict(data["items"])

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
        """The 12 MIRRORING emotions' values of one clip, in ``EMOTIONS`` order."""
        item = self.items.get(key)
        if item is None:
            return None
        dims = item.get("dimensions", self.dimensions)
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
        out = {k: e for k in found if k not in own and (e := self.emotions(k)) is not None}
        if own:
            rows = np.asarray([self.items[k]["values"] for k in own], np.float32)
            if normalise is not None:
                rows = normalise(rows, self.dimensions)
            for k, row in zip(own, emotion_matrix(rows, self.dimensions), strict=True):
                out[k] = row
        return out


Normaliser = Callable[[NDArray[np.float32], Sequence[str]], NDArray[np.float32]]


def _recorded_identity(data: Mapping[str, Any]) -> ScorerIdentity | None:
    version = data.get("version")
    if version == 1:  # name and precision only: the weights and code are unknown
        precision = data.get("precision")
        return ScorerIdentity(
            str(data["scorer"]), None, precision if isinstance(precision, str) else None, None
        )
    if version != CACHE_VERSION or not isinstance(data.get("identity"), dict):
        return None
    return ScorerIdentity.from_dict(data["identity"])
