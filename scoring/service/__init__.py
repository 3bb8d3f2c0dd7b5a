"""The scoring service: a pyzmq broker, GPU/CPU workers with dynamic batching, and clients.

    clients (ScoringClient, asyncio DEALER) -> Broker (ROUTER | ROUTER) <- workers (DEALER)

Without an endpoint, ``LocalScoring`` offers the same ``score`` API in-process. The wire format is
in ``wire`` (requests/replies) and ``control`` (broker <-> worker); neither uses pickle.
"""

from duplexsim.scoring.service.api import ScoreResult, Scoring, open_scoring, registry_factory
from duplexsim.scoring.service.broker import DEFAULT_BACKEND, DEFAULT_FRONTEND, Broker
from duplexsim.scoring.service.client import ScoringClient
from duplexsim.scoring.service.errors import ScoringError, WireError
from duplexsim.scoring.service.local import LocalScoring
from duplexsim.scoring.service.security import create_keys
from duplexsim.scoring.service.worker import ScoringWorker

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
