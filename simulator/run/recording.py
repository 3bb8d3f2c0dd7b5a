"""Recording a session: its outcome into the bundle format that ``duplexsim.core.bundle`` owns.

The session's outcome and the package versions are filled in here, in the process that writes
the bundle; the sample, model and settings come from the caller.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

from duplexsim.core.bundle import BundleMeta, Tracks, remove_unfinished, write_bundle
from duplexsim.session.engine import SessionOutcome

__all__ = ["outcome_summary", "package_versions", "record_session", "remove_unfinished"]

_PACKAGES = (
    "duplexsim",
    "numpy",
    "soundfile",
    "soxr",
    "websockets",
    "webrtcvad-wheels",
    "pyzmq",
    "aiortc",
    "torch",
    "transformers",
)
# the outcome's fields that are not written into meta.json (they are the tracks and events)
_NOT_IN_META = frozenset(
    {"sent", "output", "records", "partner_records", "input_rate", "output_rate"}
)


def package_versions() -> dict[str, str]:
    found: dict[str, str] = {}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def outcome_summary(outcome: SessionOutcome) -> dict[str, Any]:
    """Every field of the outcome but its audio and events (a field added to SessionOutcome is
    recorded with no change here)."""
    summary: dict[str, Any] = {}
    for f in dataclasses.fields(outcome):
        if f.name in _NOT_IN_META:
            continue
        value = getattr(outcome, f.name)
        is_record = dataclasses.is_dataclass(value) and not isinstance(value, type)
        summary[f.name] = asdict(value) if is_record else value
    summary["timing_valid"] = outcome.check.valid  # whether the figures can be vouched for
    summary["input_faithful"] = outcome.check.faithful  # whether the model heard the stream
    summary["wall_s"] = round(outcome.wall_s, 3)
    return summary


def record_session(folder: Path, outcome: SessionOutcome, meta: BundleMeta) -> Path:
    """Write the bundle of one session (``meta`` without outcome, rates and packages)."""
    full = dataclasses.replace(
        meta,
        outcome=outcome_summary(outcome),
        input_rate=outcome.input_rate,
        output_rate=outcome.output_rate,
        packages=package_versions(),
    )
    tracks = Tracks(outcome.sent, outcome.input_rate, outcome.output, outcome.output_rate)
    return write_bundle(folder, full, tracks, outcome.events)
