"""report.html's page: the layout, the tables' script and the place plotly.js and the data go
(rackbench.report.html fills ``__PLOTLY__``, ``__DATA__`` and ``__COMPARED__``). Every number arrives written
(rackbench.core.format): the script shows text and hands raw values only to the plots."""

TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rackbench results</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}
td:first-child,th:first-child{text-align:left}.failed{color:#b00}.passed{color:#070}
.better{color:#070}.worse{color:#b00}.plot{width:760px;height:440px;margin:.5em 0}label{margin-right:1em}
.empty{color:#666;font-style:italic}
</style>
<script>__PLOTLY__</script>
</head><body>
<h1>rackbench results</h1>
<p>Every run in the history; select runs to plot and list them. Comparisons: each selected run against the one
selected before it (among the last __COMPARED__ runs),
with 95% intervals: from the run-to-run noise of repeated points where the history has them, else a within-run
bootstrap, which does not cover run-to-run noise (the "basis" column says which;
docs/results.md#results-history-rackbench-history-rackbench-compare).</p>
<div id="runs"></div>
<h2>Pareto: output tok/s per GPU against tok/s per user</h2><div id="pareto"></div>
<h2>Offload A/B: each offload arm against its base arm</h2><div id="offload"></div>
<h2>Points</h2><div id="points"></div>
<h2>Each point over time</h2><div id="series"></div>
<h2>GPU-hours held</h2><div id="held"></div>
<h2>Comparisons</h2><div id="comparisons"></div>
<h2>perf-changelog: the measured effect of each entry</h2><div id="changelog"></div>
<script type="application/json" id="data">__DATA__</script>
<script>
"use strict";
const DATA = JSON.parse(document.getElementById("data").textContent);
function selected() {
  return new Set([...document.querySelectorAll("#runs input:checked")].map(e => e.value));
}
function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function empty(box, why) { box.replaceChildren(el("p", {class: "empty"}, why)); }
function grid(box, header, rows, classes) {
  const t = el("table", {});
  const head = t.insertRow();
  for (const h of header) head.append(el("th", {}, h));
  for (const row of rows) {
    const tr = t.insertRow();
    row.forEach((v, i) => {
      const td = tr.insertCell();
      if (v instanceof Node) td.append(v); else td.textContent = v;
      if (classes && classes[i]) td.className = classes[i](v) || "";
    });
  }
  box.replaceChildren(t);
}
function pareto(points) {
  const box = document.getElementById("pareto"); box.replaceChildren();
  const good = points.filter(p => p.tps_gpu !== null && p.tps_user !== null);
  if (!good.length) { empty(box, "no point of the selected runs has both tok/s per GPU and tok/s per user"); return; }
  const groups = {};
  for (const p of good) (groups[p.model + " on " + p.cluster] ||= []).push(p);
  for (const [title, pts] of Object.entries(groups)) {
    const div = el("div", {class: "plot", "data-title": title});
    box.append(div);
    const series = {};
    for (const p of pts) (series[p.run + " " + p.profile] ||= []).push(p);
    const traces = Object.entries(series).map(([name, s]) => {
      s.sort((a, b) => a.concurrency - b.concurrency);
      return {name: name, type: "scatter", mode: "lines+markers", x: s.map(p => p.tps_user),
              y: s.map(p => p.tps_gpu), customdata: s.map(p => p.case),
              text: s.map(p => p.case + " (" + p.run + ")<br>" + p.text.tps_gpu + " tok/s per GPU, " +
                          p.text.tps_user + " tok/s per user"), hoverinfo: "text"};
    });
    Plotly.newPlot(div, traces, {title: {text: title}, margin: {t: 40, r: 20, b: 50, l: 70},
      xaxis: {title: {text: "tok/s per user (p50)"}, rangemode: "tozero"},
      yaxis: {title: {text: "output tok/s per GPU"}, rangemode: "tozero"},
      showlegend: true, legend: {orientation: "h", y: -0.2}}, {displaylogo: false, responsive: false});
  }
}
function links(p) {
  const span = el("span", {});
  for (const [name, href] of Object.entries(p.links)) span.append(el("a", {href: href}, name), " ");
  return span;
}
function table(points) {
  const box = document.getElementById("points");
  if (!points.length) { empty(box, "no run is selected: tick one above"); return; }
  grid(box, ["case", "run", "verdict", ...DATA.columns, "files"],
       points.map(p => [p.case, p.run, p.passed === null ? "not judged" : (p.passed ? "passed" : "failed"),
                        ...p.cells, links(p)]),
       {2: v => v});
}
function offload(runs) {
  const box = document.getElementById("offload");
  const rows = DATA.runs.filter(r => runs.has(r.run_id)).flatMap(r => r.offload_ab.map(x => ({...x, run: r.run_id})));
  if (!rows.length) {
    empty(box, "no offload arm with a base arm that differs from it only in the offload, among the selected runs");
    return;
  }
  grid(box, ["run", "offload arm", "base arm", "concurrency", "base tok/s per GPU", "offload tok/s per GPU", "ratio",
             "base TTFT p50 ms", "offload TTFT p50 ms", "CPU-tier share"],
       rows.map(x => [x.run, x.offload, x.base, String(x.concurrency), x.base_tps_gpu, x.offload_tps_gpu, x.ratio,
                      x.base_ttft_p50, x.offload_ttft_p50, x.cpu_tier]));
}
function seriesCharts(points) {
  const box = document.getElementById("series"); box.replaceChildren();
  const shown = points.filter(p => p.series);
  if (!shown.length) { empty(box, "no point of the selected runs has a series (results of schema 4 have one)"); return; }
  for (const p of shown) {
    const s = p.series, div = el("div", {class: "plot", "data-case": p.case});
    box.append(div);
    const marks = [], notes = [];
    if (s.cut_s !== null) { marks.push({type: "line", x0: s.cut_s, x1: s.cut_s, yref: "paper", y0: 0, y1: 1,
                                        line: {dash: "dash", color: "#ff7f0e"}}); notes.push("warm-up cut"); }
    if (s.stop_s !== null) { marks.push({type: "line", x0: s.stop_s, x1: s.stop_s, yref: "paper", y0: 0, y1: 1,
                                         line: {color: "#d62728"}}); notes.push("adaptive stop"); }
    Plotly.newPlot(div, [
      {name: "output tok/s (engines)", x: s.t, y: s.output_tps, type: "scatter", mode: "lines"},
      {name: "TTFT p50 ms", x: s.t, y: s.ttft_p50_ms, type: "scatter", mode: "lines", yaxis: "y2"},
      {name: "KV-cache usage %", x: s.t, y: s.kv_usage.map(v => 100 * v), type: "scatter", mode: "lines",
       yaxis: "y2", line: {dash: "dot"}}],
      {title: {text: p.case + " (" + p.run + "): " + s.steady + (notes.length ? "; lines: " + notes.join(", ") : "")},
       shapes: marks, margin: {t: 50, r: 60, b: 50, l: 70}, showlegend: true, legend: {orientation: "h", y: -0.2},
       xaxis: {title: {text: "seconds since the load generator started"}},
       yaxis: {title: {text: "output tok/s"}, rangemode: "tozero"},
       yaxis2: {title: {text: "ms / %"}, overlaying: "y", side: "right", rangemode: "tozero"}},
      {displaylogo: false, responsive: false});
  }
}
function held(runs) {
  const box = document.getElementById("held");
  const rows = DATA.runs.filter(r => runs.has(r.run_id) && r.gpu_hours);
  if (!rows.length) { empty(box, "no selected run's results folder has its manifest.json (it says what was held)"); return; }
  const phases = Object.keys(rows[0].gpu_hours.phases);
  grid(box, ["run", "GPU-hours", ...phases, "saved by adaptive stop"],
       rows.map(r => [r.run_id, r.gpu_hours.total, ...phases.map(k => r.gpu_hours.phases[k]), r.gpu_hours.saved]));
}
function pairs(runs) {
  const order = DATA.runs.map(r => r.run_id).filter(id => runs.has(id));
  return new Set(order.slice(1).map((b, i) => order[i] + " " + b));
}
function comparisons(runs) {
  const box = document.getElementById("comparisons"), shown = pairs(runs);
  const found = DATA.comparisons.filter(c => shown.has(c.a + " " + c.b));
  if (!found.length) {
    empty(box, runs.size < 2 ? "select two runs to compare them (each against the one selected before it)"
      : "the selected runs measured no point in common among the last __COMPARED__ runs");
    return;
  }
  const rows = found.flatMap(c => c.changes.map(ch => [c.case, c.b + " vs " + c.a, ch.metric, ch.a, ch.b, ch.change,
                                                       ch.verdict, ch.basis]));
  grid(box, ["case", "B against A", "metric", "A", "B", "change [95%]", "verdict", "basis"], rows,
       {6: v => v === "better" ? "better" : v === "worse" ? "worse" : ""});
}
function changelogTable(runs) {
  const box = document.getElementById("changelog");
  const pair = pairs(runs), shown = DATA.changelog.filter(e => pair.has(e.a + " " + e.b));
  if (!shown.length) { empty(box, "no perf-changelog entry selects a point the selected runs compare"); return; }
  grid(box, ["entry", "PR", "B against A", "points", "output tok/s per GPU", "description"],
       shown.map(e => [String(e.entry), e.pr, e.b + " vs " + e.a, e.cases.join(" "),
                       Object.entries(e.counts).map(([v, n]) => n + " " + v).join(", "), e.description]));
}
function render() {
  const runs = selected();
  const points = DATA.runs.filter(r => runs.has(r.run_id)).flatMap(r => r.points.map(p => ({...p, run: r.run_id})));
  pareto(points); table(points); seriesCharts(points); held(runs); offload(runs); comparisons(runs);
  changelogTable(runs);
  document.body.dataset.selected = [...runs].join(",");
}
(function init() {
  const box = document.getElementById("runs");
  if (!DATA.runs.length) { empty(box, "the history holds no run yet"); }
  const wanted = new URLSearchParams(location.hash.slice(1)).get("runs");
  const pick = wanted ? new Set(wanted.split(",")) : null;
  DATA.runs.forEach((r, i) => {
    const label = el("label", {});
    const box1 = el("input", {type: "checkbox", value: r.run_id});
    box1.checked = pick ? pick.has(r.run_id) : i >= DATA.runs.length - 2;
    box1.addEventListener("change", render);
    label.append(box1, " " + r.run_id + " (" + (r.git_commit || "?").slice(0, 8) + ", " + r.points.length + " points)");
    box.append(label);
  });
  render();
})();
</script></body></html>
"""
