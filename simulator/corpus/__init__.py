"""Building MIRRORING-style benchmarks from two-speaker call recordings, and the mirroring
validation analysis (docs/benchmark-build.md)."""

from duplexsim.corpus.builder import BuildOptions, BuildResult, build_benchmark
from duplexsim.corpus.validate import Mirroring, ValidateOptions, validate_calls

__all__ = [
    "BuildOptions",
    "BuildResult",
    "Mirroring",
    "ValidateOptions",
    "build_benchmark",
    "validate_calls",
]
