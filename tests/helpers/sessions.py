"""One session in tests: the context it streams, its settings, scripted models on the virtual clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np

from duplexsim.clients.fakekit.behaviours import behaviour_factory, synthetic_voice
from duplexsim.core.timing import TimingBudget
from duplexsim.core.turns import TurnSettings
from duplexsim.session.engine import SessionSettings
from tests.helpers.signals import voiced_signal
from tests.helpers.virtualclock import ScriptedClient

RATE = 16000


def settings(
    *,
    max_reply_s: float = 4.0,
    reply_timeout_s: float = 1.0,
    stall_timeout_s: float = 5.0,
    deadline_margin_s: float = 2.0,
    budget: TimingBudget | None = None,
) -> SessionSettings:
    """Session settings for tests: a 0.5 s hangover, short timeouts; the rest as named."""
    return SessionSettings(
        turns=TurnSettings(
            hangover_s=0.5, max_reply_s=max_reply_s, reply_timeout_s=reply_timeout_s
        ),
        stall_timeout_s=stall_timeout_s,
        deadline_margin_s=deadline_margin_s,
        budget=budget or TimingBudget(),
    )


SETTINGS = settings()
# a stalled server is called after 0.6 s of silence on the wire or pings unanswered
QUICK_STALL = settings(stall_timeout_s=0.6)


Voice = Callable[[float, int], np.ndarray]  # (seconds, rate) -> speech, as voiced_signal


def synthetic(seconds: float, rate: int = RATE, *, f0: float = 120.0) -> np.ndarray:
    """The fakes' synthetic voice (10 ms fades at both ends, as real speech starts and ends; a
    hard cut makes Opus smear a turn's end) as a Voice."""
    return synthetic_voice(rate, seconds, f0=f0)


def context(
    speech_s: float = 1.0,
    *,
    lead_s: float = 0.2,
    tail_s: float = 0.1,
    rate: int = RATE,
    fade_s: float = 0.0,
    voice: Voice = voiced_signal,
) -> np.ndarray:
    """``lead_s`` silence, speech, ``tail_s`` silence at ``rate``; speech ends at lead_s + speech_s.
    ``fade_s``: the speech fades out over its last ``fade_s`` (Opus smears an abrupt end a few ms
    later)."""
    speech = voice(speech_s, rate)
    fade = round(fade_s * rate)
    if fade:
        speech[-fade:] *= np.linspace(1.0, 0.0, fade, endpoint=False, dtype=np.float32)
    lead = round(lead_s * rate)
    x = np.zeros(lead + speech.size + round(tail_s * rate), np.float32)
    x[lead : lead + speech.size] = speech
    return x


def echo(latency_s: float = 0.5, **kw: object) -> ScriptedClient:
    behaviour = behaviour_factory("delayed-echo", latency_s=latency_s, hangover_s=0.25)(RATE)
    return ScriptedClient(behaviour, **kw)  # type: ignore[arg-type]


class SlowSend(ScriptedClient):
    """A client whose send of one frame takes ``stall_s`` (a loaded sender)."""

    def __init__(self, *args: object, frame: int, stall_s: float, **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self.frame, self.stall_s = frame, stall_s

    async def send_audio(self, samples: np.ndarray) -> None:
        if len(self.sent_frames) == self.frame:
            await asyncio.sleep(self.stall_s)
        await super().send_audio(samples)
