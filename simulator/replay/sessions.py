"""Replay recorded sessions through the session engine; compare their timing with the recording."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.base import ClientConfig
from duplexsim.clients.recorded import ReplayClient
from duplexsim.core.audio import read_audio
from duplexsim.core.bundle import INPUT, is_bundle, read_events, read_meta
from duplexsim.core.errors import ConfigError, InputError
from duplexsim.core.partnerfield import ScriptEntry
from duplexsim.core.textable import render_table
from duplexsim.replay.audit import TimingAudit, audit_bundle
from duplexsim.session.engine import CONTEXT_RATE, SessionSettings, run_session
from duplexsim.session.partneraudio import PartnerAudio, read_partner_clips
from duplexsim.session.recordedpartner import RecordedPartner
from duplexsim.session.useraudio import UserAudio

__all__ = ["ReplayResult", "render_replay", "replay_run", "session_bundles"]

_FIELDS = ("onset_s", "latency_s", "duration_s")


@dataclass(frozen=True)
class ReplayResult:
    sample_id: str
    recorded: dict[str, Any]  # status, end_reason and timing fields as recorded
    replayed: dict[str, Any]
    audit: TimingAudit  # the recording's own sends and its reply re-measured from output.wav

    def diff_ms(self, name: str) -> float | None:
        a, b = self.recorded.get(name), self.replayed.get(name)
        return None if a is None or b is None else (b - a) * 1000.0

    def worst_ms(self) -> float:
        diffs = [abs(d) for d in (self.diff_ms(f) for f in _FIELDS) if d is not None]
        return max(diffs, default=0.0)

    def agrees(self, tolerance_ms: float) -> bool:
        same = all(self.recorded[k] == self.replayed[k] for k in ("status", "end_reason"))
        both = all(
            (self.recorded.get(f) is None) == (self.replayed.get(f) is None) for f in _FIELDS
        )
        return (
            same
            and both
            and self.worst_ms() <= tolerance_ms
            and not self.audit.disagrees(tolerance_ms)
        )

    @property
    def over_budget(self) -> str | None:
        """The first recorded figure over the session's timing budget, if any."""
        return self.audit.check.invalid


def session_bundles(run_dir: Path, sample_ids: list[str]) -> list[Path]:
    sessions = run_dir / "sessions"
    if not sessions.is_dir():
        raise ConfigError(f"{run_dir}: no recorded sessions (expected {sessions})")
    bundles = sorted(p for p in sessions.iterdir() if is_bundle(p))
    if sample_ids:
        known = {p.name for p in bundles}
        missing = [s for s in sample_ids if s not in known]
        if missing:
            raise ConfigError(f"{run_dir}: no recorded session for {', '.join(missing)}")
        bundles = [p for p in bundles if p.name in sample_ids]
    return bundles


def _summary(status: str, end_reason: str, timing: dict[str, Any] | None) -> dict[str, Any]:
    timing = timing or {}
    return {"status": status, "end_reason": end_reason, **{f: timing.get(f) for f in _FIELDS}}


async def replay_bundle(bundle: Path) -> ReplayResult:
    meta = read_meta(bundle)
    settings = SessionSettings.from_description(dict(meta.settings))
    sample = meta.sample
    live = sample.kind == "live"  # the user's turn as it was sent is input.wav
    context_path = bundle / INPUT if live or sample.context is None else Path(sample.context)
    try:
        context = read_audio(context_path, sample_rate=CONTEXT_RATE).samples
    except InputError as exc:
        raise ConfigError(f"{bundle}: cannot read the session's context ({exc})") from None
    if live:
        context = context[: round(_turn_end_s(bundle) * CONTEXT_RATE)]
    client = ReplayClient(ClientConfig(url=str(bundle)))
    user: UserAudio | NDArray[np.float32] = context
    script = meta.extra.get("partner")
    if script:  # the partner decides again, from the same model audio
        entries = [ScriptEntry.from_dict(step) for step in script]
        clips = await asyncio.to_thread(read_partner_clips, entries, settings.vad)
        user = PartnerAudio(context, clips, settings.turns)
    elif meta.extra.get("partner_model"):  # a partner model: what it said, where it said it
        user = await asyncio.to_thread(_recorded_partner, bundle, context, meta.outcome)
    outcome = await run_session(
        client, user, settings, window_start_s=sample.context_turn_start_s or 0.0
    )
    rec = meta.outcome
    replayed_timing = None
    if outcome.timing is not None:
        replayed_timing = {
            "onset_s": outcome.timing.onset_s,
            "latency_s": outcome.timing.latency_s,
            "duration_s": outcome.timing.duration_s,
        }
    return ReplayResult(
        sample.id,
        _summary(rec["status"], rec["end_reason"], rec["timing"]),
        _summary(outcome.status, outcome.end_reason, replayed_timing),
        await asyncio.to_thread(audit_bundle, bundle, meta),
    )


