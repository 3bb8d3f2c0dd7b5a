"""What a session used, in the units providers bill: their own token counts and the seconds we
measure ourselves.

Providers report usage in different ways. OpenAI-family servers report each response
(``response.done``), Gemini each turn (``usageMetadata``), and Nova Sonic sends running totals
(``usageEvent``). Hume and xAI bill the connection by the minute and report no tokens. ``Usage``
holds all of these in one shape: token counts by modality, with cached input as the part the
provider marks as cached (it is included in the input counts, as every provider here counts
it), plus the seconds measured for every session whatever the provider says (audio sent, audio
received, time connected). A count the provider did not report is None, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

__all__ = ["SECOND_FIELDS", "TOKEN_FIELDS", "USAGE_FIELDS", "Usage", "UsageTally"]

# tokens the provider reported, by modality; cached_* are the part of input_* served from cache
TOKEN_FIELDS = (
    "input_audio_tokens",
    "input_text_tokens",
    "cached_audio_tokens",
    "cached_text_tokens",
    "output_audio_tokens",
    "output_text_tokens",
)
# seconds measured by the session: audio streamed to the model, audio it sent back (silence
# included), and the connection from the start of its handshake to its close
SECOND_FIELDS = ("audio_sent_s", "audio_received_s", "connected_s")
USAGE_FIELDS = TOKEN_FIELDS + SECOND_FIELDS


@dataclass(frozen=True)
class Usage:
    input_audio_tokens: int | None = None
    input_text_tokens: int | None = None
    cached_audio_tokens: int | None = None
    cached_text_tokens: int | None = None
    output_audio_tokens: int | None = None
    output_text_tokens: int | None = None
    audio_sent_s: float | None = None
    audio_received_s: float | None = None
    connected_s: float | None = None

    def __add__(self, other: Usage) -> Usage:
        """Field by field; a field neither reported stays None."""
        return Usage(**{f: _plus(getattr(self, f), getattr(other, f)) for f in USAGE_FIELDS})

    def counts(self) -> dict[str, int | float]:
        """The fields that were reported or measured."""
        return {f: v for f in USAGE_FIELDS if (v := getattr(self, f)) is not None}

    @property
    def tokens_reported(self) -> bool:
        return any(getattr(self, f) is not None for f in TOKEN_FIELDS)

    def tokens_only(self) -> Usage:
        return replace(self, audio_sent_s=None, audio_received_s=None, connected_s=None)

    def with_measured(self, sent_s: float, received_s: float, connected_s: float | None) -> Usage:
        return replace(
            self,
            audio_sent_s=round(sent_s, 3),
            audio_received_s=round(received_s, 3),
            connected_s=None if connected_s is None else round(connected_s, 3),
        )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Usage:
        """From a results row, a record or meta.json (other keys are ignored)."""
        names = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for name in names:
            value = data.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                values[name] = value
        return cls(**values)


def _plus(a: float | None, b: float | None) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


class UsageTally:
    """A session's usage from its provider's reports: per-response reports add up; a running
    total (Nova Sonic's) replaces the one before it."""

    def __init__(self) -> None:
        self._added = Usage()
        self._running = Usage()
        self.reports = 0

    def add(self, usage: Usage, *, cumulative: bool = False) -> None:
        self.reports += 1
        if cumulative:
            self._running = usage
        else:
            self._added = self._added + usage

    @property
    def total(self) -> Usage:
        return self._added + self._running
