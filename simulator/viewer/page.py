"""One session as an HTML page: the timeline with both lanes, the three players on one playhead,
the session's numbers, its emotion scores beside the reference's, and its events. The page holds
everything, audio included, unless the session is too long to embed: then its players play the
bundle's own files, by a path relative to the page."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Container
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.emotions import EMOTIONS
from duplexsim.run.store import ResultRow
from duplexsim.viewer.data import (
    AUDIO_FILES,
    AUDIO_RATE,
    EmotionScores,
    RunView,
    SessionView,
    Track,
)
from duplexsim.viewer.embed import mix, script_json, wav_data_uri
from duplexsim.viewer.envelope import LEVELS
from duplexsim.viewer.layout import (
    badge,
    document,
    esc,
    fmt_ms,
    fmt_num,
    fmt_s,
    match_text,
    scorer_notice,
)
from duplexsim.viewer.scripts import SESSION_JS

__all__ = ["failure_page", "session_page"]

MAX_GAIN = 8.0  # quiet recordings are drawn larger, never by more than this


def session_page(
    run: RunView,
    s: SessionView,
    page_dir: Path | None = None,
    linked: Container[str] | None = None,
) -> str:
    """``page_dir``: where the page goes, for the paths to the bundle's audio files when they are
    not embedded (None: absolute ``file:`` URLs). ``linked``: the sessions whose pages exist, for
    the previous and next links (None: all)."""
    r = s.row
    body = "".join(
        [
            _header(run, s, linked),
            _problems(s),
            _timeline(s, page_dir),
            '<div class="grid2">',
            f'<section class="card" id="metrics"><h2>Session</h2>{_metrics(run, s)}</section>',
            '<section class="card" id="scores"><h2>Emotion scores</h2>'
            f"{scorer_notice(run.report, str(run.run_dir))}{_emotions(s)}</section>",
            "</div>",
            _events_table(s),
            f"<footer>duplexsim view · run {esc(run.run_id)} · "
            f"{esc(str(run.run_dir / (r.bundle or '')))}</footer>",
        ]
    )
    title = f"{r.sample_id} · {run.run_id} · duplexsim"
    return document(title, body, SESSION_JS, script_json(_data(s)), kind="session")


def failure_page(run: RunView, row: ResultRow, problem: str) -> str:
    """The page of a session whose data could not be gathered or drawn: what went wrong, and the
    session's row."""
    body = (
        '<nav class="crumbs"><a href="../index.html">← all sessions</a>'
        f"<span>run <b>{esc(run.run_id)}</b></span><span>model <b>{esc(run.model)}</b></span></nav>"
        f"<h1>{esc(row.sample_id)} {badge(row.status)}</h1>"
        + (
            f'<div class="alert error"><b>Session failed:</b> {esc(row.error)}</div>'
            if row.error
            else ""
        )
        + '<div class="alert warn">This session\'s recording could not be read, so the page shows '
        f"only its result row:<ul><li>{esc(problem)}</li></ul></div>"
        f'<section class="card" id="metrics"><h2>Session</h2>{_row_table(row)}</section>'
        f"<footer>duplexsim view · run {esc(run.run_id)} · "
        f"{esc(str(run.run_dir / (row.bundle or '')))}</footer>"
    )
    title = f"{row.sample_id} · {run.run_id} · duplexsim"
    return document(title, body, "", kind="session")


def _row_table(r: ResultRow) -> str:
    return _kv(
        [
            ("status", r.status),
            ("end reason", r.end_reason),
            ("attempts", str(r.attempts)),
            ("response latency", fmt_ms(r.latency_s)),
            ("reply duration", fmt_s(r.reply_duration_s, 2)),
            ("wall time", fmt_s(r.wall_s, 1)),
            ("bundle", r.bundle or "–"),
        ]
    )


