"""References scored once per benchmark and scorer identity, shared by every run on it.

A reference's scores come, in this order, from the manifest's ``reference_scores`` under this
identity's key (``<scorer>@<identity key>``, as ``benchmark build`` writes them), from the
benchmark's reference cache (``duplexsim.runscores.cache.reference_cache_path``), or from scoring it;
what is scored goes into the benchmark's cache for the next run.

Only a benchmark whose files digest to what the run recorded is shared with (a run folder from
elsewhere may claim any digest: ``RunBenchmark.verified_digest``), and only a reference clip read
from that benchmark's own file for its sample goes into its cache. A run that recorded no digest
(older runs), or whose benchmark is gone or changed, shares nothing: its references are scored
into its own cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from duplexsim.core.emotions import EMOTION_NAMES
from duplexsim.core.provenance import ScorerIdentity
from duplexsim.core.runbench import RunBenchmark
from duplexsim.runscores.cache import EMOTION_HEADS, ScoreCache, manifest_key, reference_cache_path

if TYPE_CHECKING:
    from duplexsim.runscores.score import ClipJob

__all__ = ["References"]

PREFIX = "reference/"


class References:
    def __init__(
        self,
        manifest: dict[str, list[float]],
        shared: ScoreCache | None,
        paths: dict[str, Path] | None = None,
    ) -> None:
        self.manifest = manifest  # sample id -> the 12 emotions (EMOTIONS order)
        self.shared = shared
        self.paths = paths or {}  # sample id -> its reference file (resolved), as benchmarked
        self.dirty = False

    @classmethod
    def for_run(cls, bench: RunBenchmark, identity: ScorerIdentity, *, fresh: bool) -> References:
        digest = bench.verified_digest
        if digest is None or bench.benchmark is None or not identity.known:
            return cls({}, None)
        shared = ScoreCache(reference_cache_path(digest, identity), identity, fresh=fresh)
        manifest = {} if fresh else _manifest_scores(bench, identity)
        paths = {s.id: s.reference.resolve() for s in bench.benchmark if s.reference is not None}
        return cls(manifest, shared, paths)

    def fill(self, cache: ScoreCache, jobs: Sequence[ClipJob]) -> int:
        """Put the references among ``jobs`` that the benchmark has scores for into ``cache``;
        returns how many."""
        taken = 0
        for job in jobs:
            if not job.key.startswith(PREFIX):
                continue
            sample_id = job.key[len(PREFIX) :]
            if sample_id in self.manifest:
                cache.put(job.key, job.digest, EMOTION_HEADS, self.manifest[sample_id], "manifest")
                taken += 1
            elif self.shared is not None and (v := self.shared.get(job.key, job.digest)):
                dims = self.shared.items[job.key].get("dimensions", self.shared.dimensions)
                cache.put(job.key, job.digest, dims, v, "benchmark cache")
                taken += 1
        return taken

    def put(self, job: ClipJob, dimensions: Sequence[str], values: Sequence[float]) -> None:
        """Share a freshly scored reference, if it was read from the benchmark's own file of
        its sample."""
        if self.shared is None or not job.key.startswith(PREFIX):
            return
        sample_id = job.key[len(PREFIX) :]
        if job.path is None or self.paths.get(sample_id) != job.path.resolve():
            return
        self.shared.put(job.key, job.digest, dimensions, values)
        self.dirty = True

    def save(self) -> None:
        if self.shared is not None and self.dirty:
            self.shared.save()


def _manifest_scores(bench: RunBenchmark, identity: ScorerIdentity) -> dict[str, list[float]]:
    """The manifest's reference scores made by ``identity`` (the benchmark is the one the run
    was made on: its digest was checked)."""
    key = manifest_key(identity)
    found: dict[str, list[float]] = {}
    for sample in bench.benchmark or ():
        scores = sample.reference_scores.get(key)
        if scores is not None and all(e in scores for e in EMOTION_NAMES):
            found[sample.id] = [scores[e] for e in EMOTION_NAMES]
    return found