def _recorded_partner(
    bundle: Path, context: NDArray[np.float32], outcome: Mapping[str, Any]
) -> RecordedPartner:
    try:
        heard = read_audio(bundle / INPUT)
    except InputError as exc:
        raise ConfigError(f"{bundle}: cannot read what the model heard ({exc})") from None
    steps = outcome.get("partner") or []
    ended_by = (outcome.get("partner_model") or {}).get("ended_by")
    return RecordedPartner(context, heard.samples, heard.sample_rate, steps, ended_by)


def _turn_end_s(bundle: Path) -> float:
    """Where a live session's user turn ended: as its ``context_end`` event says, or (recorded
    before the event said it) the media end of the last frame sent before that event."""
    frame_s, end_s, last_due = 0.0, None, 0.0
    for lineno, event in read_events(bundle):
        if event is None:
            raise ConfigError(f"{bundle}: events.jsonl line {lineno} is not a JSON object")
        if event.get("kind") == "start":
            frame_s = float(event.get("frame_ms", 20)) / 1000.0
        elif event.get("dir") == "send":
            last_due = float(event["due"])
        elif event.get("kind") == "context_end":
            end_s = float(event["end_s"]) if "end_s" in event else last_due + frame_s
            break
    if end_s is None:
        raise ConfigError(f"{bundle}: the recorded live session never ended its user turn")
    return end_s


async def replay_run(run_dir: Path, sample_ids: list[str], concurrency: int) -> list[ReplayResult]:
    bundles = session_bundles(run_dir, sample_ids)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(bundle: Path) -> ReplayResult:
        async with gate:
            return await replay_bundle(bundle)

    return list(await asyncio.gather(*(one(b) for b in bundles)))


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def render_replay(results: list[ReplayResult], tolerance_ms: float) -> str:
    rows = []
    for r in results:
        diff = r.diff_ms("latency_s")
        remeasured = r.audit.onset_diff_ms
        send = r.audit.check.send
        rows.append(
            [
                r.sample_id,
                r.recorded["status"],
                r.replayed["status"],
                _ms(r.recorded["latency_s"]),
                _ms(r.replayed["latency_s"]),
                "-" if diff is None else f"{diff:+.1f}",
                f"{r.worst_ms():.1f}",
                "-" if remeasured is None else f"{remeasured:+.1f}",
                f"{send.p99_ms:.1f} / {send.max_ms:.1f}",
                "NO" if r.over_budget else "yes",
                "yes" if r.agrees(tolerance_ms) else "NO",
            ]
        )
    headers = [
        "sample",
        "recorded",
        "replayed",
        "latency ms (rec)",
        "latency ms (replay)",
        "diff ms",
        "worst diff ms",
        "onset re-measured ms",
        "send p99 / max ms",
        "within budget",
        f"agrees (<= {tolerance_ms:g} ms)",
    ]
    agree = sum(r.agrees(tolerance_ms) for r in results)
    text = render_table(headers, rows) + f"\n\n{agree}/{len(results)} sessions agree"
    over = [r for r in results if r.over_budget]
    text += f"; {len(results) - len(over)}/{len(results)} kept their timing budget"
    problems = [f"  {r.sample_id}: over budget ({r.over_budget})" for r in over] + [
        f"  {r.sample_id}: re-measured onset {r.audit.remeasured_onset_s} s, "
        f"recorded {r.audit.recorded_onset_s} s"
        for r in results
        if r.audit.disagrees(tolerance_ms)
    ]
    if problems:
        text += "\n\nsessions with timing problems:\n" + "\n".join(problems)
    return text