def _header(run: RunView, s: SessionView, linked: Container[str] | None) -> str:
    r = s.row
    before, after = run.neighbours(r.sample_id)
    steps = "".join(
        f'<a class="step" href="{esc(run.page(sid))}" title="{esc(sid)}">{arrow}</a>'
        for sid, arrow in ((before, "‹ previous"), (after, "next ›"))
        if sid is not None and (linked is None or sid in linked)
    )
    match = s.scores.match if s.scores else None
    verdict = "" if match is None else badge("match" if match else "no match", match_text(match))
    latency = f" · response latency <b>{fmt_ms(r.latency_s)}</b>" if r.latency_s is not None else ""
    return (
        f'<nav class="crumbs"><a href="../index.html">← all sessions</a>'
        f"<span>run <b>{esc(run.run_id)}</b></span><span>model <b>{esc(run.model)}</b></span>"
        f'<span class="spacer"></span>{steps}</nav>'
        f"<h1>{esc(r.sample_id)} {badge(r.status)} {verdict}</h1>"
        f'<p class="sub">{esc(r.emotion or "no reference")} · {esc(r.language)} · ended by '
        f"{esc(r.end_reason)}{latency}</p>"
    )


def _validity(r: ResultRow) -> str:
    if r.timing_valid is None:
        return "not checked (recorded before timing checks)"
    return "valid" if r.timing_valid else f"invalid ({r.timing_invalid})"


def _fidelity(r: ResultRow) -> str:
    if r.input_faithful is None:
        return "not told apart (recorded before the split: counts as the timing says)"
    return "kept" if r.input_faithful else f"lost ({r.fidelity_lost})"


def _lags(loop_ms: float | None, recv_ms: float | None) -> str:
    return f"{fmt_num(loop_ms, '{:.2f}')} / {fmt_num(recv_ms, '{:.2f}')} ms"


def _problems(s: SessionView) -> str:
    parts = []
    if s.row.error:
        parts.append(f'<div class="alert error"><b>Session failed:</b> {esc(s.row.error)}</div>')
    if not s.row.faithful:
        why = s.row.fidelity_lost or s.row.timing_invalid or ""
        parts.append(
            '<div class="alert warn"><b>Input fidelity lost:</b> '
            f"{esc(why)}; the model did not hear the stream a client sends, so this session "
            "is left out of every metric</div>"
        )
    elif s.row.timing_valid is False:
        parts.append(
            '<div class="alert warn"><b>Timing imprecise:</b> '
            f"{esc(s.row.timing_invalid or '')}; its latency is left out of the run's figures "
            "(it counts for every emotion metric)</div>"
        )
    if s.row.truncated:
        parts.append(
            f'<div class="alert warn"><b>Reply truncated:</b> {esc(s.row.truncated)}</div>'
        )
    if s.notes:
        items = "".join(f"<li>{esc(n)}</li>" for n in s.notes)
        parts.append(f'<div class="alert warn">Problems with the recording:<ul>{items}</ul></div>')
    return "".join(parts)


_LEGEND = (
    '<span><i class="sw" style="background:var(--user)"></i>user (sent)</span>'
    '<span><i class="sw" style="background:var(--model)"></i>model (received)</span>'
    '<span><i class="sw" style="background:var(--user-band);outline:1px solid var(--line)"></i>'
    "voice activity</span>"
    '<span><i class="sw line" style="background:var(--latency)"></i>Speaker A stops → '
    "model onset</span>"
    '<span><i class="dot" style="background:var(--ev-speech_started)"></i>speech started</span>'
    '<span><i class="dot" style="background:var(--ev-end_of_turn)"></i>end of turn</span>'
    '<span><i class="dot" style="background:var(--ev-transcript)"></i>transcript</span>'
    '<span><i class="dot" style="background:var(--ev-error)"></i>error</span>'
    '<span><i class="dot" style="background:var(--ev-context_end)"></i>context end</span>'
    '<span><i class="dot" style="background:var(--ev-reply_end)"></i>reply end</span>'
    '<span><i class="sw" style="background:var(--overlap)"></i>late send</span>'
)
_PARTNER_LEGEND = (
    '<span><i class="sw" style="background:var(--pt-interrupt)"></i>partner: interruption</span>'
    '<span><i class="sw" style="background:var(--pt-backchannel)"></i>backchannel</span>'
    '<span><i class="sw" style="background:var(--pt-next_turn)"></i>next turn</span>'
    '<span><i class="sw" style="background:var(--pt-distractor)"></i>distractor</span>'
)


