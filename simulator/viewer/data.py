"""What the viewer shows, gathered from a run directory into typed values.

A run: its result rows and, when it has been scored, the report's metrics and each sample's 12
emotion scores (joined by ``duplexsim.report.data``, never recomputed here). A session: its row,
its bundle's settings, both tracks at 16 kHz with their voice activity, the protocol events, and the
traffic in both directions. Whatever is missing or unreadable (a bundle, a track, an event line, a
setting that is not a finite number where one belongs, a path that leads out of the run folder)
is noted and left out, so a failed session still has a page that says why.

Everything is read through ``duplexsim.core.runfolder`` (the run may come from elsewhere) and in
bounded memory whatever the session's length: events are streamed (at most ``MAX_MARKERS`` of
them drawn, with a note), and a track too long to embed is drawn block by block.
"""

from __future__ import annotations

import dataclasses
import difflib
import heapq
import math
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from numpy.typing import NDArray

from duplexsim.core.audio import read_audio
from duplexsim.core.bundle import EVENTS, INPUT, MAX_SESSION_S, META, OUTPUT, STEREO
from duplexsim.core.emotions import EMOTION_NAMES
from duplexsim.core.errors import InputError
from duplexsim.core.provenance import model_label
from duplexsim.core.runfolder import RunFolder
from duplexsim.core.timing import speech_end
from duplexsim.core.vad import BEFORE_RUN_RULE, Segment, VadConfig, frame_flags, segments
from duplexsim.report.data import RunReport, available_scorers, build_report, sample_scores
from duplexsim.run.store import ResultRow, load_results
from duplexsim.runscores.cache import ScoreCache, cache_path
from duplexsim.scoring.metrics import top_emotions
from duplexsim.viewer.envelope import Envelope, density, envelope
from duplexsim.viewer.layout import page_names
from duplexsim.viewer.stream import drawn_track

__all__ = [
    "AUDIO_RATE",
    "EmotionScores",
    "Marker",
    "RunView",
    "SessionView",
    "Track",
    "Traffic",
    "load_run",
    "load_session",
]

AUDIO_RATE = 16000  # every track is shown and embedded at this rate
COLUMNS = 1600  # envelope columns per track
TRAFFIC_BIN_S = 0.1
LATE_SEND_MS = 10.0  # a send this late is marked on the traffic strip
MAX_LATE_SENDS = 500
MAX_MARKERS = 2000
MAX_DETAIL = 400  # characters of an event's detail shown (a transcript may be a book long)
MAX_AUDIO_S = MAX_SESSION_S
# the bundle's files for each player: user, model, and both (stereo: user left, model right)
AUDIO_FILES = {"user": INPUT, "model": OUTPUT, "both": STEREO}
FloatArray = NDArray[np.float32]


@dataclass(frozen=True)
class EmotionScores:
    """The 12 emotion scores (EMOTIONS order) of a sample's reply and of its reference."""

    label: str  # the benchmark's reference emotion r_i
    reply: tuple[float, ...] | None  # None: no reply, or the reply was not scored
    reference: tuple[float, ...] | None
    replied: bool = True

    @property
    def reply_top(self) -> str | None:
        return _top(self.reply)

    @property
    def reference_top(self) -> str | None:
        return _top(self.reference)

    @property
    def match(self) -> bool | None:
        """As the metrics count it: None where the sample is left out of N."""
        if self.reference is None:
            return None
        if not self.replied:
            return False
        return None if self.reply is None else self.reply_top == self.label


def _top(values: tuple[float, ...] | None) -> str | None:
    if values is None:
        return None
    index = int(top_emotions(np.asarray([values], dtype=np.float64), np.asarray([True]))[0])
    return EMOTION_NAMES[index]


