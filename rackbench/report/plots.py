"""The report's PNG plots (matplotlib, for report.md and the PR comment): the Pareto front of each model and
cluster, and each offload A/B pair."""

from __future__ import annotations

from pathlib import Path

from rackbench.core.format import measured
from rackbench.report.offload import Pair
from rackbench.results.model import PointResult


PNG_COMPRESS_LEVEL = 1       # zlib's level for every plot (rackbench.report.plots._save)


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, out: Path, **margins) -> Path:
    """Write the figure with fixed margins (``fig.subplots_adjust``; tight_layout drew every plot twice, a third
    of its cost) and close it. PNG at zlib level 1, not PIL's default 6: 0.86x the CPU for files 1.11x the size
    (benchmarks/plot_cost.py measures both in one run; docs/measurements.md)."""
    fig.subplots_adjust(**{"left": 0.1, "right": 0.97, "bottom": 0.1, "top": 0.92, **margins})
    fig.savefig(out, pil_kwargs={"compress_level": PNG_COMPRESS_LEVEL})
    _pyplot().close(fig)
    return out


def tier_lines(results: list[PointResult]) -> list[tuple[str, float]]:
    """Where each service-level tier with a TPOT limit bounds the interactivity axis: a request meeting TPOT t ms
    streams at least 1000 / t tokens per second to its user, so the points left of the line miss that tier's
    TPOT at their median (pure). One line per (tier, limit), by limit."""
    seen = {(t.tier, t.limits["tpot_ms"]) for r in results for t in r.slo if t.limits.get("tpot_ms")}
    return sorted(((f"{name}: TPOT <= {limit:g} ms", 1000.0 / limit) for name, limit in seen), key=lambda x: x[1])


