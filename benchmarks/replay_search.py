#!/usr/bin/env python3
"""Replay a recorded grid of fixed points through the SLO search with decision-stopped probes, offline (#32;
docs/load.md: Searching, docs/measurements.md: Search replays).

    .venv/bin/python benchmarks/replay_search.py [FOLDER...] [--tier search] [--replays 200] [--cap-s 300]
                                                 [--min-s 120] [--growth 1.5] [--tolerance 0.25] [--seed 0]

A grid is the points of one server at several concurrencies, each a fixed-length recording with its requests
(``requests.csv``; ``scripts/record-grid`` writes one on the embedded default): every FOLDER is a results folder,
and their points together must hold one point per concurrency, each carrying the tier (its stored ``slo`` gives the
limits and the target).

**The reference** is the full grid: each point judged on all its profiled requests (rackbench.results.slo,
Wilson on an effective sample size), the answer the highest concurrency met below the first one not met (the
bracket of rackbench.results.search.Search over every point).

**A replay** runs that search (doubling from the lowest concurrency, then bisection) over the grid's concurrencies:
a bisection's midpoint is taken to the grid concurrency nearest it strictly inside the bracket, and with none left
the search is resolved at the grid's resolution. Each probe replays its point's recorded requests from a random
offset (uniform in [0, duration - cap]) through the live rule of ``--run-length decide``
(rackbench.load.stopping.DecideController: at checkpoints min_s x growth^k, at least 100 requests, each look at
its Bonferroni confidence, rackbench.results.slo.judged_at_look): it ends at the first look that resolves its tier,
else at the cap, judged then on all it saw at the same confidence (the cap is the last planned look). A request counts at a look once it has ended, as the live reader sees
it. A live probe starts on an idle server while a replayed one starts mid-recording: the replay ignores that
warm-up, and says so.

Printed: the full grid's verdicts and answer; over the replays, how often the search's answer is the full grid's,
how often its bracket holds it, and the GPU-time its probes took against the full grid's (profiling seconds x GPUs
on both sides; server starts and warm-ups left out of both: each is one allocation). CPU and wall time of the
replay itself.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rackbench.core.results_folder import ResultsFolder  # noqa: E402
from rackbench.history.store import requests_of  # noqa: E402
from rackbench.load.records import Request  # noqa: E402
from rackbench.load.stopping import DecideController  # noqa: E402
from rackbench.recipe.schema.sweep import SloTier, StopRule  # noqa: E402
from rackbench.results import slo  # noqa: E402
from rackbench.results.model import parse  # noqa: E402
from rackbench.results.search import Probe, Search  # noqa: E402

DEFAULT = REPO / "tests/data/grid-cpu"


@dataclass(frozen=True)
class GridPoint:
    concurrency: int
    case_id: str
    requests: tuple[Request, ...]     # profiled, in the order they were sent
    t0: float                         # the first profiled request's start (epoch s)
    duration_s: float                 # the recorded profiling window
    gpus: int
    tier: SloTier
    startup_s: float = 0.0            # the point's start to its first profiled request (whole seconds: started_at's)


def grid(folders: list[Path], tier: str, define: SloTier | None = None, profile: str | None = None) -> list[GridPoint]:
    """The grid's points by concurrency (of ``profile`` alone, when named), judged by their stored ``tier`` or by
    ``define``; SystemExit naming the file for a point without the tier or requests, or two points at one
    concurrency (two grids mixed)."""
    out: dict[int, GridPoint] = {}
    for folder in folders:
        rf = ResultsFolder.at(folder)
        for path in sorted(rf.points.glob("*.json")):
            r = parse(json.loads(path.read_text()))
            if profile is not None and r.identity.profile != profile:
                continue
            t = next((x for x in r.slo if x.tier == tier), None)
            if t is None and define is None:
                sys.exit(f"replay_search: {path}: no tier {tier!r} in its slo; name another with --tier, or judge "
                         "it by limits of your own: --define ttft_ms=1000,tpot_ms=50,attainment=0.8")
            requests, why = requests_of(rf.root, r)
            if not requests:
                sys.exit(f"replay_search: {path}: no requests to replay ({why})")
            sent = tuple(sorted((q for q in requests if q.start_s is not None and q.end_s is not None),
                                key=lambda q: q.start_s))
            c = r.identity.concurrency
            if c in out:
                sys.exit(f"replay_search: {path}: a second point at c{c} (the first: {out[c].case_id}); give the "
                         "folders of one grid")
            t0 = sent[0].start_s
            started = datetime.fromisoformat(str(r.identity.started_at)).timestamp()
            out[c] = GridPoint(c, r.identity.case_id, sent, t0, max(q.end_s for q in sent) - t0, r.throughput.gpus,
                               define or SloTier(**t.limits, attainment=t.target), max(0.0, t0 - started))
    if len(out) < 2:
        sys.exit(f"replay_search: {len(out)} point(s) with tier {tier!r} under {', '.join(map(str, folders))}: a grid "
                 "needs two concurrencies or more")
    return [out[c] for c in sorted(out)]


def full_verdicts(points: list[GridPoint], tier: str) -> list[Probe]:
    return [Probe(p.concurrency, (j := slo.judged_at_look(tier, p.tier, list(p.requests), 1, p.gpus)).verdict,
                  j.attainment, j.low, j.high, p.case_id) for p in points]


def bracket(probes: list[Probe], lo: int, hi: int) -> tuple[int | None, int | None]:
    s = Search(lo, hi, 0.0, len(probes) or 1)
    for p in probes:
        s.add(p)
    return s.bracket


def probe(p: GridPoint, tier: str, rule: StopRule, cap_s: float, offset_s: float) -> tuple[Probe, float]:
    """The probe at ``p`` replayed from ``offset_s`` into its recording: (its verdict, the seconds it ran)."""
    start = p.t0 + offset_s
    window = [q for q in p.requests if q.start_s >= start]
    now = {"t": 0.0}

    def read() -> list[Request]:
        return [q for q in window if q.end_s <= start + now["t"]]

    ctl = DecideController(rule, cap_s, read, slo.decider(tier, p.tier, p.gpus))
    for t in list(ctl.pending):
        now["t"] = t
        if ctl.poll(t) is not None:
            j = slo.judged_at_look(tier, p.tier, read(), ctl.planned, p.gpus)
            return Probe(p.concurrency, j.verdict, j.attainment, j.low, j.high, p.case_id), t
    now["t"] = cap_s
    j = slo.judged_at_look(tier, p.tier, read(), ctl.planned, p.gpus)      # the cap: the last planned look
    return Probe(p.concurrency, j.verdict, j.attainment, j.low, j.high, p.case_id), cap_s


def search(points: list[GridPoint], tier: str, rule: StopRule, cap_s: float, tolerance: float, rng: random.Random,
           max_probes: int = 12, at_start: bool = False, startup_s=None) -> tuple[tuple[int | None, int | None], float, int]:
    """One replayed search: (its bracket, the GPU-seconds its probes took, how many probes ran). Each probe starts at a
    random offset into its recording, or with ``at_start`` at its beginning (what a live probe sees after the same
    warm-up); ``startup_s(point)``, when given, adds each probe's seconds before profiling to what it took."""
    by_c = {p.concurrency: p for p in points}
    grid_c = sorted(by_c)
    s = Search(grid_c[0], grid_c[-1], tolerance, max_probes)
    spent = 0.0
    while (c := s.next()) is not None:
        last_pass, first_fail = s.bracket
        if first_fail is None:                                   # ramping: the first grid point at or above c
            c = next(g for g in grid_c if g >= c)
        else:                                                    # bisecting: the nearest one inside the bracket
            inside = [g for g in grid_c if last_pass < g < first_fail]
            if not inside:
                break
            c = min(inside, key=lambda g: (abs(g - c), g))
        if any(x.concurrency == c for x in s.probes):
            break
        p = by_c[c]
        got, ran = probe(p, tier, rule, cap_s, 0.0 if at_start else rng.uniform(0.0, max(0.0, p.duration_s - cap_s)))
        s.add(got)
        spent += (ran + (startup_s(p) if startup_s else 0.0)) * p.gpus
    return s.bracket, spent, len(s.probes)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="*", type=Path, default=[DEFAULT],
                    help="results folders of one grid (default: tests/data/grid-cpu, scripts/record-grid's)")
    ap.add_argument("--tier", default="search")
    ap.add_argument("--define", help="judge by these limits instead of the stored tier: ttft_ms=..,tpot_ms=..,"
                    "e2e_ms=..,attainment=.. (for recordings made without one, e.g. the H200 points)")
    ap.add_argument("--profile", help="only this profile's points (a folder holding several arms)")
    ap.add_argument("--replays", type=int, default=200)
    ap.add_argument("--cap-s", type=float, default=300.0, help="a probe's longest run (its profile's duration_s)")
    ap.add_argument("--min-s", type=float, default=StopRule.model_fields["min_s"].default,
                    help="the first look (the profile's load.stop.min_s; default: its default)")
    ap.add_argument("--growth", type=float, default=1.5)
    ap.add_argument("--tolerance", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    define = None
    if args.define:
        try:
            define = SloTier(**{k: float(v) for k, v in (kv.split("=", 1) for kv in args.define.split(","))})
        except ValueError as err:
            sys.exit(f"replay_search: --define {args.define}: {str(err).splitlines()[0]}; write it as "
                     "ttft_ms=1000,tpot_ms=50,attainment=0.8")
    points = grid(args.folders, args.tier, define, args.profile)
    if args.cap_s > min(p.duration_s for p in points):
        sys.exit(f"replay_search: --cap-s {args.cap_s:g} is longer than the shortest recording "
                 f"({min(p.duration_s for p in points):.0f} s): a probe must fit in its point's recording")
    if args.min_s >= args.cap_s:
        sys.exit(f"replay_search: --min-s {args.min_s:g} is not before --cap-s {args.cap_s:g}: no probe would look "
                 "before its cap; give a first look below it (e.g. --min-s 20 for 60 s probes)")
    rule = StopRule(mode="decide", min_s=args.min_s, growth=args.growth, min_requests=0)
    full = full_verdicts(points, args.tier)
    answer = bracket(full, points[0].concurrency, points[-1].concurrency)[0]
    grid_gpu_s = sum(p.duration_s * p.gpus for p in points)
    print(f"grid: {len(points)} points, tier {args.tier} ({slo.limits_text(points[0].tier.limits)}, target "
          f"{points[0].tier.attainment:.0%})")
    for p, f in zip(points, full):
        print(f"  c{p.concurrency:<4} {len(p.requests):6,} requests over {p.duration_s:5.0f} s: {f.verdict:10} "
              f"{f.attainment:.1%} [{f.low:.1%}, {f.high:.1%}]")
    print(f"full grid's answer: c{answer}" if answer is not None else "full grid's answer: none (the lowest misses)")
    rng = random.Random(args.seed)
    same = holds = 0
    ratios, counts = [], []
    for _ in range(args.replays):
        (last_pass, first_fail), spent, n = search(points, args.tier, rule, args.cap_s, args.tolerance, rng)
        same += last_pass == answer
        holds += (last_pass is None or answer is not None and last_pass <= answer) and (
            first_fail is None or answer is None or answer < first_fail)
        ratios.append(spent / grid_gpu_s)
        counts.append(n)
    print(f"{args.replays} replays (probes capped at {args.cap_s:g} s, first look at {args.min_s:g} s, "
          f"x{args.growth:g}): the same answer in {same / args.replays:.1%}, the bracket holds it in "
          f"{holds / args.replays:.1%}; "
          f"GPU-time {statistics.median(ratios):.1%} of the full grid's (median; max {max(ratios):.1%}), "
          f"{statistics.median(counts):g} probes (median)")
    print(f"target: the same answer in >= 95% of replays at <= 25% of the grid's GPU-time: "
          f"{'met' if same / args.replays >= 0.95 and statistics.median(ratios) <= 0.25 else 'not met'}")
    print(f"replay: {time.process_time() - cpu0:.1f} CPU-s, {time.perf_counter() - wall0:.1f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
