"""Bounds on what a session takes in from a server, so a flood cannot grow memory or disk.

A model may send faster than real time (hosted models send a reply in a burst), but only by a
stated margin: the audio it has sent may run at most ``max_ahead_s`` ahead of the session's
clock, and a chunk may be placed at most that far past its arrival (a reply is at most the
maximum reply length plus a margin). Messages of any kind arrive at most ``MESSAGE_RATE`` per
second on average (after a burst of ``MESSAGE_BURST``), and transcripts total at most
``TEXT_BUDGET`` characters. Beyond any of these the session fails as ``protocol``, not
retryable: a flood is the server's behaviour, not bad luck.

The counts and sizes a protocol's own messages carry are bounded here too, so every bound on
what a server controls is in one place: the names in one message's emotion scores
(``SCORE_NAMES``) and the messages with scores (``SCORE_MESSAGES``; the names count as text),
the content blocks a session opens (``CONTENT_BLOCKS``, ids of at most ``CONTENT_ID_CHARS``),
the body of a refused request kept to say why (``REFUSAL_BODY``), and the error a session
keeps (``ERROR_CHARS``: the error of an opening, too, which no other bound counts).

With these bounds a session holds at most (deadline + ``max_ahead_s``) of audio, a bounded
number of event records and a bounded amount of text, whatever the server sends.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from duplexsim.core.errors import ProtocolError

__all__ = [
    "AHEAD_MARGIN_S",
    "CONTENT_BLOCKS",
    "CONTENT_ID_CHARS",
    "ERROR_CHARS",
    "MESSAGE_BURST",
    "MESSAGE_RATE",
    "REFUSAL_BODY",
    "SCORE_MESSAGES",
    "SCORE_NAMES",
    "TEXT_BUDGET",
    "Intake",
    "kept_error",
]

AHEAD_MARGIN_S = 10.0  # beyond the maximum reply length
MESSAGE_RATE = 1000  # messages per second of session time, on average
MESSAGE_BURST = 10_000
TEXT_BUDGET = 1_000_000  # characters of transcript per session
# Hume's prosody model has 48 names, and a turn brings a few scored messages
SCORE_NAMES = 64  # names in one message's scores
SCORE_MESSAGES = 1_000  # messages with scores per session
# Nova Sonic opens a few content blocks per turn, each named by a UUID (36 characters)
CONTENT_BLOCKS = 1_000  # distinct content blocks per session
CONTENT_ID_CHARS = 256
REFUSAL_BODY = 64 * 1024  # bytes of a refused request's body kept (a few hundred are quoted)
ERROR_CHARS = 4_000  # of the error a session keeps in its results and meta.json


@dataclass
class Intake:
    """Counts what a session received; each method raises ProtocolError past a bound."""

    rate: int  # Hz of the audio counted
    max_ahead_s: float
    samples: int = 0
    messages: int = 0
    text_chars: int = 0
    score_messages: int = 0

    def message(self, arrival_s: float) -> None:
        self.messages += 1
        allowed = MESSAGE_BURST + MESSAGE_RATE * max(arrival_s, 0.0)
        if self.messages > allowed:
            raise ProtocolError(
                f"server sent {self.messages} messages in {max(arrival_s, 0.0):.1f} s "
                f"(more than {MESSAGE_RATE} a second after a burst of {MESSAGE_BURST}): a flood"
            )

    def audio(self, n_samples: int, arrival_s: float, placed_end_s: float) -> None:
        """A chunk of ``n_samples`` that arrived at ``arrival_s`` and was placed up to
        ``placed_end_s`` on the timeline."""
        self.samples += n_samples
        now = max(arrival_s, 0.0)
        sent_s = self.samples / self.rate
        if sent_s - now > self.max_ahead_s or placed_end_s - now > self.max_ahead_s:
            raise ProtocolError(
                f"server sent {sent_s:.1f} s of audio by {now:.1f} s into the session, "
                f"reaching {placed_end_s:.1f} s on the timeline: more than "
                f"{self.max_ahead_s:g} s ahead of real time (a flood)"
            )

    def text(self, n_chars: int) -> None:
        self.text_chars += n_chars
        if self.text_chars > TEXT_BUDGET:
            raise ProtocolError(
                f"server sent more than {TEXT_BUDGET} characters of transcript: a flood"
            )

    def scores(self, names: Iterable[str]) -> None:
        """A message with emotion scores under ``names`` (each already at most SCORE_NAMES,
        which its decoder checks); the names count as text."""
        self.score_messages += 1
        if self.score_messages > SCORE_MESSAGES:
            raise ProtocolError(
                f"server sent more than {SCORE_MESSAGES} messages with scores: a flood"
            )
        self.text(sum(len(name) for name in names))


def kept_error(message: str) -> str:
    """The error a session keeps (results, meta.json, the terminal): at most ERROR_CHARS, cut
    with a note saying how long the server's text was."""
    if len(message) <= ERROR_CHARS:
        return message
    return f"{message[:ERROR_CHARS]}... (cut: {len(message):,} characters in all)"
