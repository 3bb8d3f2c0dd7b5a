"""``duplexsim models check``: one short session with a model, to know a profile works before a
long run: the handshake, audio out, audio back, the end of the turn, and the round trip.

The session is an ordinary one (``run_session``: paced frames, the reply placed on the timeline,
the end of the reply detected as in a run) over a 2.6 s probe: 0.3 s of silence, 1.5 s of a
synthetic voice, then silence while the model answers. The round trip is the response latency:
the model's speech onset minus the end of the probe's speech.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.fakekit.behaviours import synthetic_voice
from duplexsim.clients.registry import client_class
from duplexsim.core.prices import Cost
from duplexsim.core.turns import TurnSettings
from duplexsim.core.usage import Usage
from duplexsim.profiles.profile import ModelProfile, client_config
from duplexsim.run.fakes import FakeModelProcess
from duplexsim.session.engine import SessionSettings, run_session

__all__ = ["CheckResult", "check_model", "probe"]

RATE = 16000
SETTINGS = SessionSettings(
    turns=TurnSettings(hangover_s=1.0, max_reply_s=6.0, reply_timeout_s=8.0), stall_timeout_s=5.0
)


@dataclass(frozen=True)
class CheckResult:
    name: str
    protocol: str
    handshake_s: float | None  # from the start to the open session (connection and set-up)
    audio_out_s: float  # audio sent
    audio_back_s: float  # model audio received
    end_of_turn: bool | None  # the protocol's end-of-turn signal came; None: it has none
    round_trip_s: float | None  # model speech onset - end of the probe's speech
    error: str | None = None
    usage: Usage = field(default_factory=Usage)  # what the check used ...
    cost: Cost | None = None  # ... and cost at the profile's prices (None: no price table)

    @property
    def problem(self) -> str | None:
        """What went wrong, first thing first; None when the model passed."""
        if self.error is not None:
            return self.error
        if self.handshake_s is None:
            return "no session"
        if self.audio_back_s <= 0:
            return "no audio back"
        if self.round_trip_s is None:
            return "no speech in the reply"
        if self.end_of_turn is False:
            return "no end-of-turn signal"
        return None

    @property
    def ok(self) -> bool:
        return self.problem is None


def probe() -> NDArray[np.float32]:
    """The probe's context: 0.3 s of silence, 1.5 s of speech, 0.8 s of silence (16 kHz)."""
    quiet = np.zeros(round(0.3 * RATE), np.float32)
    tail = np.zeros(round(0.8 * RATE), np.float32)
    return np.concatenate([quiet, synthetic_voice(RATE, 1.5), tail]).astype(np.float32)


class _Watch:
    """The session tap that notes when the session opened and how much audio came back."""

    def __init__(self) -> None:
        self.opened_at: float | None = None
        self.back_s = 0.0
        self._rate = 0

    def on_start(self, t0: float, input_rate: int, output_rate: int) -> None:
        self.opened_at = time.monotonic()
        self._rate = output_rate

    def on_sent(self, samples: NDArray[np.float32], start_s: float) -> None:
        pass

    def on_placed(self, samples: NDArray[np.float32], start_s: float) -> None:
        self.back_s += samples.size / self._rate

    def on_end(self) -> None:
        pass


async def check_model(profile: ModelProfile, url: str | None = None) -> CheckResult:
    """One probe session with ``profile`` (at ``url`` if given); never raises a session error:
    failures come back in the result."""
    async with _endpoint(profile, url) as endpoint:
        client = client_class(profile.protocol)(client_config(profile, url=endpoint))
        watch = _Watch()
        started = time.monotonic()
        outcome = await run_session(client, probe(), SETTINGS, tap=watch)
    has_signal = client.capabilities.end_of_turn_signal
    signalled = any(e.get("kind") == "end_of_turn" for e in outcome.events)
    timing = outcome.timing
    return CheckResult(
        name=profile.name,
        protocol=profile.protocol,
        handshake_s=None if watch.opened_at is None else watch.opened_at - started,
        audio_out_s=outcome.sent.size / outcome.input_rate,
        audio_back_s=watch.back_s,
        end_of_turn=signalled if has_signal else None,
        round_trip_s=None if timing is None else timing.latency_s,
        error=outcome.error,
        usage=outcome.usage,
        cost=None if profile.price is None else profile.price.cost(outcome.usage),
    )


@asynccontextmanager
async def _endpoint(profile: ModelProfile, url: str | None) -> AsyncIterator[str | None]:
    """``url``, the profile's own, or a local fake started for a ``fake:`` model."""
    if url is not None or profile.fake_behaviour is None or profile.url is not None:
        yield url
        return
    async with FakeModelProcess(profile.protocol, profile.fake_behaviour) as fake:
        yield fake.url
