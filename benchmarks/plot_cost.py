#!/usr/bin/env python3
"""What a report's plots cost at the PNG compression rackbench uses against zlib's default, in one run.

    .venv/bin/python benchmarks/plot_cost.py [FOLDER] [--repeat N]

FOLDER (default: tests/data/h200-7b, the recorded 7B pair) is a results folder; every plot ``rackbench report``
draws for it (rackbench.report.files.write: the Pareto plots, each offload pair's, each point's time series) is
drawn at rackbench.report.plots.PNG_COMPRESS_LEVEL and at level 6 (PIL's default) in turn, N rounds each (default
3). Printed: CPU seconds of this process per round (the fastest of N), bytes written, and the ratios of the two.
Rounds alternate so that a machine whose speed drifts affects both alike; CPU time is process time, serial.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rackbench.report import files, plots  # noqa: E402

REFERENCE_LEVEL = 6          # PIL's default zlib level, what matplotlib's savefig uses unless told


def one_round(folder: Path, level: int, out: Path) -> tuple[float, int]:
    """(CPU seconds, bytes of PNG) of writing ``folder``'s report with every plot at zlib ``level``."""
    plots.PNG_COMPRESS_LEVEL = level
    shutil.rmtree(out, ignore_errors=True)
    drawn = 0.0
    save = plots._save

    def timed_save(fig, path, **margins):
        nonlocal drawn
        start = time.process_time()
        try:
            return save(fig, path, **margins)
        finally:
            drawn += time.process_time() - start

    plots._save = timed_save
    try:
        files.write(folder, out)
    finally:
        plots._save = save
    return drawn, sum(p.stat().st_size for p in out.glob("*.png"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default=str(REPO / "tests/data/h200-7b"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    folder, ours = Path(args.folder), plots.PNG_COMPRESS_LEVEL
    with tempfile.TemporaryDirectory() as tmp:
        one_round(folder, ours, Path(tmp) / "warm")            # imports, fonts and caches, in neither figure
        runs: dict[int, list[tuple[float, int]]] = {ours: [], REFERENCE_LEVEL: []}
        for _ in range(args.repeat):
            for level in runs:
                runs[level].append(one_round(folder, level, Path(tmp) / f"level{level}"))
    (cpu, size), (ref_cpu, ref_size) = (min(runs[level]) for level in (ours, REFERENCE_LEVEL))
    n = len(list((Path(folder) / "points").glob("*.json")))
    print(f"{folder}: {n} points; saving every plot of its report (the fastest of {args.repeat} rounds, CPU, serial)")
    print(f"  zlib level {ours} (rackbench):  {cpu:6.2f} CPU-s  {size / 1e6:6.2f} MB")
    print(f"  zlib level {REFERENCE_LEVEL} (reference):   {ref_cpu:6.2f} CPU-s  {ref_size / 1e6:6.2f} MB")
    print(f"  ratio: {cpu / ref_cpu:.2f}x the CPU, {size / ref_size:.2f}x the bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
