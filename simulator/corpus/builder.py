"""``build_benchmark``: two-speaker calls in, a MIRRORING-style benchmark out.

The published method, step by step (docs/benchmark-build.md):

1. calls from listings (``calls``), every header checked before anything is decoded;
2. turns by VAD per channel, merged into a conversation; candidate pairs: a turn of one speaker
   followed by the other's turn starting within ``max_gap_s`` of its end (``turns``);
3. A's context start: a pause boundary at or before A's turn start, its context about
   ``context_s`` long (pairs without one are dropped before scoring);
4. both turns of every candidate scored; pairs whose dominant emotions differ are dropped;
5. the most frequent emotions capped, seeded (``balance``);
6. audio, the manifest (with the reference scores cached) and the build report written into a
   temporary folder that then takes the output's place, so a failed build leaves nothing half
   written.

Two passes over the audio: the first decodes a call, finds its pairs and scores their turns,
keeping only the scores; the second decodes the calls that supplied samples and cuts them. So
memory holds one call at a time, whatever the corpus size.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from duplexsim.core.audio import write_audio
from duplexsim.core.benchmark import MANIFEST_NAME
from duplexsim.core.emotions import EMOTION_NAMES
from duplexsim.core.errors import ConfigError
from duplexsim.core.files import write_text_atomic
from duplexsim.core.vad import VadConfig
from duplexsim.corpus.balance import Balance, BalanceConfig, balance
from duplexsim.corpus.calls import CallSpec, load_call, read_listings
from duplexsim.corpus.clips import FloatArray, analyse, context_mix, turn_clip
from duplexsim.corpus.report import render_markdown
from duplexsim.corpus.turn_scores import TurnScore, score_clips
from duplexsim.corpus.turns import Pair, TurnConfig, candidate_pairs, context_start
from duplexsim.runscores.cache import manifest_key
from duplexsim.scoring.service.api import Scoring

__all__ = [
    "REPORT_JSON",
    "REPORT_MD",
    "BuildOptions",
    "BuildResult",
    "Timings",
    "build_benchmark",
]

REPORT_JSON = "build-report.json"
REPORT_MD = "build-report.md"
REPORT_VERSION = 1
RATE = 16000

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BuildOptions:
    turns: TurnConfig = field(default_factory=TurnConfig)
    balance: BalanceConfig = field(default_factory=BalanceConfig)
    vad: VadConfig = field(default_factory=VadConfig)
    audio_format: Literal["flac", "wav"] = "flac"
    length_tolerance_s: float = 0.05  # two mono files of one call may differ this much

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["turns"]["max_context_s"] = self.turns.context_limit_s
        return out


@dataclass
class Timings:
    decode_s: float = 0.0  # reading and resampling call audio (both passes)
    turns_s: float = 0.0  # VAD, turns, pairs and contexts
    score_s: float = 0.0  # cutting turn clips and scoring them
    write_s: float = 0.0  # cutting, mixing and writing samples, manifest and report
    total_s: float = 0.0


@dataclass(frozen=True)
class BuildResult:
    out: Path
    samples: int
    report: dict[str, Any]
    timings: Timings


@dataclass(frozen=True, eq=False)
class _Candidate:
    call: int  # index into the calls
    pair: Pair
    context_start_s: float
    a: TurnScore
    b: TurnScore


@dataclass
class _Counts:
    calls: int = 0
    audio_s: float = 0.0
    turns: int = 0
    backchannels: int = 0
    short_segments: int = 0
    adjacent: int = 0
    overlapping: int = 0
    too_far: int = 0
    candidates: int = 0
    no_boundary: int = 0
    turns_scored: int = 0
    turns_unscored: int = 0
    unscored: dict[str, str] = field(default_factory=dict)


async def build_benchmark(
    listings: Sequence[str | Path],
    out: Path,
    scoring: Scoring,
    scorer: str,
    options: BuildOptions | None = None,
    *,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> BuildResult:
    """Build a benchmark into ``out`` (which must not hold anything unless ``overwrite``)."""
    opts = options or BuildOptions()
    say = progress or (lambda _: None)
    started = time.perf_counter()
    _check_out(out, overwrite)
    calls = read_listings(listings, length_tolerance_s=opts.length_tolerance_s)
    _check_inputs_outside(out, listings, calls)
    timings = Timings()
    counts = _Counts()
    candidates = await _survey(calls, opts, scoring, scorer, counts, timings, say)
    scored = [c for c in candidates if c.a.vector is not None and c.b.vector is not None]
    same = [c for c in scored if c.a.emotion == c.b.emotion]
    chosen = balance([str(c.b.emotion) for c in same], opts.balance)
    kept = [same[i] for i in chosen.kept]
    report = _report(listings, calls, scorer, opts, counts, candidates, scored, same, kept, chosen)
    say(f"writing {len(kept)} samples")
    t = time.perf_counter()
    decode_s = _write(out, overwrite, calls, kept, scorer, opts, report)
    timings.decode_s += decode_s
    timings.write_s += time.perf_counter() - t - decode_s
    timings.total_s = time.perf_counter() - started
    return BuildResult(out, len(kept), report, timings)


# ------------------------------------------------------------------------- pass 1: pairs, scores


async def _survey(
    calls: Sequence[CallSpec],
    opts: BuildOptions,
    scoring: Scoring,
    scorer: str,
    counts: _Counts,
    timings: Timings,
    say: Progress,
) -> list[_Candidate]:
    out: list[_Candidate] = []
    cfg = opts.turns
    for k, call in enumerate(calls):
        say(f"[{k + 1}/{len(calls)}] {call.id}: turns and pairs")
        t0 = time.perf_counter()
        channels = load_call(call)
        t1 = time.perf_counter()
        conv = analyse(channels, cfg, opts.vad)
        pairs, overlapping, too_far = candidate_pairs(conv.turns, cfg.max_gap_s)
        placed = [(p, context_start(p.a.start_s, p.a.end_s, conv.boundaries, cfg)) for p in pairs]
        with_context = [(p, s) for p, s in placed if s is not None]
        t2 = time.perf_counter()
        need = sorted({t.index for p, _ in with_context for t in (p.a, p.b)})
        clips = [turn_clip(channels, conv.turns[i], cfg.max_reference_s) for i in need]
        del channels
        say(f"[{k + 1}/{len(calls)}] {call.id}: scoring {len(clips)} turns")
        scores = dict(zip(need, await score_clips(scoring, scorer, clips), strict=True))
        t3 = time.perf_counter()
        timings.decode_s += t1 - t0
        timings.turns_s += t2 - t1
        timings.score_s += t3 - t2
        counts.calls += 1
        counts.audio_s += conv.duration_s
        counts.turns += len(conv.turns)
        counts.backchannels += conv.backchannels
        counts.short_segments += conv.short_segments
        counts.adjacent += max(len(conv.turns) - 1, 0)
        counts.overlapping += overlapping
        counts.too_far += too_far
        counts.candidates += len(pairs)
        counts.no_boundary += len(pairs) - len(with_context)
        for index, score in scores.items():
            if score.vector is None:
                counts.turns_unscored += 1
                counts.unscored[f"{call.id}/turn-{index:04d}"] = str(score.error)
            else:
                counts.turns_scored += 1
        out += [_Candidate(k, p, s, scores[p.a.index], scores[p.b.index]) for p, s in with_context]
    return out


# ------------------------------------------------------------------------- the report


def _report(
    listings: Sequence[str | Path],
    calls: Sequence[CallSpec],
    scorer: str,
    opts: BuildOptions,
    counts: _Counts,
    candidates: Sequence[_Candidate],
    scored: Sequence[_Candidate],
    same: Sequence[_Candidate],
    kept: Sequence[_Candidate],
    chosen: Balance,
) -> dict[str, Any]:
    languages = sorted({c.language for c in calls})
    cells = Counter((str(c.b.emotion), calls[c.call].language) for c in kept)
    same_counts = Counter(str(c.b.emotion) for c in same)
    steps = {
        "adjacent_pairs": counts.adjacent,
        "dropped_overlapping": counts.overlapping,
        "dropped_gap_too_long": counts.too_far,
        "candidate_pairs": counts.candidates,
        "dropped_no_pause_boundary": counts.no_boundary,
        "dropped_unscored": len(candidates) - len(scored),
        "dropped_emotions_differ": len(scored) - len(same),
        "same_emotion": len(same),
        "dropped_balancing": chosen.dropped,
        "kept": len(kept),
    }
    return {
        "version": REPORT_VERSION,
        "scorer": scorer,
        "seed": opts.balance.seed,
        "listings": [str(p) for p in listings],
        "calls": counts.calls,
        "languages": languages,
        "audio_hours": round(counts.audio_s / 3600.0, 4),
        "turns": {
            "turns": counts.turns,
            "backchannels_dropped": counts.backchannels,
            "short_segments_dropped": counts.short_segments,
            "scored": counts.turns_scored,
            "unscored": counts.turns_unscored,
        },
        "steps": steps,
        "same_emotion_by_emotion": {e: same_counts[e] for e in EMOTION_NAMES if same_counts[e]},
        "balancing": {
            "top": opts.balance.top,
            "cap": opts.balance.cap,
            "capped": {e: {"before": b, "kept": a} for e, (b, a) in chosen.capped.items()},
        },
        "counts": {
            e: {lang: cells[(e, lang)] for lang in languages}
            for e in EMOTION_NAMES
            if any(cells[(e, lang)] for lang in languages)
        },
        "unscored_turns": dict(sorted(counts.unscored.items())[:50]),
        "options": opts.to_dict(),
    }


# ------------------------------------------------------------------------- pass 2: writing


def _check_out(out: Path, overwrite: bool) -> None:
    """Refuse an output that cannot be a folder (it, or a folder above it, is a file) or that
    holds something, unless ``overwrite``; before any audio is read."""
    try:
        for folder in (out, *out.absolute().parents):
            if folder.exists() or folder.is_symlink():
                if not folder.is_dir():
                    raise ConfigError(f"{folder}: exists and is not a folder")
                break
        if out.is_dir() and any(out.iterdir()) and not overwrite:
            raise ConfigError(f"{out}: folder is not empty (use --overwrite to replace it)")
    except OSError as exc:
        raise ConfigError(f"{out}: cannot use as the output folder: {_reason(exc)}") from None


def _check_inputs_outside(
    out: Path, listings: Sequence[str | Path], calls: Sequence[CallSpec]
) -> None:
    """Refuse an output folder that is, or holds, a listing or call audio: ``--overwrite``
    would delete the recordings with the folder it replaces."""
    here = _forms(out)
    inputs = [("the call listing", Path(p)) for p in listings] + [
        ("the call audio", p) for c in calls for p in (c.audio, c.a, c.b) if p is not None
    ]
    for what, path in inputs:
        for form in _forms(path):
            if any(form == o or o in form.parents for o in here):
                raise ConfigError(
                    f"{out}: holds {what} {path}; choose an output folder outside the inputs"
                )


def _forms(path: Path) -> set[Path]:
    """The path made absolute, as written and with links resolved."""
    forms = {Path(os.path.abspath(path))}
    with contextlib.suppress(OSError, RuntimeError, ValueError):
        forms.add(path.resolve())
    return forms


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _r(t: float) -> float:
    return round(t, 3)


def _f32(value: float) -> float:
    """A scorer's float32 value as the shortest decimal that reads back as the same float32."""
    return float(str(np.float32(value)))


