#!/usr/bin/env python3
"""Replay recorded full-length points through the adaptive stopping rule, offline (README: Run length).

    .venv/bin/python benchmarks/replay_stopping.py [RESULT.json | FOLDER ...] [--target 0.02] [--min-s 120]
                                                   [--min-requests 662] [--growth 1.5]

For each recorded point (a result of schema 4 with its series: the engines' output tokens per slice), the rule is
applied at its checkpoints to the series as it was at that time (rackbench.load.stopping.decide, the code a live
run uses), and the point's full series gives the reference: its steady mean and 95% interval (MSER-5 truncation,
batch means). Printed per point: where the rule would have stopped, that time as a share of the full duration, the
early 95% interval, and whether it covers the mean of what the same run measured after the stop (data the early
interval never saw: a coverage check, which "the early estimate inside the full run's interval" was not, the early
run being a prefix of the full one); then the median share and how many early intervals cover, with its Wilson
interval.
Default recordings: tests/data/long-cpu, tests/data/long-h200 and tests/data/h200-7b-long. Reports wall and CPU
time of the replay itself.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rackbench.core.stats import wilson  # noqa: E402
from rackbench.load import steady, stopping  # noqa: E402
from rackbench.recipe.schema.sweep import StopRule  # noqa: E402
from rackbench.results.model import parse  # noqa: E402

DEFAULT = [REPO / "tests/data/long-cpu", REPO / "tests/data/long-h200", REPO / "tests/data/h200-7b-long"]


def results(paths: list[Path]) -> list:
    files = [f for p in paths for f in ([p] if p.is_file() else sorted(p.rglob("*.json")))]
    out = []
    for f in files:
        try:
            r = parse(json.loads(f.read_text()))
        except Exception:  # noqa: BLE001 - not a result file
            continue
        if r.series is not None and r.series.t:
            out.append((f, r))
    return out


def replay(r, rule: StopRule) -> dict:
    s = r.series
    slice_s = s.slice_s
    rates = list(s.output_tps)
    done = [sum(s.requests[:i + 1]) for i in range(len(s.requests))]
    full = steady.analyse(rates, slice_s)
    duration = s.t[-1]
    stop = None
    for t in stopping.checkpoints(rule, duration):
        i = max(0, min(len(rates), int(t / slice_s)))
        d = stopping.decide(rule, rates[:i], done[i - 1] if i else 0, t)
        if d.stop:
            stop = (t, d.analysis)
            break
    low = high = None
    if full.mean is not None and full.half_width_rel is not None:
        low, high = full.mean * (1 - full.half_width_rel), full.mean * (1 + full.half_width_rel)
    row = {"case": r.identity.case_id, "duration_s": duration, "full_mean": full.mean, "low": low, "high": high,
           "full_stationary": full.stationary, "stop_s": None, "share": 1.0, "early": None, "early_low": None,
           "early_high": None, "later": None, "covers": None}
    if stop is not None:
        t, a = stop
        i = int(t / slice_s)
        later = rates[i:]             # what the run measured after the stop: data the early interval never saw
        row.update(stop_s=t, share=t / duration, early=a.mean)
        if a.mean is not None and a.half_width_rel is not None and len(later) >= 2:
            e_low, e_high = a.mean * (1 - a.half_width_rel), a.mean * (1 + a.half_width_rel)
            mean = sum(later) / len(later)
            row.update(early_low=e_low, early_high=e_high, later=mean, covers=e_low <= mean <= e_high)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--target", type=float, default=0.02)
    ap.add_argument("--min-s", type=float, default=120.0)
    ap.add_argument("--min-requests", type=int, default=662)
    ap.add_argument("--growth", type=float, default=1.5)
    args = ap.parse_args()
    wall, cpu = time.perf_counter(), time.process_time()
    found = results(args.paths or [p for p in DEFAULT if p.exists()])
    if not found:
        print("no recorded point with a series (results of schema 4) under " +
              ", ".join(str(p) for p in (args.paths or DEFAULT)))
        return 1
    print(f"# rule: target ±{args.target:.1%}, min {args.min_s:g} s and {args.min_requests} requests, checkpoints "
          f"x{args.growth:g}")
    print(f"{'point':44} {'full s':>7} {'stop s':>7} {'share':>6} {'early 95% interval':>22} {'later mean':>10} "
          "covers")
    rows = []
    for f, r in found:
        rule = StopRule(mode="adaptive", min_s=args.min_s, min_requests=args.min_requests, target=args.target,
                        growth=args.growth, slice_s=r.series.slice_s)
        row = replay(r, rule)
        rows.append(row)
        span = f"[{row['early_low']:.1f}, {row['early_high']:.1f}]" if row["early_low"] is not None else "—"
        stop = f"{row['stop_s']:.0f}" if row["stop_s"] is not None else "—"
        later = f"{row['later']:.1f}" if row["later"] is not None else "—"
        covers = "" if row["covers"] is None else ("yes" if row["covers"] else "NO")
        print(f"{row['case'][:44]:44} {row['duration_s']:7.0f} {stop:>7} {row['share']:6.0%} {span:>22} "
              f"{later:>10} {covers}")
    stopped = [row for row in rows if row["stop_s"] is not None]
    judged = [row for row in stopped if row["covers"] is not None]
    covered = [row for row in judged if row["covers"]]
    print(f"\n{len(rows)} points; stopped early: {len(stopped)}; median share of the full duration: "
          f"{statistics.median(row['share'] for row in rows):.0%} (stopped ones: "
          f"{statistics.median(row['share'] for row in stopped):.0%})" if stopped else
          f"\n{len(rows)} points; none stopped early (median share 100%)")
    if judged:
        low, high = wilson(len(covered) / len(judged), len(judged))
        print(f"early 95% intervals covering the mean of the same run after the stop (disjoint data): "
              f"{len(covered)} of {len(judged)} ({len(covered) / len(judged):.0%}; Wilson 95% [{low:.0%}, {high:.0%}])")
    print(f"replay: {time.perf_counter() - wall:.2f} s wall, {time.process_time() - cpu:.2f} CPU-s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