@dataclass(frozen=True)
class RunView:
    run_dir: Path
    run_id: str
    model: str
    rows: list[ResultRow]
    report: RunReport | None  # None: the run has not been scored
    scores: dict[str, EmotionScores] = field(default_factory=dict)
    pages: dict[str, str] = field(default_factory=dict)  # sample id -> its page's file name
    # unusable values in a row, by sample id ("": in the run's metadata)
    row_notes: dict[str, list[str]] = field(default_factory=dict)
    folder: RunFolder | None = None  # how its files are read (None: as a run from anywhere)

    @property
    def source(self) -> RunFolder:
        return self.folder or RunFolder(self.run_dir)

    def page(self, sample_id: str) -> str:
        """The session page's file name, unique within the run (see ``layout.page_names``)."""
        return self.pages.get(sample_id) or page_names([sample_id])[sample_id]

    def row(self, sample_id: str) -> ResultRow:
        for row in self.rows:
            if row.sample_id == sample_id:
                return row
        near = difflib.get_close_matches(sample_id, [r.sample_id for r in self.rows], n=1)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        raise InputError(f"{self.run_dir}: no session '{sample_id}' in this run{hint}")

    def neighbours(self, sample_id: str) -> tuple[str | None, str | None]:
        ids = [r.sample_id for r in self.rows]
        i = ids.index(sample_id)
        return (ids[i - 1] if i > 0 else None, ids[i + 1] if i + 1 < len(ids) else None)


def load_run(run_dir: RunFolder | Path, scorer: str | None = None) -> RunView:
    """The run's rows and, when scored, its report and per-sample scores (``scorer`` as for
    ``duplexsim report``: by default the comparable scorer when cached, else the first)."""
    folder = RunFolder.of(run_dir)
    run_dir = folder.path
    results = load_results(folder)
    meta, rows = results.meta, results.rows
    report: RunReport | None = None
    scores: dict[str, EmotionScores] = {}
    if scorer is not None or available_scorers(folder):
        report = build_report(folder, scorer)
        cache = ScoreCache(cache_path(folder, report.scorer), report.scorer)
        status = {row.sample_id: row.status for row in rows}
        for s in sample_scores(rows, cache)[0]:  # rows without a reference have no entry
            scores[s.sample_id] = EmotionScores(
                label=s.emotion,
                reply=_floats(s.reply),
                reference=_floats(s.reference),
                # a partner's next turn (``<id>.turn<k>``) has no row of its own
                replied=status.get(s.sample_id, "ok" if s.reply is not None else "") == "ok",
            )
        for row in rows:  # a session without a reference (``talk``): its reply's scores only
            if not row.emotion:
                reply = _reply_vector(cache, row.sample_id)
                scores[row.sample_id] = EmotionScores("", reply, None, row.status == "ok")
    model = model_label(_section(meta, "model"))
    return RunView(
        run_dir,
        str(meta.get("run_id", run_dir.name)),
        model,
        rows,
        report,
        scores,
        page_names(row.sample_id for row in rows),
        results.problems,
        folder,
    )


