"""The report of a results folder: Pareto plots, the offload A/B, report.md (a PR comment) and points.csv.

Input is only the folder's ``points/*.json`` (invalid files are listed, not plotted), so a report can be rebuilt
from an artifact download. Verdicts are the ones the pytest cases stored with their points (baseline gate
included); the report never re-judges. Every number is shown by the one formatter (rackbench.core.format), every
column is a metric of the registry (rackbench.results.metrics).
"""

from __future__ import annotations

import csv
import io
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from rackbench.core.files import read_json, write_atomic
from rackbench.core.format import number
from rackbench.core.report_folder import ReportFolder
from rackbench.core.results_folder import ResultsFolder
from rackbench.report import ab, gpuhours, offload, plots, rank
from rackbench.report.slo import searches_section, section as slo_section
from rackbench.results.card import label
from rackbench.results import metrics as registry
from rackbench.results.files import load_points, stored_searches
from rackbench.results.model import PointResult

log = logging.getLogger(__name__)


def verdict_text(r: PointResult) -> str:
    return r.verdict.summary() if r.verdict is not None else "not judged"


@dataclass
class Report:
    points: list[PointResult]
    rejected: dict[str, str]
    files: list[Path] = field(default_factory=list)
    ab: list[tuple[offload.Pair, dict]] = field(default_factory=list)   # each pair and its changes (report.ab)

    @property
    def verdicts(self) -> dict[str, str]:
        return {r.identity.case_id: verdict_text(r) for r in self.points}


def _groups(points: list[PointResult]) -> dict[tuple[str, str], dict[str, list[PointResult]]]:
    groups: dict = defaultdict(lambda: defaultdict(list))
    for r in points:
        groups[(r.identity.model, r.identity.cluster)][r.identity.profile].append(r)
    for profiles in groups.values():
        for rows in profiles.values():
            rows.sort(key=lambda r: r.identity.concurrency)
    return groups


