"""The viewer's JavaScript (inlined into each page; no external resources).

SESSION_JS draws the timeline from the page's embedded JSON (waveform envelopes, voice activity,
protocol markers, traffic, the latency bracket), ties one playhead to the three players and seeks
them all on a click. INDEX_JS sorts and filters the index table. Both only ever insert text with
``textContent``: transcripts and ids come from elsewhere.
"""

from __future__ import annotations

__all__ = ["INDEX_JS", "SESSION_JS"]

SESSION_JS = r"""
(() => {
'use strict';
const D = JSON.parse(document.getElementById('session-data').textContent);
const dur = Math.max(D.duration, 0.001);
const players = Array.from(document.querySelectorAll('audio[data-track]'));
const over = document.getElementById('over');
if (!over) return;  // nothing was streamed: no timeline
const playhead = document.getElementById('playhead');
const hoverLine = document.getElementById('hover');
const tip = document.getElementById('tip');
const clock = document.getElementById('clock');
const root = getComputedStyle(document.documentElement);
const color = (name) => root.getPropertyValue(name).trim();
const evColor = (kind) => color('--ev-' + kind) || color('--ev-other');
let active = players.find((p) => p.dataset.track === 'both') || players[0] || null;
let current = 0;

function prep(canvas) {
  const r = canvas.getBoundingClientRect();
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.max(1, Math.round(r.width * dpr));
  canvas.height = Math.max(1, Math.round(r.height * dpr));
  const g = canvas.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  return {g, w: r.width, h: r.height};
}
const X = (t, w) => t / dur * w;
function ticks(w) {
  const steps = [0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600];
  const step = steps.find((s) => s / dur * w >= 64) || 1200;
  const out = [];
  for (let i = 0; i * step <= dur + 1e-9; i++) out.push(i * step);
  return {step, out};
}
function fmtTick(t, step) { return (step < 1 ? t.toFixed(1) : String(Math.round(t))) + ' s'; }
function gridLines(g, w, h) {
  g.fillStyle = '#eef0f3';
  for (const t of ticks(w).out) g.fillRect(Math.round(X(t, w)), 0, 1, h);
}

function drawAxis() {
  const {g, w, h} = prep(document.getElementById('axis'));
  const {step, out} = ticks(w);
  g.fillStyle = color('--muted'); g.font = '11px system-ui, sans-serif'; g.textBaseline = 'top';
  for (const t of out) {
    const x = Math.round(X(t, w));
    g.fillRect(x, h - 5, 1, 5);
    const label = fmtTick(t, step);
    const tw = g.measureText(label).width;
    g.fillText(label, t === 0 ? x + 6 : Math.min(x - tw / 2, w - tw), 3);
  }
}

function drawLane(id, track, fg, band) {
  const {g, w, h} = prep(document.getElementById(id));
  gridLines(g, w, h);
  const mid = Math.round(h / 2);
  g.fillStyle = '#e5e7eb'; g.fillRect(0, mid, w, 1);
  if (!track) {
    g.fillStyle = color('--faint'); g.font = 'italic 12px system-ui, sans-serif';
    g.fillText('no audio', 10, mid - 8);
    return;
  }
  for (const [a, b] of track.vad) {
    const x = X(a, w), bw = Math.max(1, X(b, w) - x);
    g.fillStyle = band; g.fillRect(x, 0, bw, h);
    g.fillStyle = fg; g.fillRect(x, h - 3, bw, 3);
  }
  const env = track.env, n = env.min.length;
  if (!n) return;
  const amp = (h / 2 - 5) * D.gain / 127;
  const end = X(env.duration, w);
  g.fillStyle = fg;
  for (let px = 0; px < end; px++) {
    const a = Math.floor(px / end * n);
    const b = Math.max(a + 1, Math.floor((px + 1) / end * n));
    let lo = 0, hi = 0;
    for (let i = a; i < b && i < n; i++) {
      if (env.min[i] < lo) lo = env.min[i];
      if (env.max[i] > hi) hi = env.max[i];
    }
    const y1 = Math.max(2, mid - hi * amp), y2 = Math.min(h - 4, mid - lo * amp);
    g.fillRect(px, y1, 1, Math.max(1, y2 - y1));
  }
}

const ROWS = {recv: 10, send: 10, local: 25};
function drawEvents() {
  const {g, w, h} = prep(document.getElementById('events'));
  gridLines(g, w, h);
  g.fillStyle = '#f1f5f9'; g.fillRect(0, Math.round(h / 2), w, 1);
  for (const [t, kind, dir] of D.markers) {
    const x = X(t, w), y = ROWS[dir] || 17;
    g.fillStyle = evColor(kind);
    if (kind === 'transcript') { g.fillRect(x - 1, y - 4, 2, 8); continue; }
    g.beginPath();
    if (kind === 'error') { g.moveTo(x, y - 6); g.lineTo(x + 6, y + 5); g.lineTo(x - 6, y + 5); }
    else if (dir === 'local') { g.moveTo(x, y - 5); g.lineTo(x + 5, y); g.lineTo(x, y + 5); g.lineTo(x - 5, y); }
    else g.arc(x, y, 4.5, 0, 2 * Math.PI);
    g.closePath(); g.fill();
    g.strokeStyle = '#fff'; g.lineWidth = 1; g.stroke();
  }
}

function drawTraffic() {
  const {g, w, h} = prep(document.getElementById('traffic'));
  const T = D.traffic;
  if (!T) return;
  const rowH = Math.floor((h - 6) / 2), y1 = 2, y2 = 4 + rowH;
  const peak = (xs) => Math.max(1, ...xs);
  const bw = X(T.bin, w);
  const strip = (counts, y, fill, scale) => {
    g.fillStyle = fill;
    counts.forEach((c, i) => {
      if (!c) return;
      const xa = Math.round(i * bw), xb = Math.max(xa + 1, Math.round((i + 1) * bw));
      g.globalAlpha = Math.min(1, 0.15 + 0.85 * c / scale);
      g.fillRect(xa, y, xb - xa, rowH);
    });
    g.globalAlpha = 1;
  };
  strip(T.sent, y1, '#94a3b8', peak(T.sent));
  strip(T.received, y2, '#cbd5e1', peak(T.received));
  strip(T.voiced, y2, color('--model'), peak(T.received));
  g.fillStyle = color('--overlap');
  for (const [t] of T.late) g.fillRect(X(t, w) - 1, y1 - 2, 2, rowH + 4);
}

function drawOverlay() {
  const {g, w, h} = prep(document.getElementById('overlay'));
  const top = over.getBoundingClientRect().top;
  const rect = (id) => {
    const r = document.getElementById(id).getBoundingClientRect();
    return {y: r.top - top, h: r.height};
  };
  const user = rect('lane-user'), model = rect('lane-model');
  const T = D.timing;
  g.font = '11px system-ui, sans-serif'; g.textBaseline = 'top';
  const tag = (text, x, y, fill, right) => {
    const tw = g.measureText(text).width + 8;
    const lx = right ? Math.min(x + 3, w - tw - 1) : Math.max(1, x - tw - 3);
    g.fillStyle = 'rgba(255,255,255,.88)'; g.fillRect(lx, y, tw, 15);
    g.fillStyle = fill; g.fillText(text, lx + 4, y + 2);
  };
  const vline = (t, y, len, fill, dash, label, right) => {
    const x = Math.round(X(t, w)) + 0.5;
    g.strokeStyle = fill; g.lineWidth = dash ? 1 : 1.5; g.setLineDash(dash ? [4, 3] : []);
    g.beginPath(); g.moveTo(x, y); g.lineTo(x, y + len); g.stroke(); g.setLineDash([]);
    if (label) tag(label, x, y + 3, fill, right);
  };
  // a partner's steps: each clip a band on the user's lane, labelled; the reply to a turn it
  // made is marked on the model's lane
  for (const [at, end, kind, why, turn, reply] of (D.partner || [])) {
    const xa = X(at, w), xb = Math.max(xa + 2, X(end, w));
    g.fillStyle = color('--pt-' + kind); g.fillRect(xa, user.y, xb - xa, user.h);
    tag(kind.replace('_', ' ') + (turn === null ? '' : ' · turn ' + turn), xa, user.y + user.h - 17, color('--ev-partner'), true);
    if (reply !== null) vline(reply, model.y, model.h, color('--ev-partner'), true, 'reply ' + turn, true);
  }
  if (T.window_start !== null) vline(T.window_start, user.y, user.h, '#64748b', true, "A's last turn", true);
  if (T.context_end !== null) vline(T.context_end, user.y, user.h + model.h, color('--ev-context_end'), true, '', false);
  if (T.offset !== null) vline(T.offset, model.y, model.h, color('--model'), true, 'reply end', false);
  if (T.speech_end !== null) vline(T.speech_end, user.y, user.h + model.h, color('--latency'), false, 'A stops', false);
  if (T.onset !== null) vline(T.onset, model.y, model.h, color('--latency'), false, 'model onset', true);
  if (T.onset === null && D.tracks.model && T.speech_end !== null) {
    g.font = 'italic 11.5px system-ui, sans-serif';
    tag('no reply', X(T.speech_end, w) + 2, model.y + model.h / 2 - 22, color('--muted'), true);
  }
  if (T.speech_end === null || T.onset === null || T.latency === null) return;
  // the bracket sits low in the model lane, its label where the model is usually silent:
  // between the two lines when it fits, else just before Speaker A's end
  const x1 = X(T.speech_end, w), x2 = X(T.onset, w), y = model.y + model.h - 30;
  const fill = T.latency < 0 ? color('--overlap') : color('--latency');
  g.strokeStyle = fill; g.fillStyle = fill; g.lineWidth = 1.5;
  g.beginPath(); g.moveTo(x1, y); g.lineTo(x2, y); g.stroke();
  for (const x of [x1, x2]) g.fillRect(x - 0.75, y - 5, 1.5, 10);
  const label = (T.latency < 0 ? 'overlap ' : 'latency ') + Math.round(T.latency * 1000) + ' ms';
  g.font = '600 11.5px system-ui, sans-serif';
  const tw = g.measureText(label).width + 12;
  const lo = Math.min(x1, x2), hi = Math.max(x1, x2);
  let lx = hi - lo >= tw + 6 ? (lo + hi) / 2 - tw / 2 : lo - tw - 6;
  if (lx < 2) lx = hi + 6;
  lx = Math.min(lx, w - tw - 2);
  g.fillStyle = '#fff'; g.fillRect(lx, y - 9, tw, 18);
  g.strokeStyle = fill; g.lineWidth = 1; g.strokeRect(lx + 0.5, y - 8.5, tw - 1, 17);
  g.fillStyle = fill; g.textBaseline = 'middle'; g.fillText(label, lx + 6, y + 0.5);
}

function drawAll() {
  drawAxis(); drawEvents();
  drawLane('lane-user', D.tracks.user, color('--user'), color('--user-band'));
  drawLane('lane-model', D.tracks.model, color('--model'), color('--model-band'));
  drawTraffic(); drawOverlay(); show(current);
}

function show(t) {
  current = t;
  playhead.style.transform = 'translateX(' + X(t, over.clientWidth).toFixed(1) + 'px)';
  clock.textContent = t.toFixed(3) + ' s / ' + dur.toFixed(3) + ' s';
}
function limit(p, t) { return isFinite(p.duration) ? Math.min(t, p.duration) : t; }
function seek(t) {
  t = Math.min(Math.max(0, t), dur);
  current = t;
  for (const p of players) { try { p.currentTime = limit(p, t); } catch (e) { /* not loaded */ } }
  show(t);
}
let raf = 0;
function follow() {
  if (active && !active.paused) { show(active.currentTime); raf = requestAnimationFrame(follow); }
  else raf = 0;
}
for (const p of players) {
  p.addEventListener('play', () => {
    for (const o of players) if (o !== p && !o.paused) o.pause();
    active = p;
    if (!raf) raf = requestAnimationFrame(follow);
  });
  p.addEventListener('timeupdate', () => { if (p === active && !p.paused) show(p.currentTime); });
  p.addEventListener('seeked', () => {  // a seek on a player's own control moves them all
    if (Math.abs(p.currentTime - limit(p, current)) > 0.05) { active = p; seek(p.currentTime); }
  });
}

const timeAt = (e) => {
  const r = over.getBoundingClientRect();
  return Math.min(Math.max(0, (e.clientX - r.left) / r.width * dur), dur);
};
const near = (e) => {
  const r = over.getBoundingClientRect();
  return D.markers.filter((m) => Math.abs(X(m[0], r.width) + r.left - e.clientX) <= 5).slice(0, 8);
};
for (const c of document.querySelectorAll('.timeline canvas.draw')) {
  c.addEventListener('click', (e) => seek(timeAt(e)));
  c.addEventListener('mousemove', (e) => {
    const t = timeAt(e);
    hoverLine.style.display = 'block';
    hoverLine.style.transform = 'translateX(' + X(t, over.clientWidth).toFixed(1) + 'px)';
    const lines = [t.toFixed(3) + ' s'];
    for (const [mt, kind, dir, detail] of near(e)) {
      lines.push(mt.toFixed(3) + ' s  ' + dir + ' ' + kind + (detail ? ': ' + detail.slice(0, 160) : ''));
    }
    tip.textContent = lines.join('\n');
    tip.style.display = 'block';
    tip.style.left = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8) + 'px';
    tip.style.top = (e.clientY + 16) + 'px';
  });
  c.addEventListener('mouseleave', () => { tip.style.display = 'none'; hoverLine.style.display = 'none'; });
}
for (const row of document.querySelectorAll('tr[data-t]')) {
  row.addEventListener('click', () => seek(parseFloat(row.dataset.t)));
}
document.addEventListener('keydown', (e) => {
  if (e.target.closest && e.target.closest('input,select,textarea,button,audio')) return;
  if (e.key === ' ' && active) { e.preventDefault(); active.paused ? active.play() : active.pause(); }
  else if (e.key === 'ArrowLeft') seek(current - 0.5);
  else if (e.key === 'ArrowRight') seek(current + 0.5);
});
let pending = 0;
window.addEventListener('resize', () => {
  if (!pending) pending = requestAnimationFrame(() => { pending = 0; drawAll(); });
});
window.duplexsimView = {seek, time: () => current, duration: dur};
drawAll();
})();
"""