def _number(value: object) -> float | None:
    """A finite number, else None: strings, booleans, NaN and infinities are not numbers here."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _reply_vector(cache: ScoreCache, sample_id: str) -> tuple[float, ...] | None:
    return _floats(cache.emotions(f"reply/{sample_id}"))


def _floats(values: NDArray[Any] | None) -> tuple[float, ...] | None:
    return None if values is None else tuple(float(v) for v in values)


@dataclass(frozen=True)
class Marker:
    """A protocol or session event on the timeline."""

    t: float
    kind: str  # speech_started, end_of_turn, transcript, error, context_end, reply_end, ...
    direction: str  # send, recv, local
    detail: str


@dataclass(frozen=True)
class PartnerMark:
    """A partner's step that fired: its clip on the user's lane, and why it played."""

    at_s: float
    end_s: float
    kind: str  # interrupt, backchannel, next_turn, distractor
    why: str
    turn: int | None = None  # the user turn it made
    reply_onset_s: float | None = None  # and the model's reply to it


@dataclass(frozen=True)
class Traffic:
    """Audio frames per bin of ``bin_s``: sent, received, and received with sound in them."""

    bin_s: float
    sent: list[int]
    received: list[int]
    voiced: list[int]
    late_sends: list[tuple[float, float]]  # (t, ms late) of sends later than LATE_SEND_MS


@dataclass(frozen=True, eq=False)
class Track:
    samples: FloatArray | None  # mono, AUDIO_RATE; None when the page links the bundle's file
    vad: list[Segment]
    envelope: Envelope

    @property
    def duration_s(self) -> float:
        return self.envelope.duration_s


@dataclass(frozen=True, eq=False)
class SessionView:
    row: ResultRow
    meta: dict[str, Any]  # the bundle's meta.json; {} when there is none
    user: Track | None
    model: Track | None
    duration_s: float
    speech_end_s: float | None  # end of Speaker A's speech
    speech_end_measured: bool  # True: not recorded (failed session), measured from input.wav
    window_start_s: float | None  # where Speaker A's last turn starts
    markers: list[Marker]
    traffic: Traffic | None
    scores: EmotionScores | None
    notes: list[str]
    # the players' bundle files (AUDIO_FILES) that exist; the page links them unless embedded
    files: dict[str, Path] = field(default_factory=dict)
    embedded: bool = True  # False: too long to embed (see load_session's max_embed_s)
    audio_s: float = 0.0  # seconds of audio the three players hold together
    partner: tuple[PartnerMark, ...] = ()  # a partner's steps, on the user's lane

    @property
    def onset_s(self) -> float | None:
        return self.row.onset_s

    @property
    def offset_s(self) -> float | None:
        r = self.row
        return (
            None
            if r.onset_s is None or r.reply_duration_s is None
            else r.onset_s + (r.reply_duration_s)
        )


def load_session(run: RunView, sample_id: str, *, max_embed_s: float | None = None) -> SessionView:
    """The session's page data. ``max_embed_s``: the most seconds of audio (the three players
    together) the page may embed; above it the tracks are drawn block by block and not kept,
    and the page plays the bundle's own files. None: always embed."""
    row = run.row(sample_id)
    notes: list[str] = list(run.row_notes.get(sample_id, []))
    source = run.source
    folder = _bundle(source, row, notes)
    meta = _read_meta(source, folder, notes) if folder else {}
    vad = _vad_config(meta, notes)
    files = _files(source, folder, notes) if folder else {}
    audio_s = _audio_seconds(files)
    embed = max_embed_s is None or audio_s <= max_embed_s
    user = _track(files.get("user"), vad, notes, embed)
    end_s, measured = row.speech_end_s, False
    if end_s is None and user is not None:
        end_s, measured = _measured_end(user, vad), True
    if user is not None and not embed:
        user = dataclasses.replace(user, samples=None)  # drawn; the page links input.wav
    model = _track(files.get("model"), vad, notes, embed)
    events = _read_events(source, folder, notes) if folder else None
    window = _sample_number(meta, "context_turn_start_s", notes)
    times = [t.duration_s for t in (user, model) if t]
    times += [events.last_t] if events is not None and events.count else []
    if times:  # the recording, and every instant marked on it, so none falls off the end
        times += [t for t in (end_s, window) if t is not None]
    duration = max([0.0, *times])
    return SessionView(
        row=row,
        meta=meta,
        user=user,
        model=model,
        duration_s=duration,
        speech_end_s=end_s,
        speech_end_measured=measured and end_s is not None,
        window_start_s=window,
        markers=_markers(events, notes) if events else [],
        traffic=_traffic(events, duration) if events is not None and events.count else None,
        scores=run.scores.get(sample_id),
        notes=notes,
        files={k: v for k, v in files.items() if k in AUDIO_FILES},
        embedded=embed,
        audio_s=audio_s,
        partner=_partner(meta),
    )


def _partner(meta: dict[str, Any]) -> tuple[PartnerMark, ...]:
    """The steps of a partner that fired, with the model's reply to each turn they made (a
    step whose times are not finite numbers is left out; a reply's onset, treated as
    missing)."""
    outcome = _section(meta, "outcome")
    turns = {
        t["turn"]: t
        for t in _list(outcome.get("turns"))
        if isinstance(t, dict) and isinstance(t.get("turn"), int)
    }
    marks = []
    for e in _list(outcome.get("partner")):
        if not isinstance(e, dict) or not e.get("fired"):
            continue
        at, end = _number(e.get("at_s")), _number(e.get("clip_end_s"))
        if at is None or end is None:
            continue
        turn = e.get("opens_turn") if isinstance(e.get("opens_turn"), int) else None
        onset = _number(turns.get(turn, {}).get("onset_s")) if turn is not None else None
        marks.append(
            PartnerMark(
                at,
                end,
                _clipped(str(e.get("partner"))),
                _clipped(str(e.get("why", ""))),
                turn,
                onset,
            )
        )
    return tuple(marks)


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _bundle(source: RunFolder, row: ResultRow, notes: list[str]) -> Path | None:
    try:
        folder = source.bundle(row.bundle, "results")
        found = folder is not None and source.is_bundle(folder)
    except InputError as exc:
        notes.append(str(exc))
        return None
    if not found:
        notes.append("no recording bundle for this session")
        return None
    return folder