def _timeline(s: SessionView, page_dir: Path | None) -> str:
    if s.user is None and s.model is None and not s.markers:
        return (
            '<section class="card" id="timeline-card"><div class="alert info">Nothing was '
            "streamed: the session ended before its first frame.</div></section>"
        )
    lanes = (
        '<div class="lab" style="grid-row:1"></div>'
        '<div class="lab" style="grid-row:2"><b>events</b>recv · local</div>'
        '<div class="lab" style="grid-row:3"><b>user</b>Speaker A</div>'
        '<div class="lab" style="grid-row:4"><b>model</b>reply</div>'
        '<div class="lab" style="grid-row:5"><b>traffic</b>sent · recv</div>'
        '<canvas class="draw" id="axis" style="grid-row:1"></canvas>'
        '<canvas class="draw" id="events" style="grid-row:2"></canvas>'
        '<canvas class="draw lane" id="lane-user" data-track="user" style="grid-row:3"></canvas>'
        '<canvas class="draw lane" id="lane-model" data-track="model" style="grid-row:4"></canvas>'
        '<canvas class="draw" id="traffic" style="grid-row:5"></canvas>'
        '<div class="over" id="over"><canvas id="overlay"></canvas>'
        '<div id="hover"></div><div id="playhead"></div></div>'
    )
    gain = _gain(s)
    gain_note = f"<span>amplitude drawn ×{gain:.1f}</span>" if gain > 1.05 else ""
    partner = _PARTNER_LEGEND if s.partner else ""
    return (
        f'<section class="card" id="timeline-card">{_linked_note(s, page_dir)}'
        f'<div class="legend">{_LEGEND}{partner}{gain_note}</div>'
        f'<div class="timeline">{lanes}</div>'
        '<div class="transport"><span class="clock" id="clock">0.000 s</span>'
        f"{_players(s, page_dir)}</div>"
        '<p class="hint">Click the lanes to seek every player; space plays or pauses, ← → step '
        'half a second. Hover for times and events.</p></section><div id="tip"></div>'
    )


_BOTH_FILL = "linear-gradient(90deg,var(--user) 50%,var(--model) 50%)"


def _players(s: SessionView, page_dir: Path | None) -> str:
    if not s.embedded:
        return _linked_players(s, page_dir)
    tracks: list[tuple[str, str, Track | None]] = [
        ("user", "var(--user)", s.user),
        ("model", "var(--model)", s.model),
    ]
    parts = []
    for name, fill, track in tracks:
        samples = None if track is None else track.samples
        parts.append(_player(name, fill, None if samples is None else _wav_uri(samples)))
    if s.user is not None or s.model is not None:
        empty = np.zeros(0, dtype=np.float32)
        user = s.user.samples if s.user and s.user.samples is not None else empty
        model = s.model.samples if s.model and s.model.samples is not None else empty
        parts.append(_player("both", _BOTH_FILL, _wav_uri(mix(user, model))))
    return "".join(parts)


def _wav_uri(samples: NDArray[np.float32]) -> str:
    return wav_data_uri(samples, AUDIO_RATE)


def _linked_players(s: SessionView, page_dir: Path | None) -> str:
    """Players of the bundle's own files, each that exists: one too long to draw still plays."""
    fills = {"user": "var(--user)", "model": "var(--model)", "both": _BOTH_FILL}
    return "".join(
        _player(
            name,
            fills[name],
            _file_url(s.files[name], page_dir) if name in s.files else None,
            preload="metadata",
        )
        for name in AUDIO_FILES
    )


def _file_url(path: Path, page_dir: Path | None) -> str:
    """``path`` as a URL relative to ``page_dir``; absolute where there is no relative path."""
    rel = _relative(path, page_dir)
    return path.absolute().as_uri() if rel is None else urllib.parse.quote(rel, safe="/")


def _relative(path: Path, page_dir: Path | None) -> str | None:
    if page_dir is None:
        return None
    try:
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(page_dir))
    except ValueError:  # another drive
        return None
    return Path(rel).as_posix()


def _player(name: str, fill: str, src: str | None, preload: str = "auto") -> str:
    caption = f'<figcaption><i class="dot" style="background:{fill}"></i>{name}</figcaption>'
    if src is None:
        return f'<figure class="player">{caption}<span class="hint">no audio</span></figure>'
    return (
        f'<figure class="player">{caption}<audio controls preload="{preload}" '
        f'data-track="{name}" src="{esc(src)}"></audio></figure>'
    )


