"""What a grid or a search will cost in GPU-hours before any node is held (the queue
left out), from the recipe alone: the model load the cluster file declares, each point's or probe's run (its
duration, or from its first look where its rule may stop it early, plus a warm-up of up to its grace) and, for a
search, how many probes its rule takes wherever the boundary lies (rackbench.results.search.probe_counts); with the
bound if every timeout of the suite is reached (rackbench.catalog.budget)."""

from __future__ import annotations

import statistics



def estimate(p) -> dict:
    """A profile's GPU-hours: expected (low, median, high) and at most. A point or probe runs its duration, or from its
    first look where a rule may stop it early, after a warm-up of up to its grace; a search takes as many probes as
    its rule needs wherever the boundary lies."""
    from rackbench.catalog.budget import budget
    from rackbench.results.search import probe_counts
    b, gpus, load = budget(p), p.topology.gpus, p.spec.load
    if p.spec.search is not None:
        spec = p.spec.search
        counts = probe_counts(min(p.spec.concurrency), max(p.spec.concurrency), spec.tolerance, spec.max_probes)
        points = (min(counts), int(statistics.median(counts)), max(counts))
    else:
        points = (len(p.spec.concurrency),) * 3
    early = load.stop.mode != "fixed" and load.stop.min_s < load.duration_s
    shortest = load.stop.min_s if early else float(load.duration_s)
    longest = float(load.duration_s + load.warmup_grace_s)
    each = (shortest, (shortest + longest) / 2, longest)
    hours = [gpus * ((b.load_s or 0.0) + n * t) / 3600 for n, t in zip(points, each)]
    return {"profile": p.id, "kind": "search" if p.spec.search is not None else "grid", "gpus": gpus,
            "points": points, "each_s": each, "gpu_hours": hours,
            "gpu_hours_at_most": gpus * b.bound_s(points[2]) / 3600, "load_s": b.load_s}


def lines(e: dict) -> list[str]:
    lo, mid, hi = e["points"]
    h_lo, h_mid, h_hi = e["gpu_hours"]
    what = (f"search, {lo}-{hi} probes wherever its boundary lies (median {mid})" if e["kind"] == "search"
            else f"grid of {lo} point(s)")
    span = f"{h_lo:.2f}" if h_lo == h_hi else f"{h_lo:.2f}-{h_hi:.2f} (median {h_mid:.2f})"
    load = (f"model load ~{e['load_s'] / 60:.0f} min" if e["load_s"] is not None else
            "model load not counted: the cluster file declares neither runtime.model_load_gib_per_s nor "
            "runtime.startup_s")
    short, _, long_ = e["each_s"]
    each = f"{short / 60:.1f}" if short == long_ else f"{short / 60:.1f}-{long_ / 60:.1f}"
    return [f"{e['profile']}: {what}, {e['gpus']} GPU(s)",
            f"  GPU-hours {span}: {load}; each point or probe {each} min (its run, and a warm-up up to its grace)",
            f"  at most {e['gpu_hours_at_most']:.2f} if every timeout is reached; the queue is not counted"]


def ranking_estimate(estimates: list[dict]) -> dict:
    """A ranking's GPU-hours: its arms' searches one after another (each in its own allocation), summed."""
    sums = [sum(e["gpu_hours"][i] for e in estimates) for i in range(3)]
    return {"gpu_hours": sums, "gpu_hours_at_most": sum(e["gpu_hours_at_most"] for e in estimates),
            "arms": [e["profile"] for e in estimates]}


def ranking_lines(name: str, estimates: list[dict]) -> list[str]:
    """A ranking's plan: each arm's, then their sum."""
    total = ranking_estimate(estimates)
    lo, mid, hi = total["gpu_hours"]
    out = [f"ranking {name}: {len(estimates)} searches, one allocation each, one after another"]
    for e in estimates:
        out += ["  " + line for line in lines(e)]
    return out + [f"  all arms: GPU-hours {lo:.2f}-{hi:.2f} (median {mid:.2f}); at most "
                  f"{total['gpu_hours_at_most']:.2f} if every timeout is reached; the queue is not counted"]