def ab_section(pair: offload.Pair, rows: list[dict], measured_in: dict[str, list[int]],
               found: dict | None = None, answers: list[dict] | None = None) -> str:
    lines = [f"### Offload A/B: `{pair.offload}` vs `{pair.base}`", ""]
    if pair.differs:
        lines.append(f"No verdict: the arms differ in more than the offload ({', '.join(pair.differs)}), so no "
                     "ratio of theirs measures the offload.")
    if pair.void:
        lines.append(f"No verdict: {'; '.join(pair.void)}, so no ratio of theirs measures the offload.")
    if pair.differs or pair.void:
        return "\n".join(lines) + "\n"
    tiers = ab.tier_answers(pair, answers or [])
    if tiers:
        lines += ["Each arm's SLO search (rackbench.results.search):", "", *tiers, ""]
    if not rows:
        lines.append(f"No concurrency measured in both arms ({pair.base}: {measured_in.get(pair.base, [])}, "
                     f"{pair.offload}: {measured_in.get(pair.offload, [])}).")
        return "\n".join(lines) + "\n"
    found = found or {}
    lines += ["| concurrency | base tok/s/GPU | offload tok/s/GPU | ratio | base TTFT p50 ms | offload TTFT p50 ms "
              "| base local-cache share | offload local-cache share | offload CPU-tier share | tok/s/GPU change [95%] "
              "| TTFT p50 change [95%] | TTFT p99 change [95%] |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for row in rows:
        cells = [str(row["concurrency"]), number(row["base_tps_gpu"], "tok/s"), number(row["offload_tps_gpu"], "tok/s"),
                 number(row["ratio"], "ratio"), number(row["base_ttft_p50"], "ms"),
                 number(row["offload_ttft_p50"], "ms"), number(row["base_local_cache"], "share"),
                 number(row["offload_local_cache"], "share"), number(row["cpu_tier"], "share"),
                 *ab.columns(found.get(row["concurrency"], {}))]
        lines.append("| " + " | ".join(cells) + " |")
    verdict = ab.summary_line(found)
    return "\n".join(lines) + ("\n\n" + verdict if verdict else "") + "\n"


def table_section(title: str, source: str, head: list[str], rows: list[list[str]], numbers: int) -> list[str]:
    """A report.md section of one table: its title, where it comes from, the case column, ``numbers`` columns of
    numbers (right-aligned), then any of words."""
    if not rows:
        return []
    return ["", f"## {title}", "", f"({source})", "", "| " + " | ".join(head) + " |",
            "|---|" + "---:|" * numbers + "---|" * (len(head) - 1 - numbers),
            *("| " + " | ".join(row) + " |" for row in rows)]


def omission_lines(ordered: list) -> list[str]:
    """The points whose latency from the schedule differs from the measured one (rackbench.results.omission)."""
    rows = [[r.identity.case_id, *(number(v, "ms") for v in (
        r.latency_ms.ttft.p99, r.latency_ms.from_intended.ttft.p99, r.latency_ms.e2e.p99,
        r.latency_ms.from_intended.e2e.p99, r.latency_ms.from_intended.delay_ms.p99))]
        for r in ordered if r.latency_ms.from_intended is not None and r.latency_ms.from_intended.differs]
    return table_section("Latency from the schedule: clients that sent late",
                         "rackbench.results.omission: docs/results.md#latency-from-the-schedule-coordinated-omission",
                         ["case", "TTFT p99 ms", "from the schedule", "E2E p99 ms", "from the schedule",
                          "send delay p99 ms"], rows, numbers=5)


def reuse_lines(ordered: list) -> list[str]:
    """The prefix reuse each point's trace allows against what its server reused (rackbench.results.reuse)."""
    rows = [[r.identity.case_id, number(u.allowed_share, "share"), number(u.measured_share, "share"),
             number(u.gap, "points"), number(u.cache_tokens, "count"), number(u.working_set_tokens, "count"),
             u.error or {True: "yes", False: "no", None: "—"}[u.should_hold]]
            for r in ordered if (u := r.reuse) is not None]
    return table_section("Prefix reuse: what the trace allows, what the server reused",
                         "rackbench.results.reuse: docs/results.md#the-offload-ab-as-a-verdict",
                         ["case", "trace allows", "server reused", "gap", "cache tokens", "live sessions' prefixes",
                          "should hold"], rows, numbers=5)


def markdown(rep: Report, plot_files: list[Path], ab_sections: list[str], held: str = "", searched: str = "") -> str:
    columns = registry.shown("report")
    lines = ["# rackbench report", "",
             f"{len(rep.points)} point(s)" + (f", {len(rep.rejected)} file(s) rejected" if rep.rejected else ""), "",
             "| case | verdict | bound | " + " | ".join(m.label for m in columns) + " |",
             "|---|---|---|" + "---:|" * len(columns)]
    ordered = sorted(rep.points, key=lambda r: (r.identity.profile, r.identity.concurrency))
    for r in ordered:
        cells = [number(m.get(r), m.unit) for m in columns]
        lines.append(f"| {r.identity.case_id} | {verdict_text(r)} | {r.bound.bound if r.bound else '—'} | "
                     + " | ".join(cells) + " |")
    other = [f"- `{r.identity.case_id}` ran on {label(r.identity)}: {'; '.join(r.identity.card_differs)}"
             for r in ordered if r.identity.card_differs]
    if other:
        lines += ["", "## Points run on another card than their cluster file names", "", *other]
    bounds = [f"- `{r.identity.case_id}`: **{r.bound.bound}**: {r.bound.reason}" for r in ordered if r.bound]
    if bounds:
        lines += ["", "## What bound each point", "", "(rackbench.results.bound: docs/results.md#what-bound-a-point)",
                  "", *bounds]
    lines += omission_lines(ordered) + reuse_lines(ordered)
    if plot_files:
        lines += ["", "Plots: " + ", ".join(f"`{p.name}`" for p in plot_files)]
    lines += [""] + (ab_sections or ["No offload A/B: no offload arm with a base arm that differs from it in the "
                                     "offload alone (same model, cluster, layout, frontend, versions, load).\n"])
    tiers = slo_section(rep.points)
    if tiers:
        lines += ["", tiers]
    if searched:
        lines += ["", searched]
    lines += ["", held or "## GPU-hours held\n\nNo manifest.json in this results folder: nothing says what was held.\n"]
    if rep.rejected:
        lines += ["", "Rejected result files:"] + [f"- `{k}`: {v}" for k, v in sorted(rep.rejected.items())]
    return "\n".join(lines) + "\n"


def points_csv(points: list[PointResult]) -> str:
    """Every identity column and every metric of the registry, unformatted (for machines)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([*registry.IDENTITY, *registry.METRICS, "verdict"])
    for r in sorted(points, key=lambda r: r.identity.case_id):
        values = [fn(r) for fn in registry.IDENTITY.values()] + [m.get(r) for m in registry.METRICS.values()]
        writer.writerow(["" if v is None else v for v in values] + [verdict_text(r)])
    return out.getvalue()


def write(results_dir: Path, out_dir: Path | None = None, only: set[str] | None = None) -> Report:
    """Write the report; ``only`` limits it to these case ids (the end of a session reports its own points)."""
    results_dir = Path(results_dir)
    points, rejected = load_points(results_dir)
    out = ReportFolder(Path(out_dir) if out_dir else ResultsFolder.at(results_dir).report)
    if out.root.exists() and not out.root.is_dir():
        raise ValueError(f"--out {out.root}: a file; the report is a folder (report.md, points.csv, plots)")
    out.root.mkdir(parents=True, exist_ok=True)
    if only is not None:
        points = [r for r in points if r.identity.case_id in only]
        rejected = {k: v for k, v in rejected.items() if k.removesuffix(".json") in only}
    rep = Report(points, rejected)
    plot_files = []
    for (model, cluster), profiles in sorted(_groups(points).items()):
        path = plots.pareto(model, cluster, profiles, out.pareto(model, cluster))
        if path:
            plot_files.append(path)
    measured_in: dict[str, list[int]] = defaultdict(list)
    for r in points:
        measured_in[r.identity.profile].append(r.identity.concurrency)
    sections = []
    answers = stored_searches(results_dir)
    for pair in offload.pairs(points):
        rows = offload.rows(points, pair)
        found = ab.gains(results_dir, points, pair)
        rep.ab.append((pair, found))
        sections.append(ab_section(pair, rows, {k: sorted(v) for k, v in measured_in.items()}, found, answers))
        path = plots.offload_ab(pair, rows, out.offload_ab(pair.base, pair.offload), found)
        if path:
            plot_files.append(path)
    for r in points:
        path = plots.point_series(r, out.point_plot(r.identity.case_id))
        if path:
            plot_files.append(path)
    search_plots = {a["profile"]: plots.search(a, out.search_plot(a["profile"])) for a in answers}
    plot_files += [p for p in search_plots.values() if p]
    accounting = gpuhours.of_folder(results_dir, points)
    by_profile = gpuhours.by_profile(accounting[0]) if accounting else {}
    searched = searches_section(answers, {k: v.name for k, v in search_plots.items() if v}, by_profile) + \
        rank.section(results_dir, by_profile)
    held = gpuhours.markdown(*accounting) if accounting else ""
    write_atomic(out.markdown, markdown(rep, plot_files, sections, held, searched))
    write_atomic(out.csv, points_csv(points))
    rep.files = [out.markdown, out.csv, *plot_files]
    return rep
