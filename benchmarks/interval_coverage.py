#!/usr/bin/env python3
"""Do the suite's intervals cover what they say? Measured on recordings, offline (#53; docs/statistics.md).

    .venv/bin/python benchmarks/interval_coverage.py [FOLDER ...] [--windows 60,120,300] [--json OUT.json]

Each recording (a results folder's points: their requests files and counter series) is cut into disjoint windows
of each length, by send time (requests) and by slice end (series). In every window the interval the suite would
print for that window is computed by the suite's own code, and checked against the truth: the same quantity over
the whole recording.

* **Attainment** (rackbench.results.slo.tier_result, 95%): for each tier the point stores whose share over the
  whole recording is between 2% and 98%, and for tiers set at the recording's own 75th, 85th and 93rd percentiles
  of TTFT and TPOT (so every recording is judged near a boundary, where the interval matters).
* **Throughput** (rackbench.load.steady.analyse, 95%): the window's output-token series, its mean after MSER-5
  truncation with its batch-means interval, against the whole series' mean after truncation.
* **TTFT and TPOT p99 upper bounds** (rackbench.load.steady.quantile_upper, 99%): the window's bound on the
  effective size in time, against the whole recording's p99. A window whose requests are too few (in effective
  size) for a bound claims nothing and is counted apart.

Printed per interval and window length: the windows, the share covered with its own 95% Wilson interval (whose n is
windows: windows of one recording are not independent of each other, so that interval is optimistic), the mean
width. The truth is itself measured over a finite recording of which the window is a part; a trend over the
recording makes every window's truth off by it.

Exit status 1 when, at windows of 120 s and longer, attainment covers less than 93% (nominal 95%), or a p99 bound
less than 97% (nominal 99%) over at least 20 windows that claimed one. Not claimed, so not gated: the throughput
interval (it is the window's own precision; between windows of one recording the machine and the load drift by more
than it, so against the whole recording it covers far less than 95%: docs/statistics.md), and the A/B ratio, which
this benchmark does not measure.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rackbench.core.files import write_json  # noqa: E402
from rackbench.core.results_folder import ResultsFolder  # noqa: E402
from rackbench.core.stats import wilson  # noqa: E402
from rackbench.history.store import requests_of  # noqa: E402
from rackbench.load import steady  # noqa: E402
from rackbench.load.records import Request  # noqa: E402
from rackbench.recipe.schema.sweep import SloTier  # noqa: E402
from rackbench.results import slo  # noqa: E402
from rackbench.results.model import parse  # noqa: E402

DEFAULT = [REPO / "tests/data/grid-cpu", REPO / "tests/data/h200-7b-long", REPO / "tests/data/long-cpu",
           REPO / "tests/data/long-h200/long"]
GATES = {"attainment": 0.93, "ttft_p99": 0.97, "tpot_p99": 0.97}      # throughput: printed, not claimed
MIN_WINDOWS = 20         # fewer windows with a claim: too few to judge a gate by
NOMINAL = {"attainment": 0.95, "throughput": 0.95, "ttft_p99": 0.99, "tpot_p99": 0.99}
QUANTILE_TIERS = (75, 85, 93)


@dataclass
class Recording:
    name: str
    requests: list[Request]          # profiled, with send and end times, in the order sent
    tiers: list[SloTier]
    slice_s: float | None
    t: list[float]                   # the series' slice ends (s since the generator started)
    output_tps: list[float]


def recordings(folders: list[Path]) -> list[Recording]:
    import numpy as np
    out = []
    for folder in folders:
        rf = ResultsFolder.at(folder)
        for path in sorted(rf.points.glob("*.json")):
            r = parse(json.loads(path.read_text()))
            got, _ = requests_of(rf.root, r)
            sent = sorted((q for q in got if q.start_s is not None and q.end_s is not None), key=lambda q: q.start_s)
            tiers = [SloTier(**t.limits, attainment=t.target) for t in r.slo
                     if t.attainment is not None and 0.02 < t.attainment < 0.98]
            ok = [q for q in sent if q.ok and q.ttft_ms is not None]
            tpots = [x for x in map(slo.tpot_ms, ok) if x is not None]
            if len(ok) > 100 and tpots:
                tiers += [SloTier(ttft_ms=float(np.percentile([q.ttft_ms for q in ok], p)),
                                  tpot_ms=float(np.percentile(tpots, p)), attainment=0.8) for p in QUANTILE_TIERS]
            s = r.series
            out.append(Recording(r.identity.case_id, sent, tiers, s.slice_s if s else None, list(s.t) if s else [],
                                 list(s.output_tps) if s else []))
    return out


def _windows(start: float, end: float, length: float) -> list[tuple[float, float]]:
    n = int((end - start) // length)
    return [(start + i * length, start + (i + 1) * length) for i in range(n)]


def _p99(values: list[float]) -> float | None:
    import numpy as np
    return float(np.percentile(values, 99)) if values else None


def check(rec: Recording, length: float, tally: dict) -> None:
    """Add this recording's windows of ``length`` to ``tally`` (interval -> [covered, windows, width sum, none])."""
    qs = rec.requests
    if len(qs) > 100:
        t0 = qs[0].start_s
        for lo, hi in _windows(t0, qs[-1].start_s, length):
            part = [q for q in qs if lo <= q.start_s < hi]
            if len(part) < 50:
                continue
            for tier in rec.tiers:
                truth = sum(map(slo.judge(tier.limits), qs)) / len(qs)
                got = slo.tier_result("coverage", tier, part, None, 1)
                _add(tally, "attainment", got["low"] <= truth <= got["high"], got["high"] - got["low"])
            for name, value in (("ttft_p99", lambda q: q.ttft_ms if q.ok else None), ("tpot_p99", slo.tpot_ms)):
                whole = [v for v in map(value, qs) if v is not None]
                pairs = [(v, q.start_s) for q in part if (v := value(q)) is not None]
                bound = steady.quantile_upper([v for v, _ in pairs], 0.99, 0.99, [s for _, s in pairs])
                if bound is None:
                    tally.setdefault(name, [0, 0, 0.0, 0])[3] += 1
                else:
                    _add(tally, name, bound >= _p99(whole), bound / _p99(whole))
    if rec.slice_s and len(rec.t) > 20:
        whole = steady.analyse(rec.output_tps, rec.slice_s).mean
        for lo, hi in _windows(0.0, rec.t[-1], length):
            part = [v for t, v in zip(rec.t, rec.output_tps) if lo < t <= hi]
            a = steady.analyse(part, rec.slice_s)
            if whole is None or a.mean is None or a.half_width_rel is None:
                tally.setdefault("throughput", [0, 0, 0.0, 0])[3] += 1
                continue
            half = a.half_width_rel * a.mean
            _add(tally, "throughput", a.mean - half <= whole <= a.mean + half, 2 * a.half_width_rel)