def _linked_note(s: SessionView, page_dir: Path | None) -> str:
    if s.embedded or not s.files:
        return ""
    folder = next(iter(s.files.values())).parent
    where = _relative(folder, page_dir) or str(folder.absolute())
    return (
        '<div class="alert info" id="audio-linked"><b>Audio not embedded:</b> the three players '
        f"hold {s.audio_s / 60:.1f} minutes of audio together, more than a page embeds "
        "(<code>duplexsim view --max-embed-s</code>). They play the recording's own files "
        f"({', '.join(AUDIO_FILES.values())}) from <code>{esc(where)}</code>, relative to this "
        "page, so keep the page and the run folder together: move or copy them as one. "
        "<i>both</i> plays stereo.wav: user on the left, model on the right.</div>"
    )


def _gain(s: SessionView) -> float:
    peak = max(
        [0, *(max(map(abs, t.envelope.mins + t.envelope.maxs), default=0) for t in _tracks(s))]
    )
    return 1.0 if peak == 0 else min(MAX_GAIN, max(1.0, 0.95 * LEVELS / peak))


def _tracks(s: SessionView) -> list[Track]:
    return [t for t in (s.user, s.model) if t is not None]


def _data(s: SessionView) -> dict[str, Any]:
    context_end = next((m.t for m in s.markers if m.kind == "context_end"), None)

    def track(t: Track | None) -> dict[str, Any] | None:
        if t is None:
            return None
        vad = [[round(v.start_s, 3), round(v.end_s, 3)] for v in t.vad]
        return {"env": t.envelope.to_json(), "vad": vad}

    traffic = s.traffic
    return {
        "duration": round(s.duration_s, 6),
        "gain": round(_gain(s), 3),
        "tracks": {"user": track(s.user), "model": track(s.model)},
        "timing": {  # every number here is finite: load_run and load_session see to it
            "speech_end": s.speech_end_s,
            "onset": s.onset_s,
            "offset": s.offset_s,
            "latency": s.row.latency_s,
            "window_start": s.window_start_s,
            "context_end": context_end,
        },
        "markers": [[m.t, m.kind, m.direction, m.detail] for m in s.markers],
        "partner": [
            [round(p.at_s, 6), round(p.end_s, 6), p.kind, p.why, p.turn, p.reply_onset_s]
            for p in s.partner
        ],
        "traffic": None
        if traffic is None
        else {
            "bin": traffic.bin_s,
            "sent": traffic.sent,
            "received": traffic.received,
            "voiced": traffic.voiced,
            "late": [list(x) for x in traffic.late_sends],
        },
    }


def _kv(rows: list[tuple[str, str]]) -> str:
    cells = []
    for key, value in rows:
        if value == "":
            cells.append(f'<tr class="group"><td colspan="2">{esc(key)}</td></tr>')
        else:
            cells.append(f'<tr><td>{esc(key)}</td><td class="num">{esc(value)}</td></tr>')
    return f'<table class="kv">{"".join(cells)}</table>'


def _metrics(run: RunView, s: SessionView) -> str:
    r, meta = s.row, s.meta
    end_note = " (measured by the viewer)" if s.speech_end_measured else ""
    caps = meta.get("capabilities", {})
    rows = [
        ("Outcome", ""),
        ("status", r.status),
        ("end reason", r.end_reason),
        ("attempts", str(r.attempts)),
        *([("error", r.error)] if r.error else []),
        ("Timing (on the session timeline)", ""),
        ("Speaker A's last turn starts", fmt_s(s.window_start_s)),
        ("Speaker A's speech ends", fmt_s(s.speech_end_s) + end_note),
        ("model speech onset", fmt_s(s.onset_s)),
        ("response latency", fmt_ms(r.latency_s)),
        ("reply duration", fmt_s(r.reply_duration_s, 2)),
        ("overlap with Speaker A", fmt_s(r.overlap_s, 2)),
        ("truncated", r.truncated or "no"),
        ("Streaming", ""),
        ("input fidelity", _fidelity(r)),
        ("timing (precision)", _validity(r)),
        ("send error p50 / p99 / max", _send_errors(r.send_p50_ms, r.send_p99_ms, r.send_max_ms)),
        ("loop lag / receive lag (max)", _lags(r.loop_lag_max_ms, r.recv_lag_max_ms)),
        ("latency bound (late sends + stalls)", fmt_num(r.latency_bound_ms, "{:.2f} ms")),
        (
            "bytes sent / received",
            f"{fmt_num(r.bytes_sent, '{:,}')} / {fmt_num(r.bytes_received, '{:,}')}",
        ),
        ("wall time", fmt_s(r.wall_s, 1)),
        ("Model", ""),
        ("model", run.model),
        ("protocol", str(meta.get("model", {}).get("protocol", "–"))),
        (
            "input / output rate",
            f"{caps.get('input_rate', '–')} / {caps.get('output_rate', '–')} Hz",
        ),
    ]
    return _kv(rows)


