"""Numeric precision of the scorers that have one: the names, and the default for a device.

CUDA defaults to bf16. A CPU defaults to bf16 when it has native bf16 matrix instructions
(AMX-BF16 or AVX512-BF16), where bf16 scores 2.5-2.9x faster than fp32 (``docs/scorers.md``) and
CPU and GPU workers of one scoring service then compute at the same precision; any other CPU
defaults to fp32. No torch import here, so the command line can use it cheaply.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

__all__ = [
    "NATIVE_BF16_FLAGS",
    "PRECISIONS",
    "cpu_has_native_bf16",
    "default_precision",
    "native_bf16",
]

PRECISIONS = ("fp32", "bf16", "fp16")
NATIVE_BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})  # Linux /proc/cpuinfo flag names
CPUINFO = Path("/proc/cpuinfo")


def native_bf16(flags: str) -> bool:
    """Whether CPU flags (the value of a ``/proc/cpuinfo`` ``flags`` line) include native bf16
    matrix support."""
    return not NATIVE_BF16_FLAGS.isdisjoint(flags.split())


@functools.cache
def cpu_has_native_bf16() -> bool:
    """This machine's CPU, read once from ``/proc/cpuinfo``; False off Linux or if unreadable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        text = CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return native_bf16(value)
    return False


def default_precision(device_type: str) -> str:
    """The precision a scorer runs at on ``device_type`` (``cpu``, ``cuda`` ...) unless told."""
    if device_type == "cpu":
        return "bf16" if cpu_has_native_bf16() else "fp32"
    return "bf16"
