"""The benchmark a run says it was made on, checked against the benchmark's own files before
anything the run says about it is believed.

A run records its benchmark (the manifest's path and a digest of the manifest and its audio) and,
in each session's meta.json, the paths of the sample's context and reference. A run folder from
elsewhere could name any file there, so a session's audio path is used only when it is a file the
run's benchmark names (the manifest, loaded as ``benchmark`` loads it, keeps its audio inside its
folder), unless ``--allow-outside-paths``. And a run's claim to a digest is believed only when
the benchmark's files digest to it: only then are its references shared with other runs on that
benchmark (``duplexsim.runscores.references``).
"""

from __future__ import annotations

import os
import re
import stat
from functools import cached_property
from pathlib import Path
from typing import Any

from duplexsim.core.benchmark import Benchmark, Sample, load_benchmark, resolve_manifest
from duplexsim.core.errors import InputError, RunFolderError
from duplexsim.core.provenance import BenchmarkId, benchmark_id
from duplexsim.core.runfolder import RunFolder

__all__ = ["DIGEST", "RunBenchmark"]

DIGEST = re.compile(r"sha256:[0-9a-f]{16}")  # as ``provenance.digest_files`` writes them
MAX_MANIFEST_BYTES = 256 << 20
MAX_AUDIO_BYTES = 2 << 30


class RunBenchmark:
    """The benchmark of one run: ``claimed`` as the run recorded it."""

    def __init__(self, run: RunFolder, meta: dict[str, Any]) -> None:
        self.run = run
        self.claimed = BenchmarkId.from_meta(meta.get("benchmark"))

    @cached_property
    def _loaded(self) -> tuple[Benchmark | None, str | None]:
        """The run's benchmark as its manifest reads now, or why it cannot be read."""
        if not self.claimed.path:
            return None, "the run records no benchmark"
        try:
            manifest = resolve_manifest(self.claimed.path)
            info = os.stat(manifest)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_MANIFEST_BYTES:
                return None, f"{manifest} is not a manifest file"
            bench = load_benchmark(
                manifest, audio_check="none", allow_outside=self.run.allow_outside
            )
        except (OSError, InputError) as exc:
            return None, f"its manifest {self.claimed.path} cannot be read ({_first_line(exc)})"
        return bench, None

    @property
    def benchmark(self) -> Benchmark | None:
        return self._loaded[0]

    @cached_property
    def _audio(self) -> dict[Path, Sample]:
        bench = self.benchmark
        if bench is None:
            return {}
        return {p.resolve(): s for s in bench for p in s.audio}

    def audio(self, value: str | None, where: str) -> Path | None:
        """A session's context, reference or partner clip path (``value``, from its meta.json
        at ``where``), if it is a file of the run's benchmark (any file with
        ``--allow-outside-paths``)."""
        if value is None:
            return None
        if "\x00" in value:
            raise RunFolderError(f"{where}: the path holds a NUL character")
        path = Path(value)
        if self.run.allow_outside:
            return path
        if path.is_absolute() and path.resolve() in self._audio:
            return path
        why = self._loaded[1] or f"not a file of the run's benchmark {self.claimed.path}"
        raise RunFolderError(
            f"{where}: {value}: {why}; a run folder's paths are read only inside it or its "
            "benchmark (--allow-outside-paths permits this)"
        )

    def sample(self, sample_id: str) -> Sample | None:
        bench = self.benchmark
        return None if bench is None else next((s for s in bench if s.id == sample_id), None)

    @cached_property
    def verified_digest(self) -> str | None:
        """The run's benchmark digest if the benchmark's files digest to it now; None if the run
        records none, claims one that is no digest, or its benchmark is gone or changed."""
        digest, bench = self.claimed.digest, self.benchmark
        if digest is None or not DIGEST.fullmatch(digest) or bench is None:
            return None
        audio = [p for s in bench for p in s.audio]  # as the run digested them
        try:
            if not all(_hashable(p) for p in [bench.manifest, *audio]):
                return None
            actual = benchmark_id(bench.manifest, audio, len(bench)).digest
        except OSError:
            return None
        return digest if actual == digest else None


def _hashable(path: Path) -> bool:
    """A regular file of a size audio can have: a FIFO would block the digest, a sparse file of
    many gigabytes would take minutes to hash."""
    info = os.stat(path)
    return stat.S_ISREG(info.st_mode) and info.st_size <= MAX_AUDIO_BYTES


def _first_line(exc: BaseException) -> str:
    problems = getattr(exc, "problems", None)
    if problems:
        return str(problems[0])
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
