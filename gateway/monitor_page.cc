// The monitoring page served at "/" of gateways and standalone nodes: one self-contained HTML
// document (inline CSS and JavaScript, no external resources) that polls /api/v1/status.
#include "gateway/monitor.h"

namespace kleaf::gateway {

// One HTML literal, long and best read as the page it is.
const std::string& Monitor::Page() {
  static const std::string kPage = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kleaf</title>
<link rel="icon" href="data:,">
<style>
  :root { --fg:#1d2330; --muted:#6b7385; --line:#dde1e8; --bg:#f6f7f9; --ok:#1f8a4c; --bad:#c0392b; --warn:#b7791f; }
  * { box-sizing: border-box; }
  body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--fg); background:var(--bg); }
  header { display:flex; align-items:baseline; gap:1rem; padding:.8rem 1.5rem; background:#fff; border-bottom:1px solid var(--line); }
  header h1 { font-size:1.2rem; margin:0; }
  header .meta { color:var(--muted); }
  main { padding:1rem 1.5rem; display:grid; gap:1rem; }
  section { background:#fff; border:1px solid var(--line); border-radius:6px; padding:.8rem 1rem; }
  section h2 { font-size:.95rem; margin:0 0 .6rem; text-transform:uppercase; letter-spacing:.04em; color:var(--muted); }
  table { border-collapse:collapse; width:100%; }
  th, td { text-align:left; padding:.3rem .6rem; border-bottom:1px solid var(--line); vertical-align:top; }
  th { font-weight:600; color:var(--muted); font-size:.85rem; }
  td.num { font-variant-numeric:tabular-nums; text-align:right; font-family:ui-monospace, monospace; }
  .kv { display:grid; grid-template-columns:max-content 1fr; gap:.2rem 1rem; }
  .kv dt { color:var(--muted); }
  .kv dd { margin:0; font-family:ui-monospace, monospace; }
  .badge { display:inline-block; padding:0 .5rem; border-radius:999px; font-size:.8rem; color:#fff; }
  .ok { background:var(--ok); } .bad { background:var(--bad); } .warn { background:var(--warn); }
  .err { color:var(--bad); }
  .muted { color:var(--muted); }
  #banner { display:none; padding:.6rem 1.5rem; background:var(--bad); color:#fff; }
  #banner.show { display:block; }
  .bar { height:6px; background:var(--line); border-radius:3px; min-width:80px; }
  .bar > div { height:6px; background:var(--ok); border-radius:3px; }
  /* The plots' line colours are used nowhere else: the browser test finds the lines by them. */
  :root { --rate:#1f6feb; --latency:#d9480f; }
  .plots { display:flex; gap:.6rem; }
  .plot-box { display:flex; flex-direction:column; font-size:.75rem; color:var(--muted); }
  svg.plot { background:#fbfcfd; border:1px solid var(--line); }
  svg.plot polyline { fill:none; stroke-width:2; }
  svg.rate polyline { stroke:var(--rate); } svg.latency polyline { stroke:var(--latency); }
</style>
</head>
<body>
<header>
  <h1>kleaf</h1>
  <span class="meta" id="node">loading&hellip;</span>
  <span id="ready-badge"></span>
  <span class="meta" id="updated"></span>
</header>
<div id="banner" role="alert">The status endpoint (/api/v1/status) cannot be reached; the values below are stale.</div>
<main>
  <section>
    <h2>Snowflake worker</h2>
    <dl class="kv">
      <dt>worker id</dt><dd id="worker-id">&ndash;</dd>
      <dt>source</dt><dd id="worker-source">&ndash;</dd>
      <dt>lease valid for</dt><dd id="worker-valid">&ndash;</dd>
      <dt>clock offset to allocator</dt><dd id="worker-offset">&ndash;</dd>
      <dt>last renewal error</dt><dd id="worker-error">&ndash;</dd>
      <dt>last timestamp issued</dt><dd id="sf-last">&ndash;</dd>
      <dt>timestamp bits run out</dt><dd id="sf-runs-out">&ndash;</dd>
    </dl>
  </section>
  <section>
    <h2>Readiness</h2>
    <table><thead><tr><th>check</th><th>state</th><th>detail</th></tr></thead><tbody id="checks"></tbody></table>
  </section>
  <section>
    <h2>Segment buffers</h2>
    <table>
      <thead><tr><th>tag</th><th>id_mode</th><th>active: next</th><th>active: end</th><th>fill</th><th>standby</th>
        <th>step</th><th>IDs left</th><th>next ready</th><th>preload</th><th>last error</th>
        <th>last minutes: IDs/s (blue), segment fetch ms (orange)</th></tr></thead>
      <tbody id="tags"><tr><td colspan="12" class="muted">no tag buffered yet</td></tr></tbody>
    </table>
    <p class="muted" id="history-note"></p>
  </section>
  <section>
    <h2>Recent errors</h2>
    <table>
      <thead><tr><th>time (UTC)</th><th>status</th><th>code</th><th>request</th><th>message</th></tr></thead>
      <tbody id="errors"><tr><td colspan="5" class="muted">none</td></tr></tbody>
    </table>
  </section>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "\u2013" : String(text);
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}
function badge(ok, yes, no) {
  const s = document.createElement("span");
  s.className = "badge " + (ok ? "ok" : "bad");
  s.textContent = ok ? yes : no;
  return s;
}
function fill(body, rows, empty, cols) {
  body.replaceChildren();
  if (rows.length === 0) {
    const tr = document.createElement("tr");
    cell(tr, empty, "muted").colSpan = cols;
    body.appendChild(tr);
  }
  for (const r of rows) body.appendChild(r);
}
const PLOT_W = 160, PLOT_H = 36, PLOT_PAD = 3;
// One small line plot of `values` (null: no value, the line breaks) at `times` (Unix ms) over the
// `windowMs` before `nowMs`, scaled to its own maximum: inline SVG, parsed from markup that holds
// only numbers and the fixed `label`.
function plot(cls, times, values, nowMs, windowMs, label) {
  let max = 0, last = null;
  for (const v of values) {
    if (v !== null) { max = Math.max(max, v); last = v; }
  }
  const x = (t) => Math.max(0, Math.min(PLOT_W, PLOT_W - (nowMs - t) * PLOT_W / windowMs));
  const y = (v) => max > 0 ? PLOT_H - PLOT_PAD - (PLOT_H - 2 * PLOT_PAD) * v / max : PLOT_H - PLOT_PAD;
  const lines = [];
  let run = [];
  const flush = () => {
    if (run.length === 1) run.unshift([Math.max(0, run[0][0] - 4), run[0][1]]);  // a lone point: a dash
    if (run.length > 1) {
      lines.push('<polyline shape-rendering="crispEdges" points="' +
          run.map((p) => p[0].toFixed(1) + "," + p[1].toFixed(1)).join(" ") + '"/>');
    }
    run = [];
  };
  for (let i = 0; i < values.length; ++i) {
    if (values[i] === null) flush(); else run.push([x(times[i]), y(values[i])]);
  }
  flush();
  const fmt = (v) => v === null ? "\u2013" : v >= 100 ? String(Math.round(v)) : v.toFixed(1);
  const box = document.createElement("div");
  box.className = "plot-box";
  box.innerHTML = '<svg class="plot ' + cls + '" width="' + PLOT_W + '" height="' + PLOT_H +
      '" viewBox="0 0 ' + PLOT_W + " " + PLOT_H + '"><title>' + label + ": last " + fmt(last) +
      ", max " + fmt(max) + "</title>" + lines.join("") + "</svg>";
  const caption = document.createElement("span");
  caption.className = "plot-caption " + cls;
  caption.textContent = label + " \u2264 " + fmt(max);
  box.appendChild(caption);
  return box;
}
function render(s) {
  $("node").textContent = s.node.role + " \u00b7 node " + s.node.id + " \u00b7 up " + s.node.uptime_s + " s";
  $("ready-badge").replaceChildren(badge(s.ready.ready, "ready", "not ready"));
  $("updated").textContent = "updated " + s.node.time;
  const w = s.worker;
  $("worker-id").textContent = w.worker_id;
  $("worker-source").textContent = w.source;
  $("worker-valid").textContent = w.valid_for_ms === null ? "no lease (from config)" : w.valid_for_ms + " ms";
  $("worker-offset").textContent = w.clock_offset_ms === null ? "\u2013"
      : w.clock_offset_ms + " ms (\u00b1" + w.clock_offset_error_ms + " ms)";
  $("worker-error").textContent = w.last_error === null ? "none" : w.last_error;
  $("worker-error").className = w.last_error === null ? "" : "err";
  $("sf-last").textContent = s.snowflake.last_issued === null ? "none yet" : s.snowflake.last_issued;
  $("sf-runs-out").textContent = s.snowflake.runs_out + " (in " +
      Math.floor(s.snowflake.timestamp_remaining_s / 86400) + " days)";
  fill($("checks"), s.ready.checks.map((c) => {
    const tr = document.createElement("tr");
    cell(tr, c.name);
    cell(tr, "").appendChild(badge(c.ok, "ok", "failing"));
    cell(tr, c.detail);
    return tr;
  }), "no checks", 3);
  const h = s.history;
  const now = Date.parse(s.node.time);
  const windowMs = h.interval_ms * h.points;
  fill($("tags"), s.tags.map((t) => {
    const tr = document.createElement("tr");
    tr.dataset.tag = t.tag;
    cell(tr, t.tag, "tag");
    cell(tr, t.id_mode, "id-mode");
    cell(tr, t.active ? t.active.next : null, "num active-next");
    cell(tr, t.active ? t.active.end : null, "num active-end");
    const bar = document.createElement("div");
    bar.className = "bar";
    const inner = document.createElement("div");
    if (t.active && t.active.size > 0) {
      const used = Number(BigInt(t.active.next) - BigInt(t.active.start));
      inner.style.width = Math.max(0, Math.min(100, 100 - 100 * used / t.active.size)) + "%";
    } else {
      inner.style.width = "0%";
    }
    bar.appendChild(inner);
    cell(tr, "").appendChild(bar);
    cell(tr, t.standby ? "[" + t.standby.start + ", " + t.standby.end + ")" : null, "num standby");
    cell(tr, t.step, "num step");
    cell(tr, t.ids_left, "num ids-left");
    cell(tr, t.next_ready ? "yes" : "no");
    cell(tr, t.fetching ? "fetching" : "idle");
    cell(tr, t.last_error, t.last_error ? "err" : "");
    const plots = cell(tr, "", "plots-cell");
    if (t.history) {
      const box = document.createElement("div");
      box.className = "plots";
      box.appendChild(plot("rate", t.history.time_ms, t.history.ids_per_s, now, windowMs, "IDs/s"));
      box.appendChild(plot("latency", t.history.time_ms, t.history.fetch_ms, now, windowMs, "fetch ms"));
      plots.appendChild(box);
    } else {
      plots.textContent = "no history (more than " + h.max_tags + " tags)";
      plots.className = "muted";
    }
    return tr;
  }), "no tag buffered yet", 12);
  $("history-note").textContent = "Plots: IDs/s handed out and the mean time of the segment fetches " +
      "completed, per " + h.interval_ms / 1000 + " s, over the last " + windowMs / 60000 + " min " +
      "(kept by the node). At most " + h.max_tags + " tags have plots: the first buffered" +
      (h.untracked_tags > 0 ? "; " + h.untracked_tags + " more tags have none." : ".");
  fill($("errors"), s.recent_errors.slice().reverse().map((e) => {
    const tr = document.createElement("tr");
    cell(tr, e.time);
    cell(tr, e.status, "num");
    cell(tr, e.code);
    cell(tr, e.method + " " + e.path);
    cell(tr, e.message);
    return tr;
  }), "none", 5);
}
async function refresh() {
  try {
    const r = await fetch("/api/v1/status", { cache: "no-store" });
    if (!r.ok) throw new Error("HTTP " + r.status);
    render(await r.json());
    $("banner").classList.remove("show");
  } catch (e) {
    $("banner").textContent = "The status endpoint (/api/v1/status) cannot be reached (" + e.message +
        "); the values below are stale.";
    $("banner").classList.add("show");
  } finally {
    setTimeout(refresh, 1500);
  }
}
refresh();
</script>
</body>
</html>
)html";
  return kPage;
}

}  // namespace kleaf::gateway
