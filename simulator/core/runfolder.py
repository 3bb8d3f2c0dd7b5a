"""The one reader of run folders: every file a command reads from a run comes through here.

Run folders travel (a colleague's, a leaderboard's submission, a CI artifact), so nothing in one
is trusted:

- every path taken from its files (a results row's ``bundle``, a sample id) or found in it
  (``sessions/*``, ``results*.sqlite``, ``scores/*.json``) must resolve inside the run folder,
  symlinks included, unless ``allow_outside`` (``--allow-outside-paths``);
- only regular files are opened, with ``O_NONBLOCK`` and checked on the open descriptor, so a
  FIFO or a device never blocks and what was checked is what is read; a file's size is bounded
  before it is read;
- every JSON document goes through ``safejson`` (deep nesting, NaN, huge integers);
- events.jsonl is streamed line by line, with caps on its lines and on what a line may hold
  (``bundle.event_problem``).

Every refusal is a RunFolderError naming the file, and the line and field where there is one.
What a bundle's files may hold is the bundle's owner's (``duplexsim.core.bundle``).
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from duplexsim.core import safejson
from duplexsim.core.bundle import (
    EVENTS,
    META,
    BundleMeta,
    bundle_meta,
    event_problem,
    meta_json,
)
from duplexsim.core.errors import ConfigError, RunFolderError
from duplexsim.core.names import is_name

__all__ = [
    "MAX_EVENTS_BYTES",
    "MAX_EVENT_LINES",
    "MAX_META_BYTES",
    "MAX_SCORES_BYTES",
    "EventLine",
    "RunFolder",
    "open_regular",
    "read_regular",
]

MAX_META_BYTES = 64 << 20  # settings, outcome and up to 1,000,000 characters of error text
MAX_EVENTS_BYTES = 1 << 30  # an hour of 1 ms frames both ways is about 800 MB
MAX_EVENT_LINES = 8_000_000  # an hour of 1 ms frames sent and received, and what else came
MAX_EVENT_LINE_BYTES = 8 << 20  # a transcript of the whole text budget, escaped
MAX_SCORES_BYTES = 256 << 20
_STORE_GLOB = "results*.sqlite"
_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def open_regular(path: Path, max_bytes: int) -> BinaryIO:
    """``path`` opened for reading if it is a regular file of at most ``max_bytes``. Opened
    with O_NONBLOCK (a FIFO or a device would block the open itself) and checked on the open
    descriptor; RunFolderError naming the file otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise RunFolderError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RunFolderError(f"{path}: not a regular file ({_file_kind(info.st_mode)})")
        if info.st_size > max_bytes:
            raise RunFolderError(
                f"{path}: {_size(info.st_size)}, more than such a file can be ({_size(max_bytes)})"
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path, max_bytes: int) -> bytes:
    """The whole of a regular file of at most ``max_bytes`` (see ``open_regular``)."""
    with open_regular(path, max_bytes) as fh:
        size = os.fstat(fh.fileno()).st_size
        try:  # what fstat saw and a byte more (not max_bytes: read() allocates what it is asked)
            data = fh.read(size + 1)
        except OSError as exc:
            raise RunFolderError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > size:
        raise RunFolderError(f"{path}: changed while it was read")
    return data