def _files(source: RunFolder, folder: Path, notes: list[str]) -> dict[str, Path]:
    """The players' files that are there (a note for each that leads out or is no file)."""
    found = {}
    for key, name in AUDIO_FILES.items():
        try:
            path = source.file(folder, name)
        except InputError as exc:
            notes.append(str(exc))
            continue
        if path is None:
            if key != "both":
                notes.append(f"{name}: not recorded")
            continue
        found[key] = path
    return found


def _measured_end(user: Track, vad: VadConfig) -> float | None:
    """Where Speaker A's speech ends, measured: to the sample when the track is held, else at
    the end of its last voiced frame."""
    if user.samples is not None:
        return speech_end(user.samples, AUDIO_RATE, vad)
    return user.vad[-1].end_s if user.vad else None


def _audio_seconds(files: dict[str, Path]) -> float:
    """How long the three players are together: user, model and their mix (as long as the longer
    of the two, which is what stereo.wav holds)."""
    user, model = (_seconds(files[k]) if k in files else 0.0 for k in ("user", "model"))
    return user + model + max(user, model)


def _seconds(path: Path) -> float:
    try:
        info = sf.info(str(path))
        return float(info.frames) / float(info.samplerate)
    except (RuntimeError, OSError, ZeroDivisionError):
        return 0.0  # unreadable: _track notes why


_SECTIONS = ("sample", "settings", "model", "capabilities")


def _read_meta(source: RunFolder, folder: Path, notes: list[str]) -> dict[str, Any]:
    """meta.json, with every section the viewer reads an object (one that is not is noted and
    left out)."""
    try:
        meta = source.meta_json(folder)
    except InputError as exc:
        notes.append(f"{META}: unreadable ({exc})")
        return {}
    for key in _SECTIONS:
        if key in meta and not isinstance(meta[key], dict):
            notes.append(f"{META}: '{key}' is not an object (left out)")
            del meta[key]
    return meta


def _sample_number(meta: dict[str, Any], key: str, notes: list[str]) -> float | None:
    value = _section(meta, "sample").get(key)
    if value is None:
        return None
    x = _number(value)
    if x is None:
        notes.append(f"meta.json: sample.{key} is not a finite number (treated as missing)")
    return x


_VAD_DEFAULTS = VadConfig()


def _vad_config(meta: dict[str, Any], notes: list[str]) -> VadConfig:
    """The run's VAD settings; the defaults where they are unusable (and a note)."""
    raw = _section(meta, "settings").get("vad")
    if raw is None:
        return _VAD_DEFAULTS
    try:
        if not isinstance(raw, dict):
            raise TypeError("not an object")
        values: dict[str, Any] = {}
        for key, value in raw.items():
            default = getattr(_VAD_DEFAULTS, key)  # AttributeError: an unknown setting
            if isinstance(default, bool):
                if not isinstance(value, bool):
                    raise ValueError(f"{key}={value!r}")
                values[key] = value
                continue
            if isinstance(default, str):
                values[key] = str(value)
                continue
            x = _number(value)
            if x is None or (isinstance(default, int) and not x.is_integer()):
                raise ValueError(f"{key}={value!r}")
            values[key] = int(x) if isinstance(default, int) else x
        return VadConfig(**{**BEFORE_RUN_RULE, **values})
    except (TypeError, ValueError, AttributeError) as exc:
        notes.append(f"meta.json: unusable VAD settings ({exc}); the defaults are used")
        return _VAD_DEFAULTS


def _track(path: Path | None, vad: VadConfig, notes: list[str], embed: bool) -> Track | None:
    """A track drawn: held whole when the page embeds it, else read block by block."""
    if path is None or _frames(path) == 0:  # a session that failed before streaming sent nothing
        return None
    try:
        if not embed:
            drawn = drawn_track(path, AUDIO_RATE, COLUMNS, vad, MAX_AUDIO_S)
            return Track(None, drawn.vad, drawn.envelope)
        samples = read_audio(path, sample_rate=AUDIO_RATE, max_duration_s=MAX_AUDIO_S)
    except InputError as exc:
        notes.append(str(exc))
        return None
    x = samples.samples
    voiced = segments(frame_flags(x, AUDIO_RATE, vad), vad.frame_s)
    return Track(x, voiced, envelope(x, AUDIO_RATE, COLUMNS))