INDEX_JS = r"""
(() => {
'use strict';
const table = document.getElementById('sessions');
const body = table.tBodies[0];
const rows = Array.from(body.rows);
const query = document.getElementById('filter');
const selects = Array.from(document.querySelectorAll('select[data-field]'));
const count = document.getElementById('count');
function apply() {
  const text = query.value.trim().toLowerCase();
  let shown = 0;
  for (const row of rows) {
    let ok = !text || row.textContent.toLowerCase().includes(text);
    for (const s of selects) if (s.value && row.dataset[s.dataset.field] !== s.value) ok = false;
    row.hidden = !ok;
    if (ok) shown++;
  }
  count.textContent = shown + ' of ' + rows.length + ' sessions';
}
query.addEventListener('input', apply);
for (const s of selects) s.addEventListener('change', apply);
const heads = Array.from(table.tHead.rows[0].cells);
heads.forEach((th, col) => th.addEventListener('click', () => {
  const dir = th.getAttribute('aria-sort') === 'ascending' ? -1 : 1;
  for (const h of heads) h.removeAttribute('aria-sort');
  th.setAttribute('aria-sort', dir === 1 ? 'ascending' : 'descending');
  const numeric = th.dataset.type === 'num';
  const key = (row) => {
    const cell = row.cells[col];
    if (!numeric) return cell.textContent.trim().toLowerCase();
    const v = parseFloat(cell.dataset.v);
    return isNaN(v) ? null : v;
  };
  const sorted = rows.slice().sort((a, b) => {
    const x = key(a), y = key(b);
    if (x === null || y === null) return x === y ? 0 : (x === null ? 1 : -1);  // blanks last
    return dir * (numeric ? x - y : x.localeCompare(y, undefined, {numeric: true}));
  });
  for (const row of sorted) body.appendChild(row);
}));
apply();
})();
"""
