"""What callers of the scoring service see: ``ScoreResult`` and the ``Scoring`` interface.

``ScoringClient`` (over zmq) and ``LocalScoring`` (in-process) both implement ``Scoring``;
``open_scoring`` picks one: an endpoint means the service, no endpoint an in-process worker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.errors import ConfigError
from duplexsim.core.provenance import ScorerIdentity
from duplexsim.scoring.service.errors import RETRYABLE_CODES, ScoringError
from duplexsim.scoring.service.wire import Reply

if TYPE_CHECKING:
    from duplexsim.scoring.models.base import EmotionModel
    from duplexsim.scoring.service.security import KeyInput

__all__ = ["ScoreResult", "Scoring", "open_scoring", "registry_factory"]


@dataclass(frozen=True)
class ScoreResult:
    """One clip's outcome: ``values`` (one per dimension) or ``error`` with its ``code``;
    ``precision`` is what the scorer computed at (None: it has none, or an older worker)."""

    scorer: str
    dimensions: tuple[str, ...]
    values: NDArray[np.float32] | None = field(compare=False)
    error: str | None = None
    code: str | None = None
    retryable: bool = False
    precision: str | None = None
    weights: str | None = None  # of the weights the scorer loaded (see ScorerIdentity)
    version: str | None = None  # of the scorer's code

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def identity(self) -> ScorerIdentity:
        return ScorerIdentity(self.scorer, self.weights, self.precision, self.version)

    @classmethod
    def from_reply(cls, reply: Reply) -> ScoreResult:
        if reply.ok:
            return cls(
                reply.scorer,
                reply.dimensions,
                reply.values,
                precision=reply.precision,
                weights=reply.weights,
                version=reply.version,
            )
        return cls(
            reply.scorer,
            reply.dimensions,
            None,
            reply.error or "error",
            reply.code,
            reply.retryable,
        )

    @classmethod
    def failure(
        cls, scorer: str, code: str, message: str, *, retryable: bool | None = None
    ) -> ScoreResult:
        if retryable is None:
            retryable = code in RETRYABLE_CODES
        return cls(scorer, (), None, f"{code}: {message}", code, retryable)

    def raise_for_error(self) -> None:
        if self.error is not None:
            raise ScoringError(self.error, code=self.code, retryable=self.retryable)


class Scoring(Protocol):
    async def score(
        self, clips: Sequence[NDArray[np.floating[Any]]], scorer: str, deadline_s: float
    ) -> list[ScoreResult]:
        """One result per clip, in order; ``deadline_s`` is seconds from now."""
        ...

    async def aclose(self) -> None: ...


def open_scoring(
    endpoint: str | None = None,
    *,
    server_public_key: KeyInput | None = None,
    timeout_s: float | None = None,
    factory: Callable[[str], EmotionModel] | None = None,
    device: str = "cpu",
    model_path: Path | None = None,
    precision: str | None = None,
) -> Scoring:
    """The service at ``endpoint`` (a broker's client endpoint), or, without one, an in-process
    worker that loads scorers with ``factory`` (default ``load_scorer(name, device=,
    model_path=, precision=)``). ``precision`` (None: each scorer's default) is for in-process
    scoring only: a service's workers set their own."""
    if endpoint:
        if precision is not None:
            raise ConfigError(
                "a precision applies to in-process scoring; the scoring service's workers set "
                "their own (duplexsim scoring worker --precision)"
            )
        from duplexsim.scoring.service.client import ScoringClient

        return ScoringClient(endpoint, server_public_key=server_public_key, timeout_s=timeout_s)
    from duplexsim.scoring.service.local import LocalScoring

    return LocalScoring(factory, device=device, model_path=model_path, precision=precision)


def registry_factory(
    device: str = "cpu", model_path: Path | None = None, precision: str | None = None
) -> Callable[[str], EmotionModel]:
    """``name -> load_scorer(name, device=, model_path=, precision=)``, importing the registry on
    first use. A scorer without a precision option refuses an explicit ``precision``."""

    def load(name: str) -> EmotionModel:
        from duplexsim.scoring.models import load_scorer

        return load_scorer(name, model_path=model_path, device=device, precision=precision)

    return load