def _file_kind(mode: int) -> str:
    kinds = {
        stat.S_ISDIR: "a folder",
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    return next((name for test, name in kinds.items() if test(mode)), "not a file")


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


@dataclass(frozen=True)
class EventLine:
    """One line of events.jsonl: the event, or what is wrong with the line."""

    lineno: int
    event: dict[str, Any] | None
    problem: str | None = None


class RunFolder:
    """A run folder, read as something that may come from anywhere (see the module)."""

    def __init__(self, path: Path, *, allow_outside: bool = False) -> None:
        self.path = Path(path)
        self.root = self.path.resolve()
        self.allow_outside = allow_outside

    @classmethod
    def of(cls, run: RunFolder | Path) -> RunFolder:
        return run if isinstance(run, RunFolder) else cls(run)

    def __str__(self) -> str:
        return str(self.path)

    # ---- paths ------------------------------------------------------------------------------

    def inside(self, path: str | Path, what: str) -> Path:
        """``path`` (relative to the run folder, or absolute) as a path to open; RunFolderError
        naming ``what`` if it leads outside the run folder (``..``, absolute, a symlink). The
        path returned is the one given, joined to the run folder: checked resolved, kept as
        written (pages link files relative to themselves)."""
        text = str(path)
        if "\x00" in text:
            raise RunFolderError(f"{what}: the path holds a NUL character")
        full = self.path / self._from_here(Path(path))
        if self.allow_outside:
            return full
        try:
            resolved = full.resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop
            raise RunFolderError(f"{what}: {text}: cannot resolve ({exc})") from None
        if not resolved.is_relative_to(self.root):
            raise RunFolderError(
                f"{what}: {text} leads outside the run folder {self.root} "
                "(--allow-outside-paths permits this)"
            )
        return full

    def _from_here(self, path: Path) -> Path:
        """``path`` relative to the run folder: one this reader gave out is already joined to a
        run folder named relatively (``runs/x``), and is not joined again."""
        mine = self.path.parts
        if not path.is_absolute() and mine and path.parts[: len(mine)] == mine:
            return Path(*path.parts[len(mine) :])
        return path

    def bundle(self, value: str | None, where: str) -> Path | None:
        """A results row's ``bundle`` as a folder to read (None: it records none)."""
        return None if not value else self.inside(value, f"{where}: field 'bundle'")

    def session(self, sample_id: str) -> Path:
        """``sessions/<sample id>``, as a run writes it: a sample id is a name (see
        ``names``), so it never climbs out of ``sessions/``."""
        if not is_name(sample_id):
            raise RunFolderError(
                f"{self.path}: sample id {sample_id[:80]!r} cannot name a session folder"
            )
        return self.inside(Path("sessions") / sample_id, f"session '{sample_id}'")

    def sessions(self) -> list[Path]:
        """Every bundle folder under ``sessions/``, in name order."""
        folder = self.inside("sessions", "sessions")
        if not folder.is_dir():
            raise RunFolderError(f"{self.path}: no recorded sessions (expected {folder})")
        found = []
        for entry in sorted(folder.iterdir()):
            if entry.name.startswith("."):
                continue  # a bundle being written, or an older one being replaced
            if self.is_bundle(self.inside(entry, "sessions")):
                found.append(entry)
        return found

    def file(self, folder: Path, name: str) -> Path | None:
        """``folder/name`` if it is a regular file inside the run folder (None: there is no
        file by that name); RunFolderError if it leads out or is no regular file."""
        path = self.inside(folder / name, str(folder / name))
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise RunFolderError(f"{path}: cannot read ({exc.strerror or exc})") from None
        if not stat.S_ISREG(mode):
            raise RunFolderError(f"{path}: not a regular file ({_file_kind(mode)})")
        return path

    def is_bundle(self, folder: Path) -> bool:
        """Whether ``folder`` holds a bundle's meta.json; RunFolderError when it holds one that
        leads out of the run folder or is no regular file (said, never passed over)."""
        return self.file(folder, META) is not None

    # ---- results and scores -----------------------------------------------------------------

    def store_files(self) -> list[Path]:
        """Every results file, each a regular file inside the run folder, as are SQLite's
        files beside it (its journal and write-ahead log are opened by name)."""
        files = sorted(self.path.glob(_STORE_GLOB))
        if not files:
            raise ConfigError(f"{self.path}: not a run directory (no {_STORE_GLOB})")
        for path in files:
            self.file(self.path, path.name)
            for suffix in _SQLITE_SIDE_FILES:
                self.file(self.path, path.name + suffix)
        return files

    def recorded(self, key: str) -> Any:
        """One value of the run's own record (``run_meta``: its benchmark, model, settings),
        read without writing anything, through the strict JSON reader; None when no results
        file records it. For readers below the store (replay); the store reads all of it."""
        for path in self.store_files():
            uri = f"{path.resolve().as_uri()}?mode=ro"
            try:
                db = sqlite3.connect(uri, uri=True)
                try:
                    row = db.execute("SELECT value FROM run_meta WHERE key = ?", (key,)).fetchone()
                finally:
                    db.close()
            except sqlite3.Error as exc:
                raise RunFolderError(f"{path}: cannot read run results ({exc})") from None
            if row is not None:
                if not isinstance(row[0], str):
                    raise RunFolderError(f"{path}: run_meta {key!r} is not text")
                try:
                    return safejson.loads(row[0])
                except safejson.JsonError as exc:
                    raise RunFolderError(f"{path}: run_meta {key!r}: {exc}") from None
        return None

    def scorers(self) -> list[str]:
        """The scorers whose scores the run keeps (``scores/<scorer>.json``)."""
        folder = self.path / "scores"
        if not folder.is_dir():
            return []
        return sorted(p.stem for p in folder.glob("*.json") if not p.name.startswith("."))

    def scores_path(self, scorer: str) -> Path:
        """Where the run keeps ``scorer``'s scores: checked, as it is written there too."""
        if not scorer or "/" in scorer or "\x00" in scorer or scorer.startswith("."):
            raise RunFolderError(f"{self.path}: scorer name {scorer!r} cannot name a file")
        self.inside("scores", "scores")
        return self.inside(Path("scores") / f"{scorer}.json", f"scores of '{scorer}'")

    def read_json(self, path: Path, max_bytes: int) -> Any:
        """A JSON document of a regular file, through the strict reader."""
        data = read_regular(path, max_bytes)
        try:
            return safejson.loads(data)
        except safejson.JsonError as exc:
            raise RunFolderError(f"{path}: {exc}") from None

    # ---- bundles ------------------------------------------------------------------------------

    def meta_json(self, folder: Path) -> dict[str, Any]:
        """A bundle's meta.json as an object, upgraded (``bundle.meta_json``)."""
        path = self.file(folder, META)
        if path is None:
            raise RunFolderError(f"{folder / META}: not recorded")
        try:
            return meta_json(self.read_json(path, MAX_META_BYTES), str(folder / META))
        except RunFolderError:
            raise
        except ConfigError as exc:
            raise RunFolderError(str(exc)) from None

    def meta(self, folder: Path) -> BundleMeta:
        """A bundle's typed meta.json (``bundle.bundle_meta``)."""
        data = self.meta_json(folder)
        try:
            return bundle_meta(data, str(folder / META))
        except ConfigError as exc:
            raise RunFolderError(str(exc)) from None

    def events(self, folder: Path) -> Iterator[EventLine]:
        """events.jsonl line by line: each line's event, or what is wrong with it (each
        reader decides what a bad line means). RunFolderError when the file itself cannot be
        read: not a regular file, too large, too many lines, a line too long."""
        path = self.file(folder, EVENTS)
        if path is None:
            raise RunFolderError(f"{folder / EVENTS}: not recorded")
        with open_regular(path, MAX_EVENTS_BYTES) as raw:
            yield from _lines(path, raw)

    def strict_events(self, folder: Path) -> Iterator[dict[str, Any]]:
        """Every event of events.jsonl; RunFolderError at the first bad line, naming it."""
        for line in self.events(folder):
            if line.event is None:
                raise RunFolderError(f"{folder / EVENTS}:{line.lineno}: {line.problem}")
            yield line.event


def _lines(path: Path, raw: BinaryIO) -> Iterator[EventLine]:
    lineno = 0
    while True:
        try:
            data = raw.readline(MAX_EVENT_LINE_BYTES + 1)
        except OSError as exc:
            raise RunFolderError(f"{path}: cannot read ({exc.strerror or exc})") from None
        if not data:
            return
        lineno += 1
        if lineno > MAX_EVENT_LINES:
            raise RunFolderError(
                f"{path}: more than {MAX_EVENT_LINES:,} lines, more than a session can record"
            )
        if len(data) > MAX_EVENT_LINE_BYTES:
            raise RunFolderError(
                f"{path}:{lineno}: a line longer than {_size(MAX_EVENT_LINE_BYTES)}"
            )
        yield _event_line(lineno, data)


def _event_line(lineno: int, data: bytes) -> EventLine:
    if not data.strip():
        return EventLine(lineno, None, "an empty line")
    try:
        event = safejson.loads(data)
    except safejson.JsonError as exc:
        return EventLine(lineno, None, f"not JSON ({exc})")
    problem = event_problem(event)
    return EventLine(lineno, None, problem) if problem else EventLine(lineno, event)