def _frames(path: Path) -> int | None:
    try:
        return int(sf.info(str(path)).frames)
    except (RuntimeError, OSError):
        return None  # read_audio says what is wrong with it


@dataclass
class _Events:
    """What the page draws of a session's events, gathered as they stream by: the first
    ``MAX_MARKERS`` protocol events in time, the audio frames' times, the latest sends."""

    count: int = 0
    last_t: float = 0.0
    marker_count: int = 0
    markers: list[tuple[float, int, Marker]] = field(default_factory=list)  # a max-heap by -t
    sent: array[float] = field(default_factory=lambda: array("d"))
    received: array[float] = field(default_factory=lambda: array("d"))
    voiced: array[float] = field(default_factory=lambda: array("d"))
    late: list[tuple[float, float]] = field(default_factory=list)

    def add(self, event: dict[str, Any]) -> None:
        t = float(event["t"])
        self.count += 1
        self.last_t = max(self.last_t, t)
        if event.get("kind") != "audio":
            self._marker(t, event)
        elif event.get("dir") == "send":
            self.sent.append(t)
            due = event.get("due")
            if due is not None and (t - float(due)) * 1000.0 > LATE_SEND_MS:
                self.late.append((round(t, 4), round((t - float(due)) * 1000.0, 2)))
                if len(self.late) > 2 * MAX_LATE_SENDS:
                    self.late = sorted(self.late)[:MAX_LATE_SENDS]
        elif event.get("dir") == "recv":
            self.received.append(t)
            if not event.get("silent"):
                self.voiced.append(t)

    def _marker(self, t: float, event: dict[str, Any]) -> None:
        marker = Marker(round(t, 6), str(event.get("kind", "?")), str(event.get("dir", "?")), "")
        self.marker_count += 1
        item = (-t, -self.marker_count, dataclasses.replace(marker, detail=_detail(event)))
        if len(self.markers) < MAX_MARKERS:
            heapq.heappush(self.markers, item)
        elif item > self.markers[0]:  # earlier than the latest kept
            heapq.heapreplace(self.markers, item)


def _read_events(source: RunFolder, folder: Path, notes: list[str]) -> _Events | None:
    events = _Events()
    bad: list[str] = []
    try:
        for line in source.events(folder):
            if line.event is None:  # no usable time on the timeline: nothing to show it at
                bad.append(f"line {line.lineno}: {line.problem}")
                continue
            events.add(line.event)
    except InputError as exc:
        notes.append(str(exc))
        return events if events.count else None
    if bad:
        notes.append(f"{EVENTS}: {len(bad)} unreadable line{_s(len(bad))} left out ({bad[0]})")
    return events


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _markers(events: _Events, notes: list[str]) -> list[Marker]:
    if events.marker_count > MAX_MARKERS:
        notes.append(f"{events.marker_count} protocol events; the first {MAX_MARKERS} are shown")
    return [m for _, _, m in sorted(events.markers, reverse=True)]


def _detail(event: dict[str, Any]) -> str:
    kind = event.get("kind")
    if kind == "transcript":
        return _clipped(str(event.get("text", ""))) + (" (final)" if event.get("final") else "")
    if kind == "error":
        return _clipped(f"{event.get('reason', 'error')}: {event.get('message', '')}")
    rest = {k: v for k, v in event.items() if k not in ("t", "dir", "kind")}
    return _clipped(", ".join(f"{k}={_clipped(str(v))}" for k, v in rest.items()))


def _clipped(text: str) -> str:
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"


def _traffic(events: _Events, duration_s: float) -> Traffic:
    bins = max(1, math.ceil(duration_s / TRAFFIC_BIN_S))
    span = bins * TRAFFIC_BIN_S
    return Traffic(
        bin_s=TRAFFIC_BIN_S,
        sent=density(events.sent, span, bins),
        received=density(events.received, span, bins),
        voiced=density(events.voiced, span, bins),
        late_sends=sorted(events.late)[:MAX_LATE_SENDS],
    )
