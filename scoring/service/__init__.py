"""The scoring service: a pyzmq broker, GPU/CPU workers with dynamic batching, and clients.

    clients (ScoringClient, asyncio DEALER) -> Broker (ROUTER | ROUTER) <- workers (DEALER)

Without an endpoint, ``LocalScoring`` offers the same ``score`` API in-process. The wire format is
in ``wire`` (requests/replies) and ``control`` (broker <-> worker); neither uses pickle.
"""

from scoring.service.api import ScoreResult, Scoring, open_scoring, registry_factory
from scoring.service.broker import DEFAULT_BACKEND, DEFAULT_FRONTEND, Broker
from scoring.service.client import ScoringClient
from scoring.service.errors import ScoringError, WireError
from scoring.service.local import LocalScoring
from scoring.service.security import create_keys
from scoring.service.worker import ScoringWorker

__all__ = [
    "DEFAULT_BACKEND",
    "DEFAULT_FRONTEND",
    "Broker",
    "LocalScoring",
    "ScoreResult",
    "Scoring",
    "ScoringClient",
    "ScoringError",
    "ScoringWorker",
    "WireError",
    "create_keys",
    "open_scoring",
    "registry_factory",
]
