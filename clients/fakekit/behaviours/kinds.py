"""The reference behaviours themselves, and the synthetic voice they speak with by default."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.fakekit.behaviours.base import Behaviour, FloatArray, UserTurn
from duplexsim.core.vad import speech_onset

__all__ = [
    "BargeIn",
    "DelayedEcho",
    "Echo",
    "Examiner",
    "Neutral",
    "Silent",
    "StopOnOverlap",
    "TalkThrough",
    "synthetic_voice",
    "utterance",
]

_FORMANTS = ((600.0, 250.0), (1300.0, 350.0), (2500.0, 500.0))  # (centre Hz, width Hz)


def synthetic_voice(
    sample_rate: int, duration_s: float = 2.0, *, f0: float = 120.0, peak: float = 0.3
) -> FloatArray:
    """A deterministic voiced signal webrtcvad calls speech: harmonics of a gliding f0, shaped by
    three formant-like peaks, under a 4 Hz syllable envelope, with 10 ms fades at both ends."""
    n = round(duration_s * sample_rate)
    t = np.arange(n) / sample_rate
    phase = 2 * np.pi * np.cumsum(f0 * (1.0 + 0.04 * np.sin(2 * np.pi * 1.3 * t))) / sample_rate
    x = np.zeros(n)
    for k in range(1, int(min(3800.0, sample_rate / 2 - 200) / f0) + 1):
        f = k * f0
        gain = sum(math.exp(-(((f - fc) / bw) ** 2)) for fc, bw in _FORMANTS)
        x += (0.15 + gain) / k * np.sin(k * phase)
    x *= 0.35 + 0.65 * 0.5 * (1.0 - np.cos(2 * np.pi * 4.0 * t))
    fade = min(n // 2, round(0.01 * sample_rate))
    if fade:
        ramp = np.arange(1, fade + 1) / fade  # no exact zero: the first sample is the onset
        x[:fade] *= ramp
        x[n - fade :] *= ramp[::-1]
    top = float(np.max(np.abs(x))) if n else 0.0
    return (x * (peak / top) if top else x).astype(np.float32)


def utterance(
    sample_rate: int, duration_s: float = 2.0, *, pause_at_s: float = 0.0, pause_s: float = 0.0
) -> FloatArray:
    """``synthetic_voice`` of ``duration_s``, silent for ``pause_s`` from ``pause_at_s`` on (a
    pause inside a reply: where a listener may backchannel)."""
    voice = synthetic_voice(sample_rate, duration_s)
    if pause_s <= 0 or not 0 < pause_at_s < duration_s:
        return voice
    at = round(pause_at_s * sample_rate)
    first, rest = voice[:at].copy(), voice[at:].copy()
    fade = min(round(0.01 * sample_rate), first.size, rest.size)
    if fade:
        ramp = (np.arange(1, fade + 1) / fade).astype(np.float32)
        first[-fade:] *= ramp[::-1]
        rest[:fade] *= ramp
    gap = np.zeros(round(pause_s * sample_rate), dtype=np.float32)
    return np.concatenate((first, gap, rest))


class Silent(Behaviour):
    """Never talks; still reports the user's speech edges."""

    name = "silent"

    def _on_turn_end(self, turn: UserTurn, now: int) -> None:
        pass


class Echo(Behaviour):
    """Replays the last ``echo_s`` of the user's speech as soon as the turn ends."""

    name = "echo"

    def __init__(self, sample_rate: int, *, echo_s: float = 3.0, **kw: Any) -> None:
        super().__init__(sample_rate, **kw)
        if echo_s <= 0:
            raise ValueError(f"echo_s must be positive, not {echo_s}")
        self.echo_s = echo_s

    def _echo(self, turn: UserTurn) -> FloatArray:
        window = self._audio(max(turn.end - round(self.echo_s * self.rate), turn.onset), turn.end)
        onset = speech_onset(window, self.rate, self._cfg)  # at the turn's end: kept cheap
        return window if onset is None else window[round(onset * self.rate) :]

    def _on_turn_end(self, turn: UserTurn, now: int) -> None:
        self._schedule(self._echo(turn), now)


class DelayedEcho(Echo):
    """Echo whose first sample is at exactly E + ``latency_s``: ground truth for latency tests.

    The turn end is only known ``hangover_s`` after E, so a ``latency_s`` below that (plus one VAD
    frame) cannot be honoured: the reply then starts as soon as the turn end is decided.
    """

    name = "delayed-echo"

    def __init__(self, sample_rate: int, *, latency_s: float = 0.8, **kw: Any) -> None:
        super().__init__(sample_rate, **kw)
        if latency_s < 0:
            raise ValueError(f"latency_s must not be negative, not {latency_s}")
        self.latency_s = latency_s

    def _on_turn_end(self, turn: UserTurn, now: int) -> None:
        self._schedule(self._echo(turn), max(turn.end + round(self.latency_s * self.rate), now))


