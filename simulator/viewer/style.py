"""The viewer's stylesheet, shared by the session pages and the index (inlined into each page)."""

from __future__ import annotations

__all__ = ["STYLE"]

STYLE = r"""
:root{
  --ink:#1f2937;--muted:#6b7280;--faint:#9ca3af;--line:#e5e7eb;--bg:#f5f6f8;--card:#fff;
  --user:#2563eb;--user-band:rgba(37,99,235,.11);--model:#ea580c;--model-band:rgba(234,88,12,.11);
  --latency:#7c3aed;--overlap:#dc2626;--ok:#15803d;--bad:#b91c1c;--warn:#a16207;
  --ev-speech_started:#0284c7;--ev-speech_stopped:#64748b;--ev-end_of_turn:#16a34a;
  --ev-transcript:#a21caf;--ev-error:#dc2626;--ev-context_end:#334155;--ev-reply_end:#ea580c;
  --ev-start:#94a3b8;--ev-other:#6b7280;--ev-partner:#0f766e;
  --pt-interrupt:rgba(220,38,38,.28);--pt-backchannel:rgba(22,163,74,.28);
  --pt-next_turn:rgba(37,99,235,.22);--pt-distractor:rgba(107,114,128,.3);
}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);
  font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1240px;margin:0 auto;padding:18px 24px 40px}
a{color:var(--user);text-decoration:none}a:hover{text-decoration:underline}
h1{font-size:22px;margin:6px 0 2px;display:flex;align-items:center;gap:10px;flex-wrap:wrap}
h2{font-size:13px;text-transform:uppercase;letter-spacing:.06em;color:var(--muted);margin:0 0 10px}
code{font:12.5px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f1f5f9;
  padding:1px 5px;border-radius:4px}
.num,td.num{font-variant-numeric:tabular-nums;text-align:right}
.crumbs{display:flex;align-items:center;gap:14px;color:var(--muted);font-size:13px}
.crumbs .spacer{flex:1}
.crumbs a.step{border:1px solid var(--line);background:var(--card);border-radius:6px;padding:2px 9px}
.sub{color:var(--muted);margin:0 0 14px}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px 18px;
  margin:0 0 16px;box-shadow:0 1px 2px rgba(16,24,40,.04)}
.grid2{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1.15fr);gap:16px}
@media (max-width:900px){.grid2{grid-template-columns:1fr}}
.badge{display:inline-block;font-size:12px;font-weight:600;border-radius:999px;padding:1px 9px;
  border:1px solid currentColor;line-height:18px;white-space:nowrap}
.badge.ok,.badge.yes{color:var(--ok);background:#f0fdf4}
.badge.failed,.badge.no{color:var(--bad);background:#fef2f2}
.badge.no-reply{color:var(--warn);background:#fefce8}
.badge.plain,.badge.none{color:var(--muted);background:#f9fafb}
.alert{border-radius:8px;padding:10px 14px;margin:0 0 12px;border:1px solid}
.alert.error{background:#fef2f2;border-color:#fecaca;color:#7f1d1d}
.alert.warn{background:#fffbeb;border-color:#fde68a;color:#713f12}
.alert.info{background:#f8fafc;border-color:var(--line);color:var(--ink)}
.alert ul{margin:4px 0 0;padding-left:18px}
table{border-collapse:collapse;width:100%}
th,td{padding:5px 8px;border-bottom:1px solid var(--line);vertical-align:middle}
th{text-align:left;font-weight:600;color:var(--muted);font-size:12px}
table.kv td:first-child{color:var(--muted);width:46%}
table.kv tr.group td{padding-top:12px;font-size:11px;text-transform:uppercase;letter-spacing:.06em;
  color:var(--faint);border-bottom:none}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;font-size:12px;color:var(--muted);margin:0 0 10px}
.legend span{display:inline-flex;align-items:center;gap:6px}
.sw{display:inline-block;width:12px;height:12px;border-radius:3px}
.sw.line{width:3px;height:14px;border-radius:1px}
.dot{display:inline-block;width:9px;height:9px;border-radius:50%;margin-right:6px}
.timeline{display:grid;grid-template-columns:92px minmax(0,1fr);
  grid-template-rows:22px 34px 104px 104px 28px;user-select:none}
.timeline .lab{grid-column:1;display:flex;flex-direction:column;justify-content:center;
  font-size:12px;color:var(--muted);padding-right:10px;text-align:right}
.timeline .lab b{color:var(--ink);font-weight:600}
.timeline canvas.draw{grid-column:2;width:100%;height:100%;display:block;cursor:crosshair}
#lane-user,#lane-model{border-top:1px solid var(--line)}
#lane-user{background:#fbfcfe}#lane-model{background:#fffcfa}
#traffic{border-top:1px solid var(--line);border-bottom:1px solid var(--line)}
.over{grid-column:2;grid-row:1/-1;position:relative;pointer-events:none}
.over canvas{position:absolute;inset:0;width:100%;height:100%}
#playhead{position:absolute;top:0;bottom:0;left:0;width:2px;margin-left:-1px;background:#111827;
  box-shadow:0 0 0 1px rgba(255,255,255,.7);will-change:transform}
#playhead::before{content:"";position:absolute;top:0;left:-5px;border:6px solid transparent;
  border-top:7px solid #111827}
#hover{position:absolute;top:0;bottom:0;left:0;width:1px;background:rgba(17,24,39,.25);display:none}
#tip{position:fixed;z-index:10;pointer-events:none;background:#111827;color:#f9fafb;
  font-size:12px;border-radius:6px;padding:6px 8px;max-width:420px;display:none;
  box-shadow:0 4px 12px rgba(0,0,0,.2);white-space:pre-wrap}
.transport{display:flex;align-items:center;gap:14px;flex-wrap:wrap;margin-top:14px}
.clock{font:600 13px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;min-width:150px;
  background:#f1f5f9;border-radius:6px;padding:6px 10px;text-align:center}
.player{display:flex;align-items:center;gap:8px;margin:0}
.player figcaption{font-size:12px;font-weight:600;display:flex;align-items:center}
.player audio{height:34px;width:250px}
.hint{color:var(--faint);font-size:12px;margin:8px 0 0}
.emotions td{padding:4px 8px}
.emotions td.name{white-space:nowrap;width:1%}
.score{display:flex;align-items:center;gap:8px}
.bar{position:relative;flex:1;height:14px;background:#f3f4f6;border-radius:4px;min-width:90px}
.bar i{position:absolute;left:0;top:0;bottom:0;border-radius:4px}
.bar.reply i{background:var(--model)}.bar.ref i{background:#64748b}
.score span{width:44px;text-align:right;font-size:11.5px;font-variant-numeric:tabular-nums}
tr.label td.name{font-weight:700}
.tag{font-size:10.5px;font-weight:700;border-radius:4px;padding:0 5px;margin-left:6px;
  text-transform:uppercase;letter-spacing:.04em}
.tag.top{background:#ffedd5;color:#9a3412}.tag.lbl{background:#e0e7ff;color:#3730a3}
.tag.rtop{background:#e2e8f0;color:#334155}
.verdict{display:flex;gap:10px;align-items:center;flex-wrap:wrap;margin:0 0 10px}
table.events{font-size:12.5px}
table.events tbody tr{cursor:pointer}table.events tbody tr:hover{background:#f8fafc}
table.events td.detail{word-break:break-word}
.scroll{max-height:360px;overflow:auto;border:1px solid var(--line);border-radius:8px}
.scroll thead th{position:sticky;top:0;background:#f9fafb;z-index:1}
footer{color:var(--faint);font-size:12px;margin-top:18px}
.filters{display:flex;gap:10px;flex-wrap:wrap;align-items:center;margin:0 0 12px}
.filters input,.filters select{font:inherit;padding:6px 9px;border:1px solid #d1d5db;
  border-radius:6px;background:#fff}
.filters input{min-width:240px}
.filters .count{color:var(--muted);margin-left:auto}
table.sessions th{cursor:pointer;white-space:nowrap;background:#f9fafb;position:sticky;top:0}
table.sessions th[data-type=num]{text-align:right}
table.sessions th[aria-sort=ascending]::after{content:" \25B2";font-size:9px}
table.sessions th[aria-sort=descending]::after{content:" \25BC";font-size:9px}
table.sessions tbody tr:hover{background:#f8fafc}
.stats{display:flex;gap:26px;flex-wrap:wrap;margin:2px 0 0}
.stats div{display:flex;flex-direction:column}
.stats b{font-size:20px;font-variant-numeric:tabular-nums}
.stats span{color:var(--muted);font-size:12px}
"""
