"""Reports from a results directory: Pareto plots, the offload A/B, a markdown summary and a CSV of all points.

Input is only ``<results>/points/*.json`` (invalid files are listed, not plotted), so a report can be rebuilt
from an artifact download. Verdicts are the ones the pytest cases stored with their points (baseline gate
included); the report never re-judges.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from .result import IDENTITY, METRICS, PointResult, read


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def verdict_text(r: PointResult) -> str:
    return r.verdict.summary() if r.verdict is not None else "not judged"


@dataclass
class Report:
    points: list[PointResult]
    rejected: dict[str, str]
    files: list[Path] = field(default_factory=list)

    @property
    def verdicts(self) -> dict[str, str]:
        return {r.identity.case_id: verdict_text(r) for r in self.points}


def points_folder(results_dir: Path) -> Path:
    """``<results>/points``; ValueError (one line) when results_dir is not a servebench results folder."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise ValueError(f"{results_dir}: no such folder" if not results_dir.exists()
                         else f"{results_dir}: a file, not a results folder")
    points = results_dir / "points"
    if not points.is_dir():
        raise ValueError(f"{results_dir}: no points/ folder in it; give the folder a benchmark session wrote "
                         "(--results-dir, default results/)")
    return points


def load_points(results_dir: Path) -> tuple[list[PointResult], dict[str, str]]:
    """Every readable result of a results folder, and the files set aside with the reason (one line each)."""
    points, rejected = [], {}
    for path in sorted(points_folder(results_dir).glob("*.json")):
        try:
            points.append(read(path))
        except ValueError as err:
            rejected[path.name] = str(err).removeprefix(f"{path}: ")
    return points, rejected


def _groups(points: list[PointResult]) -> dict[tuple[str, str], dict[str, list[PointResult]]]:
    groups: dict = defaultdict(lambda: defaultdict(list))
    for r in points:
        groups[(r.identity.model, r.identity.cluster)][r.identity.profile].append(r)
    for profiles in groups.values():
        for rows in profiles.values():
            rows.sort(key=lambda r: r.identity.concurrency)
    return groups


