"""One small error hierarchy. ``retryable`` tells the runner's retry policy what it may retry.

DuplexsimError
├── InputError            bad user input: files, manifests, options (never retryable)
│   ├── AudioFileError    an audio file that cannot be used, naming the file and the problem
│   ├── BenchmarkError    every problem of a manifest at once, with line numbers
│   └── ConfigError       a bad setting, profile or missing environment variable
│       └── RunFolderError  a run folder's file that cannot be used (file, line, field)
├── StorageError          a file that cannot be written or read (disk full, read-only), by path
└── SessionError          something went wrong talking to a model
    ├── ConnectError      could not connect or handshake (retryable unless auth)
    ├── ProtocolError     the peer broke the wire protocol (not retryable)
    ├── RemoteError       the peer reported an error (retryable per its code)
    ├── RateLimited       the peer asked us to back off (retryable, with retry_after_s)
    └── Disconnected      the peer went away mid-session (retryable)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "AudioFileError",
    "BenchmarkError",
    "ConfigError",
    "ConnectError",
    "Disconnected",
    "DuplexsimError",
    "InputError",
    "Problem",
    "ProtocolError",
    "RateLimited",
    "RemoteError",
    "RunFolderError",
    "SessionError",
    "StorageError",
]


class DuplexsimError(Exception):
    """Base of every error duplexsim raises on purpose; its message is meant for the user."""

    retryable: bool = False

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class InputError(DuplexsimError):
    """Bad input from the user; fixing the input is the only remedy."""


class AudioFileError(InputError):
    def __init__(self, path: object, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem

    def __reduce__(self) -> tuple[type[AudioFileError], tuple[str, str]]:
        return (type(self), (self.path, self.problem))  # crosses from the worker pool


@dataclass(frozen=True)
class Problem:
    """One problem found in a manifest: where it is and what is wrong."""

    file: str
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        what = f"field '{self.field}': " if self.field else ""
        return f"{where}: {what}{self.message}"


class BenchmarkError(InputError):
    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        count = len(self.problems)
        head = f"{count} problem{'s' if count != 1 else ''} in benchmark"
        super().__init__("\n".join([head, *(f"  {p}" for p in self.problems)]))


class ConfigError(InputError):
    pass


class RunFolderError(ConfigError):
    """A file of a run folder that cannot be used as it is (a path leading out of the folder, a
    FIFO, a file too large, a value out of range); the message names the file, and the line and
    field where there is one. Run folders travel, so this is bad input, never a bug. What the
    message quotes of the files stays on its one line (line breaks shown as ``\\n``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message.replace("\r", "\\r").replace("\n", "\\n"))


class StorageError(DuplexsimError):
    """A file or folder that cannot be written or read: names the path and the cause in one line."""

    def __init__(self, path: object, exc: BaseException | str, doing: str = "write") -> None:
        self.path = str(path)
        self.cause = exc if isinstance(exc, str) else _cause(exc)
        self.doing = doing
        super().__init__(f"{path}: cannot {doing} ({self.cause})")

    def __reduce__(self) -> tuple[type[StorageError], tuple[str, str, str]]:
        # raised in the worker pool, it crosses to the run's process by pickle
        return (type(self), (self.path, self.cause, self.doing))


def _cause(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


class SessionError(DuplexsimError):
    """A failure while talking to a model; ``reason`` is a short machine-readable tag."""

    reason: str = "session"

    def __init__(self, message: str, *, retryable: bool | None = None, reason: str | None = None):
        super().__init__(message, retryable=retryable)
        if reason is not None:
            self.reason = reason


class ConnectError(SessionError):
    retryable = True
    reason = "connect"


class ProtocolError(SessionError):
    reason = "protocol"


class RemoteError(SessionError):
    reason = "remote"


class RateLimited(SessionError):
    retryable = True
    reason = "rate-limited"

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Disconnected(SessionError):
    retryable = True
    reason = "disconnected"
