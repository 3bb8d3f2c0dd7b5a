"""Replay recorded sessions through the session engine; compare their timing with the recording.

A recording may come from elsewhere: its files are read through ``duplexsim.core.runfolder``, its
settings and outcome are checked before they are used (a session's deadline within the longest
session), its context must be a file of the run's benchmark, and a replay that runs past the
length of the session it replays is stopped there: nothing in a recording can make it wait longer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from numpy.typing import NDArray

from duplexsim.clients.base import ClientConfig
from duplexsim.clients.recorded import ReplayClient
from duplexsim.core.audio import read_audio
from duplexsim.core.bundle import INPUT, MAX_SESSION_S, META, BundleMeta, number_problem
from duplexsim.core.errors import ConfigError, InputError, RunFolderError
from duplexsim.core.partnerfield import KINDS as PARTNER_KINDS
from duplexsim.core.partnerfield import MAX_STEPS, ScriptEntry
from duplexsim.core.runbench import RunBenchmark
from duplexsim.core.runfolder import RunFolder
from duplexsim.core.textable import render_table
from duplexsim.replay.audit import TimingAudit, audit_bundle
from duplexsim.session.engine import CONTEXT_RATE, SessionSettings, run_session
from duplexsim.session.partneraudio import PartnerAudio, read_partner_clips
from duplexsim.session.recordedpartner import RecordedPartner
from duplexsim.session.useraudio import UserAudio

__all__ = [
    "Prepared",
    "ReplayResult",
    "prepare_replay",
    "render_replay",
    "replay_run",
    "session_bundles",
]

_FIELDS = ("onset_s", "latency_s", "duration_s")
SLACK_S = 10.0  # a replay may run this much past the recorded session's length
_LIMIT = MAX_SESSION_S * 1000  # no setting's number is larger (milliseconds of an hour)


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
        """The first recorded figure over the session's timing budget, if any (precision)."""
        return self.audit.check.invalid

    @property
    def unfaithful(self) -> str | None:
        """Why the recorded stream was not the one a person's client sends, if it was not (input
        fidelity: a frame too late for a receiver not to hear the gap)."""
        return self.audit.check.unfaithful


def session_bundles(run_dir: RunFolder | Path, sample_ids: list[str]) -> list[Path]:
    run = RunFolder.of(run_dir)
    bundles = run.sessions()
    if sample_ids:
        known = {p.name for p in bundles}
        missing = [s for s in sample_ids if s not in known]
        if missing:
            raise ConfigError(f"{run}: no recorded session for {', '.join(missing)}")
        bundles = [p for p in bundles if p.name in sample_ids]
    return bundles


def _summary(status: str, end_reason: str, timing: Mapping[str, Any] | None) -> dict[str, Any]:
    timing = timing or {}
    return {"status": status, "end_reason": end_reason, **{f: timing.get(f) for f in _FIELDS}}


@dataclass(frozen=True)
class Prepared:
    """A recorded session, checked and ready to replay."""

    meta: BundleMeta
    settings: SessionSettings
    context: Any  # the samples sent, at CONTEXT_RATE
    limit_s: float  # how long its replay may run: the recorded session's length and some
    client: ReplayClient
    script: list[ScriptEntry]  # a partner session's steps, checked ([]: none)


def prepare_replay(run: RunFolder, bundle: Path) -> Prepared:
    """Everything a replay reads of a recording, read and checked (RunFolderError naming the
    file and field of what no recorded session can hold); nothing is replayed yet."""
    meta = run.meta(bundle)
    where = str(bundle / META)
    settings = _settings(meta.settings, where)
    _check_outcome(meta.outcome, where)
    bench = RunBenchmark(run, {"benchmark": run.recorded("benchmark")})
    context = _context(run, bundle, meta, bench)
    limit_s = _recorded_length(run, bundle) + SLACK_S
    script = _partner_script(meta, bench, where)
    client = ReplayClient(ClientConfig(url=str(bundle)))
    return Prepared(meta, settings, context, limit_s, client, script)


async def replay_bundle(bundle: Path, run: RunFolder | None = None) -> ReplayResult:
    run = run or RunFolder(bundle.parent.parent)
    ready = prepare_replay(run, bundle)
    meta, settings = ready.meta, ready.settings
    user: UserAudio | NDArray[np.float32] = ready.context
    if ready.script:  # the partner decides again, from the same model audio
        clips = await asyncio.to_thread(read_partner_clips, ready.script, settings.vad)
        user = PartnerAudio(ready.context, clips, settings.turns)
    elif meta.extra.get("partner_model"):  # a partner model: what it said, where it said it
        user = await asyncio.to_thread(_recorded_partner, run, bundle, ready.context, meta.outcome)
    session = run_session(
        ready.client, user, settings, window_start_s=meta.sample.context_turn_start_s or 0.0
    )
    try:
        outcome = await asyncio.wait_for(session, ready.limit_s)
    except TimeoutError:
        raise RunFolderError(
            f"{bundle}: the replay ran {ready.limit_s:.0f} s, past the recorded session's "
            "length: its settings or events do not match its recording"
        ) from None
    rec = meta.outcome
    replayed_timing = None
    if outcome.timing is not None:
        replayed_timing = {
            "onset_s": outcome.timing.onset_s,
            "latency_s": outcome.timing.latency_s,
            "duration_s": outcome.timing.duration_s,
        }
    return ReplayResult(
        meta.sample.id,
        _summary(rec["status"], rec["end_reason"], rec.get("timing")),
        _summary(outcome.status, outcome.end_reason, replayed_timing),
        await asyncio.to_thread(audit_bundle, bundle, meta, run),
    )


