"""Live progress of a run on stderr: a rewritten line on a terminal, else a line every 10 s."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    def __init__(
        self, label: str, total: int, *, stream: TextIO | None = None, quiet: bool = False
    ) -> None:
        self.label = label
        self.total = total
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = self.stream.isatty()
        self.in_flight = self.done = self.failed = self.retries = 0
        self.window: int | None = None  # sessions at once admission allows now
        self.started = time.monotonic()
        self._last_line = 0.0

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        finished = self.done + self.failed
        eta = "?"
        if finished:
            remaining = (self.total - finished) * elapsed / finished
            eta = f"{remaining:.0f}s"
        window = "" if self.window is None else f" of {self.window}"
        return (
            f"{self.label}: {finished}/{self.total} | in flight {self.in_flight}{window} | "
            f"done {self.done} | failed {self.failed} | retries {self.retries} | "
            f"{elapsed:.0f}s elapsed | ETA {eta}"
        )

    def update(self, *, force: bool = False) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        interval = 0.25 if self.tty else 10.0
        if not force and now - self._last_line < interval:
            return
        self._last_line = now
        if self.tty:
            self.stream.write("\r\x1b[2K" + self.line())
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r\x1b[2K" + self.line() + "\n")
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()
