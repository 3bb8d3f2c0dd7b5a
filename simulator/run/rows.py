"""The results row of one recorded session: its status, timing, both validities, usage."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from duplexsim.core.partnermetrics import PartnerRecord
from duplexsim.core.usage import Usage
from duplexsim.run.store import ResultRow
from duplexsim.session.engine import SessionOutcome

__all__ = ["outcome_row"]


def outcome_row(
    sample_id: str,
    language: str,
    emotion: str,
    outcome: SessionOutcome,
    attempts: int,
    folder: Path,
    run_dir: Path,
    *,
    task: str | None = None,
    emotions: Sequence[str | None] | None = None,
    trial: int | None = None,
    usage: Usage | None = None,
    rate_limited: int = 0,
    provider_wait_s: float = 0.0,
    context_s: float | None = None,
) -> ResultRow:
    """The results row of one recorded session (``emotion`` "" where there is no reference);
    ``emotions``: a partner script's, by step (None: no partner); ``sample_id`` is the
    session's key (``session_key``) where it is one trial of several; ``usage``: over every
    attempt of the sample (default: this session's own)."""
    t = outcome.timing
    used = outcome.usage if usage is None else usage
    partner = None
    if emotions is not None and outcome.status != "failed":
        record = PartnerRecord.of_session(outcome.turns, outcome.partner, outcome.speech, emotions)
        partner = record.to_json()
    return ResultRow(
        sample_id=sample_id,
        status=outcome.status,
        end_reason=outcome.end_reason,
        error=outcome.error,
        attempts=attempts,
        language=language,
        emotion=emotion,
        latency_s=t.latency_s if t else None,
        onset_s=t.onset_s if t else None,
        reply_duration_s=t.duration_s if t else None,
        overlap_s=t.overlap_s if t else None,
        speech_end_s=t.speech_end_s if t else None,
        send_p50_ms=outcome.send.p50_ms,
        send_p99_ms=outcome.send.p99_ms,
        send_max_ms=outcome.send.max_ms,
        bytes_sent=outcome.bytes_sent,
        bytes_received=outcome.bytes_received,
        wall_s=round(outcome.wall_s, 3),
        bundle=str(folder.relative_to(run_dir)),
        finished_at=datetime.now(UTC).isoformat(timespec="seconds"),
        timing_valid=outcome.check.valid,
        timing_invalid=outcome.check.invalid,
        loop_lag_max_ms=outcome.check.loop_lag_max_ms,
        recv_lag_max_ms=outcome.check.recv_lag_max_ms,
        truncated=outcome.truncated,
        task=task,
        latency_bound_ms=outcome.check.latency_bound_ms,
        partner=partner,
        trial=trial,
        **dataclasses.asdict(used),
        rate_limited=rate_limited,
        provider_wait_s=round(provider_wait_s, 3),
        context_s=None if context_s is None else round(context_s, 3),
        input_faithful=outcome.check.faithful,
        fidelity_lost=outcome.check.unfaithful,
    )
