"""What a number was measured with: the scorer's identity and the run's.

Two scores are comparable only if they come from the same scorer identity: the scorer's name, a
digest of the weights it actually loaded, its precision and the version of its code. Two runs are
comparable only on the same benchmark (a digest of its manifest and audio). Both are written into
every score cache, run and report, so a number always says how it was made.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "ENDPOINTS",
    "NO_WEIGHTS",
    "BenchmarkId",
    "ScorerIdentity",
    "benchmark_id",
    "digest_files",
    "endpoint_kind",
    "is_flagged",
    "model_label",
    "run_label",
    "short_digest",
]

NO_WEIGHTS = "none"  # a scorer that has no weights (a fixed rule), as opposed to unknown ones
_CHUNK = 1 << 20


def short_digest(data: object) -> str:
    """16 hex digits of the SHA-256 of ``data``'s canonical JSON."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def digest_files(paths: Iterable[tuple[str, Path]]) -> str:
    """``sha256:`` and 16 hex digits over (name, contents) of each file, in the given order."""
    h = hashlib.sha256()
    for name, path in paths:
        h.update(name.encode() + b"\0")
        with open(path, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                h.update(chunk)
        h.update(b"\0")
    return "sha256:" + h.hexdigest()[:16]


@dataclass(frozen=True)
class ScorerIdentity:
    """``weights``: ``sha256:...`` of the weights loaded, ``NO_WEIGHTS``, or None when the scorer
    did not say (an older worker or cache); ``version``: of the scorer's code, None likewise."""

    name: str
    weights: str | None
    precision: str | None
    version: str | None

    @property
    def known(self) -> bool:
        """Whether every part was reported (an unknown part never matches anything)."""
        return self.weights is not None and self.version is not None

    @property
    def key(self) -> str:
        return short_digest(asdict(self))

    def matches(self, other: ScorerIdentity | None) -> bool:
        return other is not None and self.known and other.known and self == other

    def label(self) -> str:
        """``name`` (weights ..., precision, vN), for tables and notes."""
        parts = []
        if self.weights != NO_WEIGHTS:
            parts.append(f"weights {self.weights or 'unrecorded'}")
        if self.precision:
            parts.append(self.precision)
        parts.append(f"v{self.version}" if self.version else "version unrecorded")
        return f"{self.name} ({', '.join(parts)})"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "key": self.key}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScorerIdentity:
        def text(name: str) -> str | None:
            value = data.get(name)
            return value if isinstance(value, str) else None

        return cls(str(data.get("name", "")), text("weights"), text("precision"), text("version"))


# ---- runs -------------------------------------------------------------------------------------

# where a run's model really was: a provider's endpoint, one on this machine or network, a fake
# served by duplexsim, or a profile whose URL was replaced on the command line (``--url``)
ENDPOINTS = ("hosted", "local", "fake", "override", "unrecorded")
_FLAGGED = {"fake": "fake", "override": "URL override"}


@dataclass(frozen=True)
class BenchmarkId:
    """``digest``: over the manifest and every audio file it names (None: an older run that did
    not record one); ``path``: where it was read, for people (not part of the identity);
    ``manifest``: a digest of the manifest file alone (to tell whether it changed since)."""

    path: str
    digest: str | None
    samples: int | None = None
    manifest: str | None = None

    @property
    def label(self) -> str:
        name = Path(self.path).name or self.path
        if name == "manifest.jsonl":
            name = Path(self.path).parent.name
        digest = self.digest[:19] if self.digest else "digest unrecorded"
        count = "" if self.samples is None else f", {self.samples} samples"
        return f"{name} ({digest}{count})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_meta(cls, value: object) -> BenchmarkId:
        """From a run's metadata: a dict, or the bare path older runs recorded."""
        if isinstance(value, dict):
            samples = value.get("samples")
            digest, manifest = value.get("digest"), value.get("manifest")
            return cls(
                str(value.get("path", "")),
                digest if isinstance(digest, str) else None,
                samples if isinstance(samples, int) else None,
                manifest if isinstance(manifest, str) else None,
            )
        return cls(str(value or ""), None, None)


def benchmark_id(manifest: Path, audio: Iterable[Path], samples: int) -> BenchmarkId:
    """The identity of a benchmark: a digest over the manifest and the audio files (each once,
    in name order), and one of the manifest alone."""
    files = [("manifest", manifest)]
    files += [(p.name, p) for p in sorted(set(audio), key=lambda p: (p.name, str(p)))]
    return BenchmarkId(
        str(manifest), digest_files(files), samples, digest_files([("manifest", manifest)])
    )


def endpoint_kind(url: str | None, *, fake: bool, overridden: bool) -> str:
    """Where a model really was (see ``ENDPOINTS``)."""
    if fake:
        return "fake"
    if overridden:
        return "override"
    host = (urlsplit(url).hostname or "") if url else ""
    if host in ("localhost", "") or host.endswith(".local"):
        return "local"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "hosted"
    return "local" if address.is_loopback or address.is_private else "hosted"


def model_label(model: Mapping[str, Any]) -> str:
    """A run's model as every output shows it: its name, and a flag when the run did not talk to
    the model the name stands for (a local fake, or its URL replaced with ``--url``)."""
    name = str(model.get("name") or "?")
    where = str(model.get("endpoint") or "unrecorded")
    if where == "unrecorded" and model.get("fake_behaviour"):
        where = "fake"  # runs from before endpoints were recorded
    flag = _FLAGGED.get(where)
    if flag is None:
        return name
    url = model.get("url")
    return f"{name} [{flag}{': ' + str(url) if where == 'override' and url else ''}]"


def is_flagged(model: Mapping[str, Any]) -> bool:
    return model_label(model) != str(model.get("name") or "?")


def run_label(run_id: str, model: Mapping[str, Any]) -> str:
    """A run's id as summaries show it, with its model's flag when it has one."""
    label = model_label(model)
    return f"{run_id} {label[label.index('[') :]}" if is_flagged(model) else run_id
