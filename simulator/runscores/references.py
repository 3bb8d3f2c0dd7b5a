"""References scored once per benchmark and scorer identity, shared by every run on it.

A reference's scores come, in this order, from the manifest's ``reference_scores`` under this
identity's key (``<scorer>@<identity key>``, as ``benchmark build`` writes them), from the
benchmark's reference cache (``duplexsim.runscores.cache.reference_cache_path``), or from scoring it;
what is scored goes into the benchmark's cache for the next run. A run that recorded no benchmark
digest (older runs) shares nothing: its references are scored into its own cache as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.emotions import EMOTION_NAMES
from duplexsim.core.errors import InputError
from duplexsim.core.provenance import BenchmarkId, ScorerIdentity, digest_files
from duplexsim.run.store import read_results
from duplexsim.runscores.cache import EMOTION_HEADS, ScoreCache, manifest_key, reference_cache_path

if TYPE_CHECKING:
    from duplexsim.runscores.score import ClipJob

__all__ = ["References"]

PREFIX = "reference/"


class References:
    def __init__(self, manifest: dict[str, list[float]], shared: ScoreCache | None) -> None:
        self.manifest = manifest  # sample id -> the 12 emotions (EMOTIONS order)
        self.shared = shared
        self.dirty = False

    @classmethod
    def for_run(cls, run_dir: Path, identity: ScorerIdentity, *, fresh: bool) -> References:
        meta, _ = read_results(run_dir)
        bench = BenchmarkId.from_meta(meta.get("benchmark"))
        if bench.digest is None or not identity.known:
            return cls({}, None)
        shared = ScoreCache(reference_cache_path(bench.digest, identity), identity, fresh=fresh)
        manifest = {} if fresh else _manifest_scores(bench, identity)
        return cls(manifest, shared)

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
        if self.shared is not None and job.key.startswith(PREFIX):
            self.shared.put(job.key, job.digest, dimensions, values)
            self.dirty = True

    def save(self) -> None:
        if self.shared is not None and self.dirty:
            self.shared.save()


def _manifest_scores(bench: BenchmarkId, identity: ScorerIdentity) -> dict[str, list[float]]:
    """The manifest's reference scores made by ``identity``, if the manifest is still the one
    the run was made on (its digest as recorded)."""
    path = Path(bench.path)
    try:
        if bench.manifest is None or digest_files([("manifest", path)]) != bench.manifest:
            return {}
        loaded = load_benchmark(path, audio_check="none")
    except (OSError, InputError):
        return {}  # moved or changed since: the benchmark's cache still serves
    key = manifest_key(identity)
    found: dict[str, list[float]] = {}
    for sample in loaded:
        scores = sample.reference_scores.get(key)
        if scores is not None and all(e in scores for e in EMOTION_NAMES):
            found[sample.id] = [scores[e] for e in EMOTION_NAMES]
    return found