def _send_errors(*values_ms: float | None) -> str:
    return " / ".join(fmt_num(v, "{:.2f}") for v in values_ms) + " ms"


def _emotions(s: SessionView) -> str:
    sc = s.scores
    if sc is None:
        return ""
    if s.row.status == "failed":
        return '<p class="sub">A failed session is not scored (and not counted in N).</p>'
    verdict = _verdict(sc)
    if sc.reply is None and sc.reference is None:
        return verdict
    values = [v for vec in (sc.reply, sc.reference) if vec for v in vec]
    scale = max([1e-9, *(abs(v) for v in values)])
    rows = []
    for i, e in enumerate(EMOTIONS):
        tags = "".join(
            f'<span class="tag {css}">{text}</span>'
            for css, text, on in (
                ("lbl", "label", e.name == sc.label),
                ("top", "reply top", e.name == sc.reply_top),
                ("rtop", "ref top", e.name == sc.reference_top),
            )
            if on
        )
        row_css = ' class="label"' if e.name == sc.label else ""
        rows.append(
            f'<tr{row_css}><td class="name">{esc(e.display)}{tags}</td>'
            f"<td>{_bar('reply', sc.reply, i, scale)}</td>"
            f"<td>{_bar('ref', sc.reference, i, scale)}</td></tr>"
        )
    return (
        f'{verdict}<table class="emotions"><thead><tr><th>emotion</th><th>model reply</th>'
        f"<th>reference (Speaker B)</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _verdict(sc: EmotionScores) -> str:
    top = f"Reply's top emotion <b>{esc(sc.reply_top)}</b>"
    if not sc.label:
        head = f"{top}; no" if sc.reply is not None else "No"
        text = f"{head} reference to mirror (not in the MIRRORING metrics)."
    elif not sc.replied:
        text = "The model did not reply: a non-match in the metrics."
    elif sc.reply is None:
        text = "The reply has no cached score; this sample is left out of N."
    elif sc.reference is None:
        text = f"{top}; the reference has no cached score, so it is left out of N."
    else:
        text = f"{top}, reference label <b>{esc(sc.label)}</b>."
    label = {None: "not counted", True: "match", False: "no match"}[sc.match]
    match = badge(label, {None: "none", True: "yes", False: "no"}[sc.match])
    return f'<div class="verdict">{match}<span>{text}</span></div>'


def _bar(kind: str, vector: tuple[float, ...] | None, i: int, scale: float) -> str:
    if vector is None:
        return '<span class="hint">–</span>'
    v = vector[i]
    width = max(0.0, v) / scale * 100
    return (
        f'<div class="score"><div class="bar {kind}"><i style="width:{width:.1f}%"></i></div>'
        f"<span>{v:.3f}</span></div>"
    )


def _events_table(s: SessionView) -> str:
    if not s.markers:
        return ""
    rows = "".join(
        f'<tr data-t="{m.t}"><td class="num">{m.t:.3f}</td><td>{esc(m.direction)}</td>'
        f'<td><i class="dot" style="background:var(--ev-{esc(_css_kind(m.kind))})"></i>'
        f'{esc(m.kind)}</td><td class="detail">{esc(m.detail)}</td></tr>'
        for m in s.markers
    )
    return (
        '<section class="card" id="events-card"><h2>Protocol and session events</h2>'
        '<div class="scroll"><table class="events"><thead><tr><th class="num">t (s)</th>'
        f"<th>dir</th><th>kind</th><th>detail</th></tr></thead><tbody>{rows}</tbody></table>"
        '</div><p class="hint">Audio frames are summarised in the traffic strip; click a row '
        "to seek there.</p></section>"
    )


_KNOWN = {"speech_started", "speech_stopped", "end_of_turn", "transcript", "error"}
_KNOWN |= {"context_end", "reply_end", "start", "partner"}


def _css_kind(kind: str) -> str:
    return kind if kind in _KNOWN else "other"
