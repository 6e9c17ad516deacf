"""One self-contained HTML page over the results history: opens from a file, a CI artifact or a static site, with
no network. The data (every run's points, and each run compared with the one before it) is embedded as JSON; a
small script draws the Pareto plots as SVG for the runs selected, and filters the point table.

``#runs=<id>,<id>`` in the address selects runs at load (what the browser test uses).
"""

from __future__ import annotations

import json
import os
from contextlib import closing
from itertools import combinations
from pathlib import Path

from . import changelog, history, result
from .report import offload_pairs
from .yamlio import write_atomic

COMPARED = 6      # every pair among the last runs: the page compares each selected run with the one selected before it


def collect(db: Path | str, page_dir: Path | None = None, changelog_file: Path | None = None) -> dict:
    """Runs (oldest first) with their points and offload A/B pairs, comparisons of the points two runs share (every
    pair of the last COMPARED runs), and per comparison the perf-changelog entries that select its points.
    Links go from ``page_dir`` to each run's files, where its results folder still is."""
    runs = history.runs(db)
    entries = changelog.load_entries(changelog_file) if changelog_file else []
    out = {"runs": [], "comparisons": [], "changelog": []}
    with closing(history.connect(db)) as con:
        for run in runs:
            rows = con.execute(
                "SELECT case_id, profile, cluster, concurrency, passed, output_tps_per_gpu, tps_per_user_p50, "
                "ttft_p50_ms, error_rate, result_json FROM points WHERE run_id = ? ORDER BY case_id", (run["run_id"],))
            points, parsed = [], []
            source = Path(run["source"]) if run["source"] and page_dir else None
            for case, profile, cluster, conc, passed, tps, user, ttft, err, blob in rows:
                r = json.loads(blob)
                parsed.append(result.parse(r))
                links = _links(source, page_dir, profile, case) if source else {}
                points.append({"case": case, "profile": profile, "cluster": cluster, "model": r["identity"]["model"],
                               "concurrency": conc, "passed": passed, "tps_gpu": tps, "tps_user": user,
                               "ttft_p50": ttft, "error_rate": err, "links": links,
                               "cpu_tier": ((r.get("server") or {}).get("prompt_token_shares") or {}).get("cpu_tier")})
            out["runs"].append({**run, "points": points, "offload_ab": _offload_ab(parsed)})
        ids = [r["run_id"] for r in runs]
        profiles, noises = history.case_profiles(con), {}
        loaded = {run: history.by_case(con, [run]) for run in ids[-COMPARED:]}     # each run read once
        for a, b in combinations(ids[-COMPARED:], 2):
            table = history.compare_cases(con, loaded[a], loaded[b], noises=noises)
            for case, changes in table.items():
                out["comparisons"].append({"a": a, "b": b, "case": case,
                                           "changes": [c.__dict__ for c in changes]})
            for effect in changelog.effects(entries, {c: chs[0].verdict for c, chs in table.items()}, profiles):
                out["changelog"].append({"a": a, "b": b, **effect})
    return out


def _links(source: Path, page_dir: Path, profile: str, case: str) -> dict[str, str]:
    """The point's files in its run's results folder, relative to the page: result JSON, AIPerf log, server logs."""
    found = {"JSON": source / "points" / f"{case}.json", "AIPerf log": source / profile / case / "aiperf.log"}
    logs = source / profile / "logs"
    if logs.is_dir():
        found.update({f.stem: f for f in sorted(logs.glob("*.log"))})
    return {name: Path(os.path.relpath(f, page_dir)).as_posix() for name, f in found.items() if f.is_file()}


def _offload_ab(points: list) -> list[dict]:
    """Each offload arm against its base arm (same model, cluster and layout) at the concurrencies both measured."""
    idx = {(r.identity.profile, r.identity.concurrency): r for r in points}
    out = []
    for base, off, shared in offload_pairs(points):
        for conc in shared:
            b, o = idx[(base, conc)], idx[(off, conc)]
            tb, to = b.throughput.output_tps_per_gpu, o.throughput.output_tps_per_gpu
            out.append({"base": base, "offload": off, "concurrency": conc, "base_tps_gpu": tb, "offload_tps_gpu": to,
                        "ratio": to / tb if tb and to is not None else None,
                        "base_ttft_p50": b.latency_ms.ttft.p50, "offload_ttft_p50": o.latency_ms.ttft.p50,
                        "cpu_tier": o.server.prompt_token_shares.cpu_tier if o.server and
                        o.server.prompt_token_shares else None})
    return out