def pareto_plot(model: str, cluster: str, profiles: dict[str, list[PointResult]], out: Path) -> Path | None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    drawn = 0
    xs_all = []
    for name, rows in sorted(profiles.items()):
        pts = [(r.interactivity.output_tps_per_user.p50, r.throughput.output_tps_per_gpu, r.identity.concurrency)
               for r in rows]
        pts = [(x, y, c) for x, y, c in pts if _finite(x) and _finite(y) and x > 0]
        if not pts:
            continue
        xs, ys, cs = zip(*pts)
        xs_all += xs
        line, = ax.plot(xs, ys, marker="o", label=name)
        labels: dict[tuple[float, float], list[int]] = {}
        for x, y, c in pts:            # points at the same place share one label ("c128, c192")
            labels.setdefault((round(x, 6), round(y, 6)), []).append(c)
        for i, ((x, y), cs_here) in enumerate(labels.items()):
            ax.annotate(", ".join(f"c{c}" for c in cs_here), (x, y), textcoords="offset points",
                        xytext=(6, 6 if i % 2 == 0 else -12), fontsize=8, color=line.get_color())
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    if max(xs_all) / min(xs_all) > 20:
        ax.set_xscale("log")
    ax.set_xlabel("interactivity: output tok/s per user (p50)")
    ax.set_ylabel("throughput: output tok/s per GPU")
    ax.set_title(f"{model} on {cluster}: throughput vs interactivity (labels: concurrency)")
    ax.grid(True, alpha=0.3)
    ax.legend(title="profile", fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def offload_pairs(points: list[PointResult]) -> list[tuple[str, str, list[int]]]:
    """(base profile, offload profile, shared concurrencies) for arms of one model, cluster and layout."""
    arms: dict[tuple, dict[bool, dict[str, set[int]]]] = defaultdict(lambda: {True: defaultdict(set),
                                                                               False: defaultdict(set)})
    for r in points:
        i = r.identity
        key = (i.model, i.cluster, tuple(sorted(i.layout.model_dump().items())))
        arms[key][i.offload.enabled][i.profile].add(i.concurrency)
    pairs = []
    for arm in arms.values():
        for off, off_c in arm[True].items():
            for base, base_c in arm[False].items():
                pairs.append((base, off, sorted(off_c & base_c)))
    return sorted(pairs)


def offload_ab(points: list[PointResult], base: str, off: str, shared: list[int], out: Path) -> tuple[str, Path | None]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    idx = {(r.identity.profile, r.identity.concurrency): r for r in points}
    lines = [f"### Offload A/B: `{off}` vs `{base}`", ""]
    if not shared:
        lines.append(f"No concurrency measured in both arms ({base}: "
                     f"{sorted(c for p, c in idx if p == base)}, {off}: {sorted(c for p, c in idx if p == off)}).")
        return "\n".join(lines) + "\n", None
    lines += ["| concurrency | base tok/s/GPU | offload tok/s/GPU | ratio | base TTFT p50 ms | offload TTFT p50 ms "
              "| base local-cache share | offload local-cache share | offload CPU-tier share |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    tput = {base: [], off: []}
    ttft = {base: [], off: []}
    for c in shared:
        b, o = idx[(base, c)], idx[(off, c)]
        tb, to = b.throughput.output_tps_per_gpu, o.throughput.output_tps_per_gpu
        ratio = to / tb if _finite(tb) and _finite(to) and tb else None
        lines.append(f"| {c} | {_f(tb)} | {_f(to)} | {_f(ratio, 3)} | {_f(b.latency_ms.ttft.p50)} | "
                     f"{_f(o.latency_ms.ttft.p50)} | {_pct(_share(b, 'local_cache'))} | "
                     f"{_pct(_share(o, 'local_cache'))} | {_pct(_share(o, 'cpu_tier'))} |")
        for arm, r in ((base, b), (off, o)):
            tput[arm].append(_num(r.throughput.output_tps_per_gpu))
            ttft[arm].append(_num(r.latency_ms.ttft.p50))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4.5), dpi=120)
    width = 0.38
    xs = range(len(shared))
    for k, arm in enumerate((base, off)):
        a1.bar([x + (k - 0.5) * width for x in xs], tput[arm], width, label=arm)
        a2.plot(list(xs), ttft[arm], marker="o", label=arm)
    for ax in (a1, a2):
        ax.set_xticks(list(xs), [str(c) for c in shared])
        ax.set_xlabel("concurrency (live sessions)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    a1.set_ylabel("output tok/s per GPU")
    a1.set_title("throughput")
    a2.set_ylabel("TTFT p50 (ms)")
    a2.set_title("time to first token")
    fig.suptitle(f"CPU KV offload A/B: {off} vs {base}")
    fig.tight_layout()
    path = out / f"offload-ab-{off}.png"
    fig.savefig(path)
    plt.close(fig)
    return "\n".join(lines) + "\n", path


def _share(r: PointResult, source: str) -> float | None:
    return getattr(r.server.prompt_token_shares, source) if r.server is not None else None


def _num(x):
    return x if _finite(x) else 0.0


def _f(x, digits: int = 1) -> str:
    return f"{x:,.{digits}f}" if _finite(x) else "—"


def _pct(x) -> str:
    return f"{x:.1%}" if _finite(x) else "—"


TABLE = ("output_tps_per_gpu", "output_tps", "tps_per_user_p50", "ttft_p50_ms", "itl_p50_ms", "error_rate",
         "effective_concurrency", "cpu_tier_hit_share")


def markdown(rep: Report, plots: list[Path], ab_sections: list[str]) -> str:
    lines = ["# servebench report", "",
             f"{len(rep.points)} point(s)" + (f", {len(rep.rejected)} file(s) rejected" if rep.rejected else ""), "",
             "| case | verdict | " + " | ".join(METRICS[m].label for m in TABLE) + " |",
             "|---|---|" + "---:|" * len(TABLE)]
    for r in sorted(rep.points, key=lambda r: (r.identity.profile, r.identity.concurrency)):
        cells = [(_pct if METRICS[m].kind == "pct" else _f)(METRICS[m].get(r)) for m in TABLE]
        lines.append(f"| {r.identity.case_id} | {verdict_text(r)} | " + " | ".join(cells) + " |")
    if plots:
        lines += ["", "Plots: " + ", ".join(f"`{p.name}`" for p in plots)]
    lines += [""] + (ab_sections or ["No offload A/B: no offload arm with a matching base arm in these results.\n"])
    if rep.rejected:
        lines += ["", "Rejected result files:"] + [f"- `{k}`: {v}" for k, v in sorted(rep.rejected.items())]
    return "\n".join(lines) + "\n"


def write(results_dir: Path, out_dir: Path | None = None, only: set[str] | None = None) -> Report:
    """Write the report; ``only`` limits it to these case ids (the end of a session reports its own points)."""
    results_dir = Path(results_dir)
    out = Path(out_dir) if out_dir else results_dir / "report"
    points, rejected = load_points(results_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: a file; the report is a folder (report.md, points.csv, plots)")
    out.mkdir(parents=True, exist_ok=True)
    if only is not None:
        points = [r for r in points if r.identity.case_id in only]
        rejected = {k: v for k, v in rejected.items() if k.removesuffix(".json") in only}
    rep = Report(points, rejected)
    plots = []
    for (model, cluster), profiles in sorted(_groups(points).items()):
        path = pareto_plot(model, cluster, profiles, out / f"pareto-{model}-{cluster}.png")
        if path:
            plots.append(path)
    sections = []
    for base, off, shared in offload_pairs(points):
        text, path = offload_ab(points, base, off, shared, out)
        sections.append(text)
        if path:
            plots.append(path)
    md = out / "report.md"
    md.write_text(markdown(rep, plots, sections))
    with open(out / "points.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow([*IDENTITY, *METRICS, "verdict"])
        for r in sorted(points, key=lambda r: r.identity.case_id):
            values = [fn(r) for fn in IDENTITY.values()] + [m.get(r) for m in METRICS.values()]
            writer.writerow(["" if v is None else v for v in values] + [verdict_text(r)])
    rep.files = [md, out / "points.csv", *plots]
    return rep
