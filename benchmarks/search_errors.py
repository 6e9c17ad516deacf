#!/usr/bin/env python3
"""The search's error rates out of sample (#53; docs/statistics.md#the-search-out-of-sample): how often its answer is
too high or too low outside an indifference zone, on recordings made after its rule was frozen.

    .venv/bin/python benchmarks/search_errors.py [FOLDER] [--zone 0.05] [--cap-s 30]

FOLDER (default tests/data/search-oos-cpu) holds independent recordings of one grid: ``r-repN/`` per recording N,
each a results folder with one point per concurrency (``scripts/record-grid OUT rep1 rep2 ...``). Its README says
what was frozen before they were made; this script scores exactly that and nothing tuned on them:

- **A probe** at concurrency c of recording N is the first ``--cap-s`` seconds of that point, replayed through the
  live rule (benchmarks/replay_search.py's ``probe``: rackbench.load.stopping.DecideController and
  rackbench.results.slo.judged_at_look, a request counted at a look once it has ended). Rule ``shipped``: one look,
  at the cap (the embedded default's ``vllm_search``); rule ``decide``: looks from 10 s growing x1.5, the error
  budget shared over every look and the cap (Bonferroni).
- **The truth** at c is the attainment of the requests recording N sent after the probe's window: data the probe
  never saw.
- **Wrong answers**, with an indifference zone of ``--zone`` around the target: *too high* when a concurrency at or
  below the answer is clearly not met (truth <= target - zone); *too low* when the next concurrency above the answer
  is clearly met (truth >= target + zone) and every one below it is met; an answer of none is too low when the
  lowest concurrency is clearly met.
- Each rate is printed with its Wilson 95% interval (rackbench.core.stats.wilson) whose n is the independent
  recordings, per tier and rule; GPU-time per search counts each probe's start-up before profiling (its point's
  start to its first profiled request), against the recordings' own (start-up and profiling of every point).

The pooled line adds the tiers' searches together: they share recordings, so its interval is narrower than the
evidence; it is printed as such. CPU and wall time of the scoring itself are printed last.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from replay_search import GridPoint, grid, search  # noqa: E402

from rackbench.core.stats import wilson  # noqa: E402
from rackbench.recipe.schema.sweep import SloTier, StopRule  # noqa: E402
from rackbench.results import slo  # noqa: E402

DEFAULT = REPO / "tests/data/search-oos-cpu"
# Frozen before the recordings (tests/data/search-oos-cpu/README.md): the tiers and the two probe rules.
TIERS = {"search": SloTier(ttft_ms=1000, tpot_ms=50, attainment=0.8),
         "t70": SloTier(ttft_ms=1000, tpot_ms=50, attainment=0.7),
         "t90": SloTier(ttft_ms=1000, tpot_ms=50, attainment=0.9),
         "relaxed": SloTier(ttft_ms=2000, tpot_ms=100, attainment=0.8)}
RULES = {"shipped": lambda cap: StopRule(mode="decide", min_s=cap, growth=1.5, min_requests=0),
         "decide": lambda cap: StopRule(mode="decide", min_s=10.0, growth=1.5, min_requests=0)}
TOLERANCE, MAX_PROBES = 0.25, 8                      # recipes/local/vllm_search.yaml's search


@dataclass(frozen=True)
class Scored:
    recording: str
    answer: int | None
    truth: dict[int, float]
    too_high: bool
    too_low: bool
    gpu_s: float
    grid_gpu_s: float


def truth(p: GridPoint, name: str, tier: SloTier, cap_s: float) -> float:
    """The attainment of what the recording sent after the probe's window."""
    later = [q for q in p.requests if q.start_s >= p.t0 + cap_s]
    return slo.judged_at_look(name, tier, later, 1, p.gpus).attainment


def wrong(answer: int | None, truths: dict[int, float], target: float, zone: float) -> tuple[bool, bool]:
    """(too high, too low) of ``answer`` against the truth at each concurrency, outside the zone."""
    grid_c = sorted(truths)
    high = answer is not None and any(truths[c] <= target - zone for c in grid_c if c <= answer)
    above = [c for c in grid_c if answer is None or c > answer]
    low = bool(above) and truths[above[0]] >= target + zone and all(truths[c] >= target for c in grid_c
                                                                   if c < above[0])
    return high, low


@functools.lru_cache(maxsize=None)
def recorded(rec: Path) -> tuple[GridPoint, ...]:
    """One recording's points with their requests, read once however many tiers and rules score them."""
    return tuple(grid([rec], "search", TIERS["search"]))


def score(folder: Path, name: str, tier: SloTier, rule: StopRule, cap_s: float, zone: float) -> list[Scored]:
    out = []
    for rec in sorted(folder.glob("r-rep*")):
        points = [dataclasses.replace(p, tier=tier) for p in recorded(rec)]
        (answer, _), gpu_s, _ = search(points, name, rule, cap_s, TOLERANCE, random.Random(0), MAX_PROBES,
                                       at_start=True, startup_s=lambda p: p.startup_s)
        truths = {p.concurrency: truth(p, name, tier, cap_s) for p in points}
        high, low = wrong(answer, truths, tier.attainment, zone)
        out.append(Scored(rec.name, answer, truths, high, low, gpu_s,
                          sum((p.duration_s + p.startup_s) * p.gpus for p in points)))
    return out


def rate(k: int, n: int) -> str:
    lo, hi = wilson(k / n, n) if n else (0.0, 1.0)
    return f"{k}/{n} [{lo:.0%}, {hi:.0%}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--zone", type=float, default=0.05, help="the indifference zone either side of the target")
    ap.add_argument("--cap-s", type=float, default=30.0, help="a probe's longest run (vllm_search's duration_s)")
    args = ap.parse_args()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    if not list(args.folder.glob("r-rep*")):
        sys.exit(f"search_errors: {args.folder}: no r-repN folders; record them with scripts/record-grid OUT rep1 "
                 "rep2 rep3")
    pooled = {r: [0, 0, 0] for r in RULES}
    for name, tier in TIERS.items():
        print(f"tier {name} ({slo.limits_text(tier.limits)}, target {tier.attainment:.0%}; zone ±{args.zone:.0%})")
        for rule_name, make in RULES.items():
            got = score(args.folder, name, tier, make(args.cap_s), args.cap_s, args.zone)
            n, high, low = len(got), sum(s.too_high for s in got), sum(s.too_low for s in got)
            shares = [s.gpu_s / s.grid_gpu_s for s in got]
            pooled[rule_name] = [pooled[rule_name][0] + n, pooled[rule_name][1] + high, pooled[rule_name][2] + low]
            print(f"  {rule_name:8} too high {rate(high, n)}, too low {rate(low, n)}; GPU-time "
                  f"{statistics.median(shares):.0%} of the recordings' (median; {min(shares):.0%}-{max(shares):.0%})")
            for s in got:
                truths = ", ".join(f"c{c} {a:.0%}" for c, a in sorted(s.truth.items()))
                flag = "too high" if s.too_high else "too low" if s.too_low else "ok"
                print(f"    {s.recording}: answer {'c%d' % s.answer if s.answer else 'none':5} {flag:8} truth {truths}")
    for rule_name, (n, high, low) in pooled.items():
        print(f"pooled over the tiers ({rule_name}; they share recordings, so the interval is narrower than the "
              f"evidence): too high {rate(high, n)}, too low {rate(low, n)}")
    print(f"scoring: {time.process_time() - cpu0:.1f} CPU-s, {time.perf_counter() - wall0:.1f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
