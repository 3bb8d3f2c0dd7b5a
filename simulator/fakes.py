"""Reference models served from a child process, so they never compete with the session loop."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from types import TracebackType

from simulator.core.errors import ConfigError
from simulator.lifeline import owner_env

__all__ = ["FakeModelProcess"]


class FakeModelProcess:
    """``duplexsim serve-model`` on a free loopback port, for as long as the context is open."""

    def __init__(
        self, protocol: str, behaviour: str, *extra_args: str, start_timeout_s: float = 30
    ):
        self.protocol = protocol
        self.behaviour = behaviour
        self.extra_args = extra_args
        self.start_timeout_s = start_timeout_s
        self.url = ""
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server

    async def __aenter__(self) -> FakeModelProcess:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "simulator",
            "serve-model",
            "--protocol",
            self.protocol,
            "--behaviour",
            self.behaviour,
            "--port",
            "0",
            *self.extra_args,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._stderr,  # a file: a chatty server can never block on a full pipe
            env={**os.environ, **owner_env()},
        )
        assert self._proc.stdout is not None
        try:
            line = await asyncio.wait_for(self._proc.stdout.readline(), self.start_timeout_s)
        except TimeoutError:
            line = b""
        text = line.decode().strip()
        if " on " not in text:
            await self.aclose()
            self._stderr.seek(0)
            err = self._stderr.read()
            detail = err.decode().strip().splitlines()[-1:] or ["no output"]
            raise ConfigError(
                f"fake {self.behaviour} model over {self.protocol} did not start: {detail[0]}"
            )
        self.url = text.rsplit(" on ", 1)[1]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            proc.kill()
            await proc.wait()