def _context(run: RunFolder, bundle: Path, meta: BundleMeta, bench: RunBenchmark) -> Any:
    """The context the session sent: a live session's turn is its input.wav (up to where the
    turn ended), a benchmark session's a file of the run's benchmark."""
    sample = meta.sample
    live = sample.kind == "live" or sample.context is None
    where = f"{bundle / META}: field 'sample.context'"
    path = run.file(bundle, INPUT) if live else bench.audio(sample.context, where)
    if path is None:
        raise RunFolderError(f"{bundle / INPUT}: not recorded")
    try:
        context = read_audio(path, sample_rate=CONTEXT_RATE).samples
    except InputError as exc:
        raise RunFolderError(f"{bundle}: cannot read the session's context ({exc})") from None
    return context[: round(_turn_end_s(run, bundle) * CONTEXT_RATE)] if live else context


def _partner_script(meta: BundleMeta, bench: RunBenchmark, where: str) -> list[ScriptEntry]:
    """A partner session's recorded script, each step of the kinds, numbers and files a
    manifest allows (its clips and references files of the run's benchmark); [] for none."""
    script = meta.extra.get("partner")
    if not script:
        return []
    if not isinstance(script, list) or len(script) > MAX_STEPS:
        raise RunFolderError(f"{where}: field 'partner' is not a list of steps")
    return [_step(step, bench, f"{where}: field 'partner[{i}]") for i, step in enumerate(script)]


def _step(step: object, bench: RunBenchmark, where: str) -> ScriptEntry:
    if not isinstance(step, dict) or step.get("kind") not in PARTNER_KINDS:
        raise RunFolderError(f"{where}': not a step of a known kind")
    for name in ("after_onset_s", "at_pause_s", "gap_s", "timeout_s", "at_s"):
        value = step.get(name)
        problem = None if value is None else number_problem(value, 0.0, MAX_SESSION_S)
        if problem:
            raise RunFolderError(f"{where}.{name}': {problem}")
    if not isinstance(step.get("emotion"), str | None):
        raise RunFolderError(f"{where}.emotion': not a string")
    for name in ("clip", "reference"):
        value = step.get(name)
        if name == "clip" or value is not None:
            if not isinstance(value, str):
                raise RunFolderError(f"{where}.{name}': not a path")
            bench.audio(value, f"{where}.{name}'")
    return ScriptEntry.from_dict(step)


def _recorded_length(run: RunFolder, bundle: Path) -> float:
    """How long the recorded session lasted on its timeline: input.wav holds everything sent,
    the context and the silence after it, to the session's end."""
    path = run.file(bundle, INPUT)
    if path is None:
        return MAX_SESSION_S
    try:
        info = sf.info(str(path))
        return min(MAX_SESSION_S, float(info.frames) / float(info.samplerate))
    except (RuntimeError, OSError, ZeroDivisionError):
        return MAX_SESSION_S  # the audit reports an unreadable recording


def _settings(raw: Mapping[str, Any], where: str) -> SessionSettings:
    """The recorded settings, if a session could have run with them: every number finite and
    within an hour's milliseconds, and the session's deadline within the longest session."""
    bad = _bad_number(raw, "settings")
    if bad:
        raise RunFolderError(f"{where}: {bad}")
    frame_ms = raw.get("frame_ms")
    if frame_ms is not None and number_problem(frame_ms, 1, 1000, integer=True):
        raise RunFolderError(f"{where}: field 'settings.frame_ms': {frame_ms!r} is no frame size")
    try:
        settings = SessionSettings.from_description(dict(raw))
    except KeyError as exc:
        raise RunFolderError(f"{where}: field 'settings.{exc.args[0]}' is missing") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise RunFolderError(f"{where}: field 'settings': {exc}") from None
    deadline = settings.deadline_s(0.0, 0.0)
    if not deadline <= MAX_SESSION_S:
        raise RunFolderError(
            f"{where}: field 'settings': a session with these settings lasts {deadline:g} s, "
            f"longer than any session ({MAX_SESSION_S:g} s)"
        )
    return settings


