"""A client that plays a recorded session's model output back at its recorded arrival times.

It needs no model and no network: replaying a bundle through the session engine shows whether the
pipeline (placement, VAD, end-of-reply detection, timing) reproduces what was recorded.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from duplexsim.clients.base import (
    AudioOut,
    Capabilities,
    ClientConfig,
    ClientEvent,
    DuplexClient,
    EndOfTurn,
    ErrorEvent,
    ProviderEmotion,
    RateLimits,
    SpeechStarted,
    SpeechStopped,
    Transcript,
    UsageReport,
)
from duplexsim.core.audio import read_audio
from duplexsim.core.bundle import EVENTS, MAX_RATE, MAX_SESSION_S, META, OUTPUT, number_problem
from duplexsim.core.errors import RemoteError, RunFolderError
from duplexsim.core.runfolder import RunFolder
from duplexsim.core.usage import TOKEN_FIELDS, Usage

__all__ = ["RecordedEvent", "ReplayClient", "load_recording"]

RecordedEvent = tuple[float, ClientEvent]  # (seconds since T0, event with arrival 0)


def load_recording(bundle: Path) -> tuple[Capabilities, list[RecordedEvent]]:
    """The recorded capabilities and received events of a session bundle, each file read
    from inside the bundle (``duplexsim.core.runfolder``); RunFolderError naming the file,
    line and field of whatever a recording cannot hold."""
    folder = RunFolder(bundle)
    caps = _capabilities(folder.meta(bundle).capabilities, f"{bundle / META}")
    path = folder.file(bundle, OUTPUT)
    if path is None:
        raise RunFolderError(f"{bundle / OUTPUT}: not recorded")
    output = read_audio(path, max_duration_s=MAX_SESSION_S).samples
    events: list[RecordedEvent] = []
    received = 0
    for lineno, item in enumerate(folder.strict_events(bundle), start=1):
        if item.get("dir") != "recv":
            continue
        try:
            event = _event(item, output, caps.output_rate)
        except KeyError as exc:
            raise RunFolderError(f"{bundle / EVENTS}:{lineno}: field {exc} is missing") from None
        if isinstance(event, AudioOut):
            received += event.samples.size
            if received > MAX_SESSION_S * caps.output_rate:
                raise RunFolderError(
                    f"{bundle / EVENTS}:{lineno}: more audio received than a session holds"
                )
        if event is not None:
            events.append((float(item["t"]), event))
    return caps, events


def _capabilities(raw: Mapping[str, Any], where: str) -> Capabilities:
    """The recorded capabilities, each of its type and range (a recording may be edited)."""
    try:
        caps = Capabilities(**raw)
    except TypeError as exc:
        raise RunFolderError(f"{where}: field 'capabilities': {exc}") from None
    for name, value in vars(caps).items():
        if name in _RATES:
            problem = number_problem(value, *_RATES[name], integer=True)
        elif name in _TOLERANCES:
            problem = number_problem(value, *_TOLERANCES[name])
        else:
            problem = None if isinstance(value, bool) else f"{value!r} is not true or false"
        if problem:
            raise RunFolderError(f"{where}: field 'capabilities.{name}': {problem}")
    return caps


_RATES = {"input_rate": (1, MAX_RATE), "output_rate": (1, MAX_RATE), "frame_ms": (1, 1000)}
_TOLERANCES = {"input_jitter_ms": (0.001, 60_000.0)}


def _event(item: dict[str, Any], output: np.ndarray, rate: int) -> ClientEvent | None:
    kind = item["kind"]
    if kind == "audio":
        n = int(item["samples"])
        if item.get("silent"):  # later audio may overwrite silence on the timeline
            return AudioOut(np.zeros(n, dtype=np.float32), 0.0, item.get("offset_s"))
        start = round(item["placed_s"] * rate)
        chunk = output[start : start + n]
        return AudioOut(np.asarray(chunk, dtype=np.float32), 0.0, item.get("offset_s"))
    if kind == "end_of_turn":
        return EndOfTurn(0.0)
    if kind == "speech_started":
        return SpeechStarted(0.0)
    if kind == "speech_stopped":
        return SpeechStopped(0.0)
    if kind == "transcript":
        return Transcript(item["text"], 0.0, bool(item.get("final")))
    if kind == "provider_emotion":
        scores = {str(k): float(v) for k, v in item["scores"].items()}
        return ProviderEmotion(
            scores, 0.0, item.get("role", ""), item.get("source", ""), item.get("id")
        )
    if kind == "usage":
        usage = Usage.from_mapping({k: v for k, v in item.items() if k in TOKEN_FIELDS})
        return UsageReport(usage, 0.0, bool(item.get("cumulative")), item.get("source", ""))
    if kind == "error":
        err = RemoteError(
            item.get("message", "recorded error"),
            retryable=bool(item.get("retryable", False)),
            reason=item.get("reason", "remote"),
        )
        return ErrorEvent(err, 0.0, bool(item.get("fatal", True)))
    return None


class ReplayClient(DuplexClient):
    """``config.url`` is the bundle folder of the session to replay."""

    protocol = "replay"

    def __init__(self, config: ClientConfig) -> None:
        super().__init__(config)
        self._caps, self._recorded = load_recording(Path(config.url))
        self._t0: float | None = None
        self._started = asyncio.Event()
        self._closed = asyncio.Event()

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    async def connect(self) -> None:
        return None

    def timeline_started(self, t0: float) -> None:
        self._t0 = t0
        self._started.set()

    async def send_audio(self, samples: np.ndarray) -> None:
        if self._t0 is None:  # a driver that never announced T0: the first send is T0
            self.timeline_started(self.clock())
        self.bytes_sent += samples.size * 2

    async def events(self) -> AsyncIterator[ClientEvent]:
        await self._started.wait()
        assert self._t0 is not None
        for t, event in self._recorded:
            delay = self._t0 + t - self.clock()
            if delay > 0:
                await asyncio.sleep(delay)
            # stamped with the recorded arrival, not the wake-up time, so a replay is exact and
            # any difference it shows comes from the pipeline, not from this machine's scheduling
            yield _stamped(event, self._t0 + t)
            if isinstance(event, AudioOut):
                self.bytes_received += event.samples.size * 2
        await self._closed.wait()  # a recording ends; the connection does not

    async def aclose(self) -> None:
        self._closed.set()


def _stamped(event: ClientEvent, arrival: float) -> ClientEvent:
    if isinstance(event, AudioOut):
        return AudioOut(event.samples, arrival, event.offset_s)
    if isinstance(event, Transcript):
        return Transcript(event.text, arrival, event.final)
    if isinstance(event, ErrorEvent):
        return ErrorEvent(event.error, arrival, event.fatal)
    if isinstance(event, ProviderEmotion | UsageReport | RateLimits):
        return dataclasses.replace(event, arrival=arrival)
    return type(event)(arrival)