def pareto(model: str, cluster: str, profiles: dict[str, list[PointResult]], out: Path) -> Path | None:
    """Output tok/s per GPU against tok/s per user, one curve per profile, points labelled with their concurrency;
    each SLO tier's TPOT limit as a vertical line (``tier_lines``)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    drawn, xs_all = 0, []
    for name, rows in sorted(profiles.items()):
        pts = [(r.interactivity.output_tps_per_user.p50, r.throughput.output_tps_per_gpu, r.identity.concurrency)
               for r in rows]
        pts = [(x, y, c) for x, y, c in pts if measured(x) and measured(y) and x > 0]
        if not pts:
            continue
        xs, ys, _ = zip(*pts)
        xs_all += xs
        line, = ax.plot(xs, ys, marker="o", label=name)
        labels: dict[tuple[float, float], list[int]] = {}
        for x, y, c in pts:            # points at the same place share one label ("c128, c192")
            labels.setdefault((round(x, 6), round(y, 6)), []).append(c)
        for i, ((x, y), here) in enumerate(labels.items()):
            ax.annotate(", ".join(f"c{c}" for c in here), (x, y), textcoords="offset points",
                        xytext=(6, 6 if i % 2 == 0 else -12), fontsize=8, color=line.get_color())
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    for i, (label, x) in enumerate(tier_lines([r for rows in profiles.values() for r in rows])):
        ax.axvline(x, color="0.4", ls=(0, (4, 2 + 2 * i)), lw=1, label=label)
        xs_all.append(x)
    if max(xs_all) / min(xs_all) > 20:
        ax.set_xscale("log")
    ax.set_xlabel("interactivity: output tok/s per user (p50)")
    ax.set_ylabel("throughput: output tok/s per GPU")
    ax.set_title(f"{model} on {cluster}: throughput vs interactivity (labels: concurrency)")
    ax.grid(True, alpha=0.3)
    ax.legend(title="profile", fontsize=8)
    return _save(fig, out)


def interval_bars(rows: list[dict], found: dict, metric: str, key: str) -> list[tuple[int, float, float, float]]:
    """(row index, the offload arm's value, below, above) of each row whose change in ``metric`` has a 95% interval:
    the interval of the change B / A - 1 (rackbench.report.ab) drawn on the offload arm's value, base x (1 + low)
    to base x (1 + high) (pure)."""
    out = []
    for i, row in enumerate(rows):
        ch = (found or {}).get(row["concurrency"], {}).get(metric)
        base, off = row[f"base_{key}"], row[f"offload_{key}"]
        if ch is None or ch.low is None or ch.high is None or not base or off is None:
            continue
        out.append((i, off, max(0.0, off - base * (1 + ch.low)), max(0.0, base * (1 + ch.high) - off)))
    return out


def offload_ab(pair: Pair, rows: list[dict], out: Path, found: dict | None = None) -> Path | None:
    """Throughput per GPU (bars) and TTFT p50 (lines) of both arms at each shared concurrency; on the offload arm,
    the 95% interval of its change against the base arm (``found``: rackbench.report.ab.gains)."""
    if not rows:
        return None
    plt = _pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4.5), dpi=120)
    width, xs = 0.38, range(len(rows))
    for k, (arm, side) in enumerate(((pair.base, "base"), (pair.offload, "offload"))):
        a1.bar([x + (k - 0.5) * width for x in xs], [row[f"{side}_tps_gpu"] or 0.0 for row in rows], width, label=arm)
        a2.plot(list(xs), [row[f"{side}_ttft_p50"] or 0.0 for row in rows], marker="o", label=arm)
    for ax, metric, key, shift in ((a1, "output_tps_per_gpu", "tps_gpu", 0.5 * width),
                                   (a2, "ttft_p50_ms", "ttft_p50", 0)):
        bars = interval_bars(rows, found, metric, key)
        if bars:
            ax.errorbar([i + shift for i, *_ in bars], [y for _, y, _, _ in bars],
                        yerr=[[lo for *_, lo, _ in bars], [hi for *_, hi in bars]], fmt="none", ecolor="black",
                        capsize=4, label="offload: 95% interval of its change")
    for ax in (a1, a2):
        ax.set_xticks(list(xs), [str(row["concurrency"]) for row in rows])
        ax.set_xlabel("concurrency (live sessions)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    a1.set_ylabel("output tok/s per GPU")
    a1.set_title("throughput")
    a2.set_ylabel("TTFT p50 (ms)")
    a2.set_title("time to first token")
    fig.suptitle(f"CPU KV offload A/B: {pair.offload} vs {pair.base}")
    return _save(fig, out, left=0.08, top=0.84, wspace=0.3)


def point_series(r: PointResult, out: Path) -> Path | None:
    """One point over time: output tok/s per slice with the warm-up MSER-5 cut and where an adaptive run stopped,
    TTFT p50 of the requests completed per slice, KV-cache usage, and the prefix-cache and CPU-tier shares."""
    s = r.series
    if s is None or not s.t:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(11, 6.5), dpi=110, sharex=True)
    (a1, a2), (a3, a4) = axes
    a1.plot(s.t, s.output_tps, lw=1)
    a1.set_ylabel("output tok/s (engines)")
    if r.steady is not None:
        start = next((t for t, v in zip(s.t, s.output_tps) if v), s.t[0])
        a1.axvline(start + r.steady.truncated_s, color="tab:orange", ls="--",
                   label=f"warm-up cut (MSER-5): {r.steady.truncated_s:.0f} s")
        if r.steady.mean_output_tps is not None:
            a1.axhline(r.steady.mean_output_tps, color="tab:green", lw=0.8, label="steady mean")
    if r.run.stopped_at_s is not None:
        a1.axvline(r.run.stopped_at_s, color="tab:red", label=f"adaptive stop: {r.run.stopped_at_s:.0f} s")
    a1.legend(fontsize=7)
    a2.plot(s.t, [v if v is not None else float("nan") for v in s.ttft_p50_ms], lw=1, color="tab:purple")
    a2.set_ylabel("TTFT p50 of completed (ms)")
    a3.plot(s.t, [100 * v for v in s.kv_usage], lw=1, color="tab:brown")
    a3.set_ylabel("KV-cache usage (%)")
    for name, values in (("prefix cache", s.prefix_hit_share), ("CPU tier", s.cpu_tier_share)):
        a4.plot(s.t, [100 * v if v is not None else float("nan") for v in values], lw=1, label=name)
    a4.set_ylabel("share of prompt tokens (%)")
    a4.legend(fontsize=7)
    for ax in (a3, a4):
        ax.set_xlabel("seconds since the load generator started")
    for ax in axes.flat:
        ax.grid(True, alpha=0.3)
    fig.suptitle(f"{r.identity.case_id}: the point over time ({s.slice_s:g} s slices)")
    return _save(fig, out, left=0.08, top=0.9, hspace=0.12, wspace=0.25)


def search(answer: dict, out: Path) -> Path | None:
    """A search's probes: each one's attainment of the tier with its 95% interval, against the target, the answer
    and the first concurrency not met marked."""
    probes = sorted((p for p in answer.get("probes", []) if p.get("attainment") is not None),
                    key=lambda p: p["concurrency"])
    if not probes:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    xs = [p["concurrency"] for p in probes]
    ys = [100 * p["attainment"] for p in probes]
    lo = [max(0.0, 100 * (p["attainment"] - p["low"])) if p.get("low") is not None else 0 for p in probes]
    hi = [max(0.0, 100 * (p["high"] - p["attainment"])) if p.get("high") is not None else 0 for p in probes]
    colors = {"met": "tab:green", "missed": "tab:red", "unresolved": "tab:orange"}
    for x, y, l, h, p in zip(xs, ys, lo, hi, probes):
        ax.errorbar([x], [y], yerr=[[l], [h]], fmt="o", color=colors.get(p["verdict"], "tab:gray"), capsize=4)
        ax.annotate(p["verdict"] or "?", (x, y), textcoords="offset points", xytext=(5, -12), fontsize=7)
    ax.axhline(100 * answer["target"], color="black", ls="--", lw=1, label=f"target {answer['target']:.0%}")
    last, first = answer["bracket"]
    if last is not None:
        so_far = " so far" if answer.get("next") is not None else ""
        ax.axvline(last, color="tab:green", lw=1, label=f"answer{so_far}: c{last}")
    if answer.get("next") is not None:
        ax.axvline(answer["next"], color="tab:gray", lw=1, ls="--", label=f"not probed: c{answer['next']} was next")
    if first is not None:
        ax.axvline(first, color="tab:red", lw=1, ls=":", label=f"first not met: c{first}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.minorticks_off()
    ax.set_xlabel("concurrency (probes in the order of the search: doubling, then bisection)")
    ax.set_ylabel(f"requests meeting tier {answer['tier']} (%)")
    ax.set_title(f"{answer['profile']}: search for the highest concurrency meeting {answer['tier']} (95% intervals)",
                 fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, out, bottom=0.13, top=0.92)
