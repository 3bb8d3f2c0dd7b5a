"""Waits on a condition, never a fixed sleep: a loaded machine only makes them wait longer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

POLL_S = 0.01


def wait_until(
    condition: Callable[[], object], timeout_s: float = 10.0, what: str = "condition"
) -> None:
    """Return once ``condition()`` is true; an AssertionError naming ``what`` after ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(POLL_S)


async def async_wait_until(
    condition: Callable[[], object], timeout_s: float = 10.0, what: str = "condition"
) -> None:
    """``wait_until`` inside a running loop: the loop runs on while it waits."""
    end = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(POLL_S)
