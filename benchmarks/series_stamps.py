#!/usr/bin/env python3
"""How precisely a point's output rate is known from one recorded CPU point's counter scrapes, read two ways.

    .venv/bin/python benchmarks/series_stamps.py [SCRAPES.jsonl] [--slice 0.5]

The reference is how rackbench read the scrapes before 57217ea: each stamped when its request went out, a rate per
pair of consecutive scrapes. rackbench now stamps each when its answer came and reads the cumulative counter on a
regular grid of ``--slice`` (rackbench.load.series.token_rates). Both go through the same steady-state analysis
(rackbench.load.steady: MSER-5, batch means, Heidelberger-Welch) at 60, 90 and 120 s of the run; printed per
time: the 95% interval's half-width relative to the mean, the stationarity p-value and the batches, each way, and
their ratio. Default: tests/data/scrapes-cpu/vllm-c4.jsonl (its README says how it was recorded). Reports the CPU
time of the analysis itself.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rackbench.load import steady  # noqa: E402
from rackbench.load.series import Sample, token_rates  # noqa: E402
from rackbench.server.counters import Snapshot  # noqa: E402

DEFAULT = REPO / "tests/data/scrapes-cpu/vllm-c4.jsonl"


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def per_scrape_at_request(rows: list[dict]) -> tuple[list[float], float]:
    """The reference: stamped at the request, a rate per pair of scrapes; and the mean slice they cover."""
    pairs = [(a, b) for a, b in zip(rows, rows[1:]) if b["sent"] > a["sent"]]
    rates = [(b["generation_tokens"] - a["generation_tokens"]) / (b["sent"] - a["sent"]) for a, b in pairs]
    return rates, (rows[-1]["sent"] - rows[0]["sent"]) / max(1, len(rates))


def on_the_grid(rows: list[dict], slice_s: float) -> list[float]:
    return token_rates([Sample(r["answered"], Snapshot(generation_tokens=r["generation_tokens"])) for r in rows],
                       slice_s)


def intervals(rows: list[dict], slice_s: float, at: tuple[float, ...] = (60, 90, 120)) -> list[tuple]:
    """(seconds, reference analysis, rackbench's analysis) for the scrapes up to each time."""
    out = []
    for end in at:
        upto = [r for r in rows if r["answered"] <= end]
        ref_rates, ref_slice = per_scrape_at_request(upto)
        out.append((end, steady.analyse(ref_rates, ref_slice), steady.analyse(on_the_grid(upto, slice_s), slice_s)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scrapes", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--slice", type=float, default=0.5)
    args = parser.parse_args()
    rows = read(args.scrapes)
    late = sorted(r["answered"] - r["sent"] for r in rows)
    t0 = time.process_time()
    found = intervals(rows, args.slice)
    cpu = time.process_time() - t0
    print(f"{args.scrapes.name}: {len(rows)} scrapes, answered {late[len(late) // 2]:.2f} s after the request at the "
          f"median, {late[-1]:.2f} s at most")
    for end, ref, ours in found:
        if ref.half_width_rel is None or ours.half_width_rel is None:
            print(f"  {end:4.0f} s: too few batches to judge")
            continue
        print(f"  {end:4.0f} s: at the request, per scrape ±{ref.half_width_rel:.1%} (p={ref.p_value:.2f}, "
              f"{ref.batches} batches); at the answer, on the grid ±{ours.half_width_rel:.1%} (p={ours.p_value:.2f}, "
              f"{ours.batches} batches): {ours.half_width_rel / ref.half_width_rel:.2f}x")
    print(f"analysis: {cpu:.3f} CPU-s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