def _bad_number(value: Any, field: str) -> str | None:
    """The first number in ``value`` (a JSON value) that no setting can hold, with its field."""
    if isinstance(value, Mapping):
        items: Any = ((f"{field}.{k}", v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{field}[{i}]", v) for i, v in enumerate(value))
    elif isinstance(value, int | float) and not isinstance(value, bool):
        problem = number_problem(value, -_LIMIT, _LIMIT)
        return None if problem is None else f"field '{field}': {problem}"
    else:
        return None
    return next((bad for name, v in items if (bad := _bad_number(v, name))), None)


def _check_outcome(outcome: Mapping[str, Any], where: str) -> None:
    """What replay and its audit read of the recorded outcome, of its type and range."""
    for name in ("status", "end_reason"):
        if not isinstance(outcome.get(name), str):
            raise RunFolderError(f"{where}: field 'outcome.{name}' is not a string")
    timing = _section(outcome, "timing", where, "outcome")
    window = _section(
        _section(outcome, "check", where, "outcome"), "window", where, "outcome.check"
    )
    for field, values, limit in (
        ("timing", timing, MAX_SESSION_S),
        ("check.window", window, _LIMIT),
    ):
        for name, value in values.items():
            if value is None or (field == "timing" and not name.endswith("_s")):
                continue
            problem = number_problem(value, -limit, limit)
            if problem:
                raise RunFolderError(f"{where}: field 'outcome.{field}.{name}': {problem}")


def _section(parent: Mapping[str, Any], name: str, where: str, prefix: str) -> Mapping[str, Any]:
    value = parent.get(name)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RunFolderError(f"{where}: field '{prefix}.{name}' is not an object")
    return value


def _recorded_partner(
    run: RunFolder, bundle: Path, context: NDArray[np.float32], outcome: Mapping[str, Any]
) -> RecordedPartner:
    path = run.file(bundle, INPUT)
    if path is None:
        raise RunFolderError(f"{bundle / INPUT}: not recorded")
    try:
        heard = read_audio(path, max_duration_s=MAX_SESSION_S)
    except InputError as exc:
        raise RunFolderError(f"{bundle}: cannot read what the model heard ({exc})") from None
    steps = outcome.get("partner") or []
    model = outcome.get("partner_model")
    ended_by = model.get("ended_by") if isinstance(model, Mapping) else None
    if not isinstance(steps, list):
        raise RunFolderError(f"{bundle / META}: field 'outcome.partner' is not a list")
    return RecordedPartner(context, heard.samples, heard.sample_rate, steps, ended_by)


def _turn_end_s(run: RunFolder, bundle: Path) -> float:
    """Where a live session's user turn ended: as its ``context_end`` event says, or (recorded
    before the event said it) the media end of the last frame sent before that event."""
    frame_s, end_s, last_due = 0.0, None, 0.0
    for event in run.strict_events(bundle):
        if event.get("kind") == "start":
            frame_s = float(event.get("frame_ms", 20)) / 1000.0
        elif event.get("dir") == "send" and "due" in event:
            last_due = float(event["due"])
        elif event.get("kind") == "context_end":
            end_s = float(event["end_s"]) if "end_s" in event else last_due + frame_s
            break
    if end_s is None:
        raise RunFolderError(f"{bundle}: the recorded live session never ended its user turn")
    return max(0.0, end_s)


async def replay_run(
    run_dir: RunFolder | Path, sample_ids: list[str], concurrency: int
) -> list[ReplayResult]:
    run = RunFolder.of(run_dir)
    bundles = session_bundles(run, sample_ids)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(bundle: Path) -> ReplayResult:
        async with gate:
            return await replay_bundle(bundle, run)

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
                "LOST" if r.unfaithful else "kept",
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
        "input fidelity",
        "within budget",
        f"agrees (<= {tolerance_ms:g} ms)",
    ]
    agree = sum(r.agrees(tolerance_ms) for r in results)
    text = render_table(headers, rows) + f"\n\n{agree}/{len(results)} sessions agree"
    over = [r for r in results if r.over_budget]
    lost = [r for r in results if r.unfaithful]
    text += (
        f"; {len(results) - len(lost)}/{len(results)} kept input fidelity"
        f"; {len(results) - len(over)}/{len(results)} kept their timing budget"
    )
    problems = (
        [f"  {r.sample_id}: input fidelity lost ({r.unfaithful})" for r in lost]
        + [f"  {r.sample_id}: over budget ({r.over_budget})" for r in over if not r.unfaithful]
        + [
            f"  {r.sample_id}: re-measured onset {r.audit.remeasured_onset_s} s, "
            f"recorded {r.audit.recorded_onset_s} s"
            for r in results
            if r.audit.disagrees(tolerance_ms)
        ]
    )
    if problems:
        text += "\n\nsessions with timing problems:\n" + "\n".join(problems)
    return text
