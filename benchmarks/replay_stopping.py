#!/usr/bin/env python3
"""Replay recorded full-length points through the adaptive stopping rule, offline (README: Run length).

    .venv/bin/python benchmarks/replay_stopping.py [RESULT.json | FOLDER ...] [--target 0.02] [--min-s 120]
                                                   [--min-requests 662] [--growth 1.5]

For each recorded point (a result of schema 4 with its series: the engines' output tokens per slice), the rule is
applied at its checkpoints to the series as it was at that time (servebench.load.stopping.decide, the code a live
run uses), and the point's full series gives the reference: its steady mean and 95% interval (MSER-5 truncation,
batch means). Printed per point: where the rule would have stopped, that time as a share of the full duration, the
early estimate against the full run's interval; then the median share and how many early estimates lie inside.
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

from servebench.load import steady, stopping  # noqa: E402
from servebench.recipe.schema.sweep import StopRule  # noqa: E402
from servebench.results.model import parse  # noqa: E402

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
           "full_stationary": full.stationary, "stop_s": None, "share": 1.0, "early": None, "inside": None}
    if stop is not None:
        t, a = stop
        row.update(stop_s=t, share=t / duration, early=a.mean,
                   inside=low is not None and a.mean is not None and low <= a.mean <= high)
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
    print(f"{'point':44} {'full s':>7} {'stop s':>7} {'share':>6} {'early':>9} {'full 95% interval':>22} inside")
    rows = []
    for f, r in found:
        rule = StopRule(mode="adaptive", min_s=args.min_s, min_requests=args.min_requests, target=args.target,
                        growth=args.growth, slice_s=r.series.slice_s)
        row = replay(r, rule)
        rows.append(row)
        span = f"[{row['low']:.1f}, {row['high']:.1f}]" if row["low"] is not None else "—"
        stop = f"{row['stop_s']:.0f}" if row["stop_s"] is not None else "—"
        early = f"{row['early']:.1f}" if row["early"] is not None else "—"
        inside = "" if row["inside"] is None else ("yes" if row["inside"] else "NO")
        print(f"{row['case'][:44]:44} {row['duration_s']:7.0f} {stop:>7} {row['share']:6.0%} {early:>9} "
              f"{span:>22} {inside}")
    stopped = [row for row in rows if row["stop_s"] is not None]
    inside = [row for row in stopped if row["inside"]]
    print(f"\n{len(rows)} points; stopped early: {len(stopped)}; median share of the full duration: "
          f"{statistics.median(row['share'] for row in rows):.0%} (stopped ones: "
          f"{statistics.median(row['share'] for row in stopped):.0%})" if stopped else
          f"\n{len(rows)} points; none stopped early (median share 100%)")
    if stopped:
        print(f"early estimates inside the full run's 95% interval: {len(inside)} of {len(stopped)} "
              f"({len(inside) / len(stopped):.0%})")
    print(f"replay: {time.perf_counter() - wall:.2f} s wall, {time.process_time() - cpu:.2f} CPU-s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
