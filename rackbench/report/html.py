"""One self-contained HTML page over the results history: opens from a file, a CI artifact or a static site, with
no network. The data (every run's points, and each run compared with the one before it) is embedded as JSON with
every number already written by the one formatter (rackbench.core.format); plotly.js, embedded whole, draws the
Pareto plots (real axes, hover, zoom) for the runs selected, and a small script fills the tables. A section with
nothing to show says why.

``#runs=<id>,<id>`` in the address selects runs at load (what the browser test uses).
"""

from __future__ import annotations

import json
import os
from contextlib import closing
from itertools import combinations
from pathlib import Path

from rackbench.core.files import write_atomic
from rackbench.core.format import number
from rackbench.core.results_folder import ResultsFolder
from rackbench.history import changelog, queries, rows, store
from rackbench.report import gpuhours, offload
from rackbench.report.page import TEMPLATE
from rackbench.results import metrics as registry
from rackbench.results.accounting import LABELS, PHASES

COMPARED = 6      # every pair among the last runs: the page compares each selected run with the one selected before it


def collect(db: Path | str, page_dir: Path | None = None, changelog_file: Path | None = None) -> dict:
    """Runs (oldest first) with their points and offload A/B pairs, comparisons of the points two runs share (every
    pair of the last COMPARED runs), and per comparison the perf-changelog entries that select its points.
    Links go from ``page_dir`` to each run's files, where its results folder still is."""
    entries = changelog.load_entries(changelog_file) if changelog_file else []
    out = {"runs": [], "comparisons": [], "changelog": []}
    with closing(store.connect(db, create=False)) as con:
        runs = rows.runs(con)
        columns = registry.shown("report")         # the points table: the registry's report metrics, in order
        out["columns"] = [m.label for m in columns]
        for run in runs:
            points, parsed = [], []
            source = Path(run["source"]) if run["source"] and page_dir else None
            for profile, r in rows.results(con, run["run_id"]):
                parsed.append(r)
                case = r.identity.case_id
                links = _links(source, page_dir, profile, case, r.run.generator) if source else {}
                passed = None if r.verdict is None else int(r.verdict.passed)
                tps_gpu, tps_user = r.throughput.output_tps_per_gpu, r.interactivity.output_tps_per_user.p50
                points.append({"case": case, "profile": profile, "cluster": r.identity.cluster,
                               "model": r.identity.model, "concurrency": r.identity.concurrency, "passed": passed,
                               "tps_gpu": tps_gpu, "tps_user": tps_user, "links": links,
                               "text": {"tps_gpu": number(tps_gpu, "tok/s"), "tps_user": number(tps_user, "tok/s")},
                               "cells": [number(m.get(r), m.unit, missing="") for m in columns],
                               "series": _series(r)})
            ab = [{"base": pair.base, "offload": pair.offload, **_ab_text(row)}
                  for pair in offload.pairs(parsed) for row in offload.rows(parsed, pair)]
            held = gpuhours.of_folder(source, parsed) if source is not None else None
            out["runs"].append({**run, "points": points, "offload_ab": ab,
                                "gpu_hours": _held(held[1]) if held else None})
        ids = [r["run_id"] for r in runs]
        profiles, noises = queries.case_profiles(con), {}
        loaded = {run: queries.by_case(con, [run]) for run in ids[-COMPARED:]}     # each run read once
        for a, b in combinations(ids[-COMPARED:], 2):
            table = queries.compare_cases(con, loaded[a], loaded[b], noises=noises)
            for case, changes in table.items():
                out["comparisons"].append({"a": a, "b": b, "case": case, "changes": [
                    {"metric": registry.METRICS[c.metric].label, "a": number(c.a, registry.METRICS[c.metric].unit),
                     "b": number(c.b, registry.METRICS[c.metric].unit), "change": c.text(), "verdict": c.verdict,
                     "basis": c.basis} for c in changes]})
            for effect in changelog.effects(entries, {c: chs[0].verdict for c, chs in table.items()}, profiles):
                out["changelog"].append({"a": a, "b": b, **effect})
    return out


def _series(r) -> dict | None:
    """A point's series for its chart: the engines' output tok/s per slice, TTFT p50, KV usage, where the warm-up
    was cut and where an adaptive run stopped."""
    s = r.series
    if s is None or not s.t:
        return None
    start = next((t for t, v in zip(s.t, s.output_tps) if v), s.t[0])
    return {"t": s.t, "output_tps": s.output_tps, "ttft_p50_ms": s.ttft_p50_ms, "kv_usage": s.kv_usage,
            "cut_s": start + r.steady.truncated_s if r.steady else None, "stop_s": r.run.stopped_at_s,
            "steady": (f"warm-up {number(r.steady.truncated_s, 's')} s, ±{number(r.steady.half_width_rel, 'share')}, "
                       f"{'stationary' if r.steady.stationary else 'not shown stationary'}") if r.steady else ""}


def _held(total) -> dict:
    return {"total": number(total.gpu_hours, "rate"), "saved": number(total.saved_gpu_s / 3600, "rate"),
            "phases": {LABELS[p]: number(total.hours(p), "rate") for p in PHASES}}


def _ab_text(row: dict) -> dict:
    """An offload A/B row with its numbers written out."""
    units = {"base_tps_gpu": "tok/s", "offload_tps_gpu": "tok/s", "ratio": "ratio", "base_ttft_p50": "ms",
             "offload_ttft_p50": "ms", "cpu_tier": "share", "base_local_cache": "share",
             "offload_local_cache": "share"}
    return {k: (number(v, units[k], missing="") if k in units else v) for k, v in row.items()}


def _links(source: Path, page_dir: Path, profile: str, case: str, generator: str) -> dict[str, str]:
    """The point's files in its run's results folder, relative to the page: result JSON, its requests (CSV), load
    log, server logs."""
    folder = ResultsFolder.at(source)
    found = {"JSON": folder.point(case), "requests": folder.case(profile, case).requests,
             f"{generator} log": folder.case(profile, case).load_log(generator)}
    logs = folder.profile(profile).logs
    if logs.is_dir():
        found.update({f.stem: f for f in sorted(logs.glob("*.log"))})
    return {name: Path(os.path.relpath(f, page_dir)).as_posix() for name, f in found.items() if f.is_file()}


def write(db: Path | str, out: Path, changelog_file: Path | None = None) -> Path:
    data = collect(db, out.parent, changelog_file)
    embedded = json.dumps(data).replace("</", "<\\/")      # no "</script>" inside
    from plotly.offline import get_plotlyjs
    page = TEMPLATE.replace("__COMPARED__", str(COMPARED)).replace("__DATA__", embedded) \
        .replace("__PLOTLY__", get_plotlyjs().replace("</script", "<\\/script"))
    write_atomic(out, page)
    return out


