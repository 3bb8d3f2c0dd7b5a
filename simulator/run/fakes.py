"""Reference models served from a child process, so they never compete with the session loop.

One process serves every behaviour a run (or the demo's runs) needs, each on its own port: on
a small machine each extra process is one more loop waiting for a core just as its reply
should leave.

The child shares the machine's cores with the run, so when the machine is busy its loop stalls
too, and a reply it sends late is heard late: a latency the model did not have. The child reports
its stalls (``serve-model --report-stalls``) and ``stalls`` holds them, for the sessions'
latency check.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from collections.abc import Sequence
from types import TracebackType
from typing import NoReturn

from duplexsim.core.errors import ConfigError
from duplexsim.core.stalls import StallLog, parse_stall_line
from duplexsim.run.lifeline import owner_env

__all__ = ["FakeModelProcess"]


class FakeModelProcess:
    """``duplexsim serve-model`` on free loopback ports, for as long as the context is open:
    ``behaviour`` is one behaviour or several, served by one process (``urls``)."""

    def __init__(
        self,
        protocol: str,
        behaviour: str | Sequence[str],
        *extra_args: str,
        start_timeout_s: float = 30,
    ):
        self.protocol = protocol
        self.behaviours = (behaviour,) if isinstance(behaviour, str) else tuple(behaviour)
        self.behaviour = ",".join(self.behaviours)
        self.extra_args = extra_args
        self.start_timeout_s = start_timeout_s
        self.urls: dict[str, str] = {}  # behaviour -> where it is served
        self.stalls = StallLog()  # the server loop's stalls, as it reports them (all behaviours')
        self._reader: asyncio.Task[None] | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server

    async def __aenter__(self) -> FakeModelProcess:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-P",  # never a package from the current folder: ours, as installed
            "-m",
            "duplexsim",
            "serve-model",
            "--protocol",
            self.protocol,
            "--behaviour",
            self.behaviour,
            "--port",
            "0",
            "--report-stalls",
            *self.extra_args,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._stderr,  # a file: a chatty server can never block on a full pipe
            env={**os.environ, **owner_env()},
        )
        assert self._proc.stdout is not None
        for behaviour in self.behaviours:  # one line each: "serving B over P on URL"
            try:
                line = await asyncio.wait_for(self._proc.stdout.readline(), self.start_timeout_s)
            except TimeoutError:
                line = b""
            text = line.decode().strip()
            if " on " not in text:
                await self._failed()
            self.urls[behaviour] = text.rsplit(" on ", 1)[1]
        self._reader = asyncio.create_task(self._read_stalls(self._proc.stdout))
        return self

    @property
    def url(self) -> str:
        """Where the (first) behaviour is served ("" before the server is up)."""
        return self.urls.get(self.behaviours[0], "")

    async def _failed(self) -> NoReturn:
        await self.aclose()
        self._stderr.seek(0)
        err = self._stderr.read()
        detail = err.decode().strip().splitlines()[-1:] or ["no output"]
        raise ConfigError(
            f"fake {self.behaviour} model over {self.protocol} did not start: {detail[0]}"
        )

    async def _read_stalls(self, stdout: asyncio.StreamReader) -> None:
        """Every stall the server reports (other lines are ignored), until its stdout ends."""
        while True:
            try:
                line = await stdout.readline()
            except ValueError:  # a line past the reader's limit: not a stall line
                continue
            if not line:
                return
            stall = parse_stall_line(line.decode(errors="replace"))
            if stall is not None:
                self.stalls.note(*stall)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            proc.kill()
            await proc.wait()
