"""One session in tests: the context it streams, its settings, scripted models on the virtual clock."""

from __future__ import annotations

import asyncio

import numpy as np

from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.core.turns import TurnSettings
from duplexsim.session.engine import SessionSettings
from tests.helpers.signals import voiced_signal
from tests.helpers.virtualclock import ScriptedClient

RATE = 16000


SETTINGS = SessionSettings(
    turns=TurnSettings(hangover_s=0.5, max_reply_s=4.0, reply_timeout_s=1.0),
    stall_timeout_s=5.0,
    deadline_margin_s=2.0,
)


def context(speech_s: float = 1.0) -> np.ndarray:
    """0.2 s silence, speech, 0.1 s silence; speech ends at 0.2 + speech_s."""
    x = np.zeros(int((0.3 + speech_s) * RATE), np.float32)
    x[int(0.2 * RATE) : int(0.2 * RATE) + int(speech_s * RATE)] = voiced_signal(speech_s)
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