def _write(
    out: Path,
    overwrite: bool,
    calls: Sequence[CallSpec],
    kept: Sequence[_Candidate],
    scorer: str,
    opts: BuildOptions,
    report: dict[str, Any],
) -> float:
    """Write everything; returns the seconds spent decoding call audio."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        remove_leftovers(out)
        tmp = Path(tempfile.mkdtemp(prefix=f"{_building(out)}{os.getpid()}-", dir=out.parent))
    except OSError as exc:
        where = exc.filename if isinstance(exc.filename, str) else out.parent
        raise ConfigError(
            f"{out}: cannot create the output folder ({where}): {_reason(exc)}"
        ) from None
    try:
        return _write_into(tmp, out, overwrite, calls, kept, scorer, opts, report)
    except OSError as exc:
        raise ConfigError(f"{out}: cannot write: {_reason(exc)}") from None


def _write_into(
    tmp: Path,
    out: Path,
    overwrite: bool,
    calls: Sequence[CallSpec],
    kept: Sequence[_Candidate],
    scorer: str,
    opts: BuildOptions,
    report: dict[str, Any],
) -> float:
    decode_s = 0.0
    try:
        lines = []
        by_call: dict[int, list[_Candidate]] = {}
        for c in kept:
            by_call.setdefault(c.call, []).append(c)
        for k in sorted(by_call):
            t = time.perf_counter()
            channels = load_call(calls[k])
            decode_s += time.perf_counter() - t
            for c in sorted(by_call[k], key=lambda c: c.pair.a.start_s):
                lines.append(_write_sample(tmp, channels, calls[k], c, scorer, opts))
        write_text_atomic(tmp / MANIFEST_NAME, "".join(json.dumps(x) + "\n" for x in lines))
        write_text_atomic(tmp / REPORT_JSON, json.dumps(report, indent=2) + "\n")
        write_text_atomic(tmp / REPORT_MD, render_markdown(report))
        _install(tmp, out, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return decode_s


def _write_sample(
    root: Path,
    channels: FloatArray,
    call: CallSpec,
    c: _Candidate,
    scorer: str,
    opts: BuildOptions,
) -> dict[str, Any]:
    a, b = c.pair.a, c.pair.b
    sample_id = f"{call.id}-{a.index:04d}"
    ext = opts.audio_format
    context = f"audio/{sample_id}.context.{ext}"
    reference = f"audio/{sample_id}.reference.{ext}"
    write_audio(root / context, context_mix(channels, c.context_start_s, a.end_s), RATE)
    write_audio(root / reference, turn_clip(channels, b, opts.turns.max_reference_s), RATE)
    assert c.b.vector is not None
    return {
        "id": sample_id,
        "language": call.language,
        "emotion": c.b.emotion,
        "context": context,
        "reference": reference,
        # context_start never starts after A's turn: max() only clears float noise (-0.0)
        "context_turn_start_s": _r(max(a.start_s - c.context_start_s, 0.0)),
        "gap_s": _r(c.pair.gap_s),
        "source_id": call.id,
        "reference_scores": {
            _scores_key(scorer, c.b): {
                e: _f32(v) for e, v in zip(EMOTION_NAMES, c.b.vector, strict=True)
            }
        },
        "meta": {
            "a_channel": a.speaker,
            "context_start_s": _r(c.context_start_s),
            "a_turn_s": [_r(a.start_s), _r(a.end_s)],
            "b_turn_s": [_r(b.start_s), _r(b.end_s)],
        },
    }


def _scores_key(scorer: str, score: TurnScore) -> str:
    """``<scorer>@<identity key>`` when the scorer reported its whole identity (runs on this
    benchmark then take these scores instead of scoring the references), else its name."""
    who = score.identity
    return manifest_key(who) if who is not None and who.known else scorer


def _building(out: Path) -> str:
    return f".{out.name}.building-"


def remove_leftovers(out: Path) -> int:
    """Delete what killed builds of ``out`` left beside it: temporary folders of builds whose
    process is gone (the name holds its pid) and replaced folders not yet removed."""
    removed = 0
    for entry in out.parent.iterdir():
        name = entry.name
        if name.startswith(_building(out)):
            pid = name[len(_building(out)) :].partition("-")[0]
            if pid.isdecimal() and _alive(int(pid)):
                continue  # a build running right now
        elif not name.startswith(f".{out.name}.old-"):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _install(tmp: Path, out: Path, overwrite: bool) -> None:
    """Put the finished build in ``out``'s place (an empty or, with ``overwrite``, any folder)."""
    os.chmod(tmp, 0o777 & ~_umask())
    if out.is_dir():
        if any(out.iterdir()):
            if not overwrite:
                raise ConfigError(f"{out}: folder is not empty (use --overwrite to replace it)")
            old = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:8]}")
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
            return
        out.rmdir()
    tmp.rename(out)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