class Neutral(Behaviour):
    """Says one fixed utterance after each turn (default: 2 s of ``synthetic_voice``)."""

    name = "neutral"

    def __init__(
        self, sample_rate: int, *, utterance: NDArray[Any] | None = None, **kw: Any
    ) -> None:
        super().__init__(sample_rate, **kw)
        voice = synthetic_voice(sample_rate) if utterance is None else utterance
        self.utterance = np.asarray(voice, dtype=np.float32).reshape(-1)

    def _on_turn_end(self, turn: UserTurn, now: int) -> None:
        self._schedule(self.utterance, now)


class BargeIn(Neutral):
    """Starts the utterance ``barge_after_s`` after the user's speech onset, talking over them
    (if the user stops sooner it still starts then)."""

    name = "barge-in"

    def __init__(self, sample_rate: int, *, barge_after_s: float = 1.5, **kw: Any) -> None:
        super().__init__(sample_rate, **kw)
        if barge_after_s < 0:
            raise ValueError(f"barge_after_s must not be negative, not {barge_after_s}")
        self.barge_after_s = barge_after_s

    def _on_speech_started(self, onset: int, now: int) -> None:
        self._schedule(self.utterance, max(onset + round(self.barge_after_s * self.rate), now))

    def _on_turn_end(self, turn: UserTurn, now: int) -> None:
        pass  # it already had its say


class TalkThrough(Neutral):
    """Says its utterance after each turn and talks on whatever the user does over it (an
    interruption, a backchannel): it never stops; a turn that ends while it talks gets no reply.
    ``utterance_s`` of speech with a pause of ``pause_s`` at ``pause_at_s`` (by default 2 s with
    a breath of 0.4 s after the first second: shorter than a stop, long enough to backchannel)."""

    name = "talk-through"

    def __init__(
        self,
        sample_rate: int,
        *,
        utterance_s: float = 2.0,
        pause_at_s: float = 1.0,
        pause_s: float = 0.4,
        voice: NDArray[Any] | None = None,
        **kw: Any,
    ) -> None:
        if utterance_s <= 0 or pause_s < 0 or pause_at_s < 0:
            raise ValueError("utterance_s must be positive; pause_at_s, pause_s not negative")
        if voice is None:  # else a recorded utterance of its own (real speech)
            voice = utterance(sample_rate, utterance_s, pause_at_s=pause_at_s, pause_s=pause_s)
        super().__init__(sample_rate, utterance=voice, **kw)


class StopOnOverlap(TalkThrough):
    """As ``TalkThrough``, but stops as soon as it hears the user speak over it, and answers
    the turn that made it stop once that turn ends (a backchannel too: it takes it for a turn)."""

    name = "stop-on-overlap"

    def _on_talked_over(self, onset: int, now: int) -> None:
        self._cut_at(now)


class Examiner(Behaviour):
    """A scripted examiner, the user's side played by a model (``run --partner``): it says its
    lines one after the other, each as soon as the other side's turn is over (it talks, waits
    for a reply, and talks again), and after its last line it only listens. With ``opens`` it
    says its first line at once, as Full-Duplex-Bench v2's examiner opens the conversation.

    Line k is ``line_s`` + (k mod 3) x ``step_s`` of ``synthetic_voice`` at ``f0`` (a voice apart
    from the other fakes', lines of different lengths: each turn can be told from the others)."""

    name = "examiner"

    def __init__(
        self,
        sample_rate: int,
        *,
        lines: int = 5,
        line_s: float = 1.0,
        step_s: float = 0.25,
        f0: float = 200.0,
        opens: bool = False,
        **kw: Any,
    ) -> None:
        super().__init__(sample_rate, **kw)
        if lines < 1 or line_s <= 0 or step_s < 0:
            raise ValueError("lines must be at least 1, line_s positive, step_s not negative")
        self.lines = [
            synthetic_voice(sample_rate, line_s + step_s * (k % 3), f0=f0) for k in range(lines)
        ]
        self.said = 0
        if opens:
            self._say(0)

    def _say(self, at: int) -> None:
        if self.said < len(self.lines):
            self._schedule(self.lines[self.said], at)
            self.said += 1

    def _on_turn_end(self, turn: UserTurn, now: int) -> None:
        self._say(now)
