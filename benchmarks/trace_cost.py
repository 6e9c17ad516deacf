#!/usr/bin/env python3
"""What generating a trace costs with rackbench.load.traces' written-out draws against the plain ``random`` calls
they stand for, in one run, and that both give the same bytes.

    .venv/bin/python benchmarks/trace_cost.py [--sessions N] [--repeat N]

The reference draws each word with ``rng.random``, ``rng.choice`` and ``rng.randint(1, 3)``, the calls the
generator's words are defined by; rackbench's ``_words`` makes the same draws through ``getrandbits`` itself.
Printed: CPU seconds of this process (the fastest of N rounds, alternating, serial) of ``generate`` and of
``sessions`` (the walk without words) for a trace of the seed profiles' shape, and their ratios to the reference.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rackbench.load import traces  # noqa: E402


def reference_words(rng: random.Random, n: int) -> str:
    """The definition: a code word (40%) or one to three syllables."""
    return " ".join(rng.choice(traces._CODE) if rng.random() < 0.4 else
                    "".join(rng.choice(traces._SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(n))


def cpu(fn, *args) -> tuple[float, object]:
    start = time.process_time()
    got = fn(*args)
    return time.process_time() - start, got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    spec = traces.TraceSpec(sessions=args.sessions, turns=8, system_words=2000)
    ways = {"reference": (reference_words, reference_words), "rackbench": (traces._words, traces._skip_words)}
    best: dict[tuple[str, str], float] = {}
    lines: dict[str, list] = {}
    for _ in range(args.repeat):
        for name, (words, skip) in ways.items():
            t, lines[name] = cpu(traces._lines, spec, words)
            best[name, "generate"] = min(best.get((name, "generate"), t), t)
            t, _ = cpu(traces._lines, spec, skip)
            best[name, "sessions"] = min(best.get((name, "sessions"), t), t)
    if lines["rackbench"] != lines["reference"]:
        sys.exit("trace_cost: the written-out draws gave another trace than the reference's calls")
    print(f"{spec.sessions} sessions of {spec.turns} turns, {spec.system_words}-word system prompts: "
          f"{len(lines['rackbench'])} requests, the same in both (CPU, serial, fastest of {args.repeat})")
    for what in ("generate", "sessions"):
        ours, ref = best["rackbench", what], best["reference", what]
        print(f"  {what:9s} rackbench {ours:6.3f} CPU-s, reference {ref:6.3f} CPU-s: {ours / ref:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