def _add(tally: dict, name: str, covered: bool, width: float) -> None:
    row = tally.setdefault(name, [0, 0, 0.0, 0])
    row[0] += bool(covered)
    row[1] += 1
    row[2] += width


WIDTH = {"attainment": "mean width (share)", "throughput": "mean width (of the mean)",
         "ttft_p99": "mean bound / true p99", "tpot_p99": "mean bound / true p99"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="*", type=Path, default=DEFAULT)
    ap.add_argument("--windows", default="60,120,300", help="window lengths, seconds, comma-separated")
    ap.add_argument("--json", type=Path, help="also write the table as JSON here")
    args = ap.parse_args()
    wall, cpu = time.monotonic(), time.process_time()
    recs = recordings(args.folders)
    print(f"{len(recs)} recordings: {', '.join(r.name for r in recs)}")
    rows, failed = [], []
    for length in [float(w) for w in args.windows.split(",")]:
        tally: dict = {}
        for rec in recs:
            check(rec, length, tally)
        for name, (hit, n, width, none) in sorted(tally.items()):
            share = hit / n if n else None
            low, high = wilson(share, n) if n else (None, None)
            rows.append({"interval": name, "window_s": length, "nominal": NOMINAL[name], "windows": n,
                         "covered": share, "low": low, "high": high, "width": width / n if n else None,
                         "no_claim": none})
            gate = length >= 120 and name in GATES and n >= MIN_WINDOWS and share < GATES[name]
            if gate:
                failed.append(f"{name} at {length:.0f} s: {share:.1%} < {GATES[name]:.0%}")
            print(f"{name:>10} {length:5.0f} s: {n:4d} windows, covered {share:.1%} [{low:.1%}, {high:.1%}] at nominal "
                  f"{NOMINAL[name]:.0%}; {WIDTH[name]} {width / n:.3f}" + (f"; {none} claimed nothing" if none else "")
                  + ("  << below the gate" if gate else "" if name in GATES and n >= MIN_WINDOWS or length < 120
                     else "  (not gated: too few windows)" if name in GATES else "  (not claimed)")
                  if n else f"{name:>10} {length:5.0f} s: no window claimed one ({none} too few)" if none
                  else f"{name:>10} {length:5.0f} s: no window")
    print("A/B ratio: not measured by this benchmark; nothing is claimed for its coverage")
    print(f"wall {time.monotonic() - wall:.1f} s, CPU {time.process_time() - cpu:.1f} s")
    if args.json:
        write_json(args.json, {"recordings": [r.name for r in recs], "rows": rows, "gates": GATES,
                               "min_windows": MIN_WINDOWS})
    if failed:
        print("below the gate: " + "; ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