def write(db: Path | str, out: Path, changelog_file: Path | None = None) -> Path:
    data = collect(db, out.parent, changelog_file)
    embedded = json.dumps(data).replace("</", "<\\/")      # no "</script>" inside
    page = TEMPLATE.replace("__COMPARED__", str(COMPARED)).replace("__DATA__", embedded)
    write_atomic(out, page)
    return out


TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>servebench results</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}
td:first-child,th:first-child{text-align:left}.failed{color:#b00}.passed{color:#070}
.better{color:#070}.worse{color:#b00}svg{border:1px solid #ddd;margin:.5em 1em .5em 0}label{margin-right:1em}
</style></head><body>
<h1>servebench results</h1>
<p>Every run in the history; select runs to plot and list them. Comparisons: each selected run against the one
selected before it (among the last __COMPARED__ runs),
with 95% intervals: from the run-to-run noise of repeated points where the history has them, else a within-run
bootstrap, which does not cover run-to-run noise (the "basis" column says which; README: Results history).</p>
<div id="runs"></div>
<h2>Pareto: output tok/s per GPU against tok/s per user</h2><div id="pareto"></div>
<h2>Offload A/B: each offload arm against its base arm</h2><div id="offload"></div>
<h2>Points</h2><table id="points"></table>
<h2>Comparisons</h2><table id="comparisons"></table>
<h2>perf-changelog: the measured effect of each entry</h2><table id="changelog"></table>
<script type="application/json" id="data">__DATA__</script>
<script>
"use strict";
const DATA = JSON.parse(document.getElementById("data").textContent);
const fmt = (x, d = 1) => (x === null || x === undefined) ? "n/a" : Number(x).toFixed(d);
const sfmt = x => (x >= 0 ? "+" : "") + fmt(x);
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"];
function selected() {
  return new Set([...document.querySelectorAll("#runs input:checked")].map(e => e.value));
}
function el(tag, attrs, text) {
  const e = document.createElementNS(tag === "svg" || ["circle", "line", "text", "polyline", "g"].includes(tag)
    ? "http://www.w3.org/2000/svg" : "http://www.w3.org/1999/xhtml", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function pareto(points) {
  const box = document.getElementById("pareto"); box.replaceChildren();
  const groups = {};
  for (const p of points) (groups[p.model + " on " + p.cluster] ||= []).push(p);
  for (const [title, pts] of Object.entries(groups)) {
    const W = 640, H = 380, M = 56, good = pts.filter(p => p.tps_gpu !== null && p.tps_user !== null);
    const xs = good.map(p => p.tps_user), ys = good.map(p => p.tps_gpu);
    const xmax = Math.max(1, ...xs) * 1.1, ymax = Math.max(1, ...ys) * 1.1;
    const X = v => M + v / xmax * (W - 2 * M), Y = v => H - M - v / ymax * (H - 2 * M);
    const svg = el("svg", {width: W, height: H, "data-title": title});
    svg.append(el("text", {x: M, y: 18}, title));
    svg.append(el("line", {x1: M, y1: H - M, x2: W - M, y2: H - M, stroke: "#888"}));
    svg.append(el("line", {x1: M, y1: M, x2: M, y2: H - M, stroke: "#888"}));
    svg.append(el("text", {x: W / 2 - 40, y: H - 12}, "tok/s per user"));
    svg.append(el("text", {x: 4, y: M - 8}, "tok/s per GPU"));
    svg.append(el("text", {x: W - M - 30, y: H - M + 16}, fmt(xmax, 0)));
    svg.append(el("text", {x: M - 40, y: M + 4}, fmt(ymax, 0)));
    svg.append(el("text", {x: M - 12, y: H - M + 16}, "0"));
    const series = {};
    for (const p of good) (series[p.run + " " + p.profile] ||= []).push(p);
    Object.entries(series).forEach(([name, s], i) => {
      s.sort((a, b) => a.concurrency - b.concurrency);
      const color = COLORS[i % COLORS.length];
      svg.append(el("polyline", {points: s.map(p => X(p.tps_user) + "," + Y(p.tps_gpu)).join(" "),
                                  fill: "none", stroke: color}));
      for (const p of s) {
        const c = el("circle", {cx: X(p.tps_user), cy: Y(p.tps_gpu), r: 4, fill: color, class: "point",
                                "data-case": p.case, "data-run": p.run});
        c.append(el("title", {}, p.case + " (" + p.run + "): " + fmt(p.tps_gpu) + " tok/s/GPU"));
        svg.append(c);
      }
      svg.append(el("text", {x: M + 10, y: H - M - 10 - 14 * i, fill: color}, name));
    });
    box.append(svg);
  }
}
function table(points) {
  const t = document.getElementById("points");
  t.innerHTML = "<tr><th>case</th><th>run</th><th>verdict</th><th>tok/s per GPU</th><th>tok/s per user p50</th>" +
    "<th>TTFT p50 ms</th><th>error rate</th><th>CPU-tier share</th><th>files</th></tr>";
  for (const p of points) {
    const tr = t.insertRow();
    const verdict = p.passed === null ? "not judged" : (p.passed ? "passed" : "failed");
    const cells = [p.case, p.run, verdict, fmt(p.tps_gpu), fmt(p.tps_user), fmt(p.ttft_p50),
                   fmt(100 * (p.error_rate || 0)) + "%", p.cpu_tier === null ? "" : fmt(100 * p.cpu_tier) + "%"];
    cells.forEach((v, i) => { const td = tr.insertCell(); td.textContent = v; if (i === 2) td.className = verdict; });
    const link = tr.insertCell();
    for (const [name, href] of Object.entries(p.links)) link.append(el("a", {href: href}, name), " ");
  }
}
function offload(runs) {
  const box = document.getElementById("offload"); box.replaceChildren();
  const rows = DATA.runs.filter(r => runs.has(r.run_id)).flatMap(r => r.offload_ab.map(x => ({...x, run: r.run_id})));
  if (!rows.length) { box.textContent = "no offload arm with a matching base arm among the selected runs"; return; }
  const t = el("table", {});
  t.innerHTML = "<tr><th>run</th><th>offload arm</th><th>base arm</th><th>concurrency</th><th>base tok/s per GPU</th>" +
    "<th>offload tok/s per GPU</th><th>ratio</th><th>base TTFT p50 ms</th><th>offload TTFT p50 ms</th>" +
    "<th>CPU-tier share</th></tr>";
  for (const x of rows) {
    const tr = t.insertRow();
    [x.run, x.offload, x.base, x.concurrency, fmt(x.base_tps_gpu), fmt(x.offload_tps_gpu), fmt(x.ratio, 2),
     fmt(x.base_ttft_p50), fmt(x.offload_ttft_p50), x.cpu_tier === null ? "" : fmt(100 * x.cpu_tier) + "%"]
      .forEach(v => { tr.insertCell().textContent = v; });
  }
  box.append(t);
}
function pairs(runs) {
  const order = DATA.runs.map(r => r.run_id).filter(id => runs.has(id));
  return new Set(order.slice(1).map((b, i) => order[i] + " " + b));
}
function comparisons(runs) {
  const t = document.getElementById("comparisons"), shown = pairs(runs);
  t.innerHTML = "<tr><th>case</th><th>B against A</th><th>metric</th><th>A</th><th>B</th><th>change [95%]</th>" +
    "<th>verdict</th><th>basis</th></tr>";
  for (const c of DATA.comparisons.filter(c => shown.has(c.a + " " + c.b))) {
    for (const ch of c.changes) {
      const tr = t.insertRow();
      const pct = 100, unit = ch.metric === "error_rate" ? " pts" : "%";
      const span = ch.low === null ? "" : " [" + sfmt(ch.low * pct) + ", " + sfmt(ch.high * pct) + "]";
      [c.case, c.b + " vs " + c.a, ch.metric, fmt(ch.a), fmt(ch.b),
       ch.rel === null ? "" : sfmt(ch.rel * pct) + unit + span, ch.verdict, ch.basis].forEach((v, i) => {
        const td = tr.insertCell(); td.textContent = v;
        if (i === 6) td.className = ch.verdict === "better" ? "better" : ch.verdict === "worse" ? "worse" : "";
      });
    }
  }
}
function changelogTable(runs) {
  const t = document.getElementById("changelog");
  t.innerHTML = "<tr><th>entry</th><th>PR</th><th>B against A</th><th>points</th><th>output tok/s per GPU</th>" +
    "<th>description</th></tr>";
  const pair = pairs(runs), shown = DATA.changelog.filter(e => pair.has(e.a + " " + e.b));
  if (!shown.length) { t.insertRow().insertCell().textContent = "no changelog entry selects a compared point"; return; }
  for (const e of shown) {
    const tr = t.insertRow();
    const counts = Object.entries(e.counts).map(([v, n]) => n + " " + v).join(", ");
    [e.entry, e.pr, e.b + " vs " + e.a, e.cases.join(" "), counts, e.description].forEach(v => {
      tr.insertCell().textContent = v;
    });
  }
}
function render() {
  const runs = selected();
  const points = DATA.runs.filter(r => runs.has(r.run_id)).flatMap(r => r.points.map(p => ({...p, run: r.run_id})));
  pareto(points); table(points); offload(runs); comparisons(runs); changelogTable(runs);
  document.body.dataset.selected = [...runs].join(",");
}
(function init() {
  const box = document.getElementById("runs");
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
