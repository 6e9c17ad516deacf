#!/usr/bin/env python3
"""What prefix reuse the traces of points recorded before rackbench/tools/trace_reuse.py existed allowed, against what
their servers reused (#33 item 1 on recorded data), offline.

    .venv/bin/python benchmarks/reuse_of_recorded.py TOKENIZER_DIR FOLDER... [--recipes DIR] [--python PY]

Each point's trace is made again from its profile in DIR (default: this checkout's recipes) and its run id: the same
parameters and seed give the same bytes (rackbench.load.traces), and the profile's load fingerprint must be the one
the point recorded (else: give --recipes the recipes of the point's commit, ``git archive <commit> recipes | tar x
-C DIR``). The trace is measured by the tool under PY (an interpreter with tokenizers and jinja2; default the AIPerf
venv of scripts/install-servers) with the tokenizer and chat template in TOKENIZER_DIR, and judged as a live point's
is (rackbench.results.reuse.block: the server's block size, what its caches should hold, warm). Printed per point:
what the trace allows, what the server reused (GPU prefix cache + CPU tier), the gap, whether the caches should have
held the sessions, and whether it started warm. ``--write`` also stores each point's part as its result's ``reuse``
(atomically, every other field as recorded; its ``source`` names this script, the recipes and the tokenizer), so that
``rackbench report FOLDER`` prints the gap beside the offload pair's ratio as it does for a point run with the tool.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rackbench.catalog.loader import Catalog  # noqa: E402
from rackbench.catalog.points import Point  # noqa: E402
from rackbench.core.files import write_json  # noqa: E402
from rackbench.core.results_folder import ResultsFolder  # noqa: E402
from rackbench.load import traces  # noqa: E402
from rackbench.load.measure import trace_spec  # noqa: E402
from rackbench.results import reuse  # noqa: E402
from rackbench.results.model import parse  # noqa: E402
from rackbench.results.parts import TraceReuse  # noqa: E402
from rackbench.tools import TRACE_REUSE  # noqa: E402


def measure(point_file: Path, catalog: Catalog, tokenizer: Path, python: str, work: Path) -> dict:
    """The point's reuse part, as a live run would have written it (rackbench.results.reuse.block)."""
    r = parse(json.loads(point_file.read_text()))
    prof = next((p for p in catalog.profiles if p.id == r.identity.profile), None)
    if prof is None:
        sys.exit(f"reuse_of_recorded: {point_file}: no profile {r.identity.profile!r} in {catalog.root}")
    if r.identity.load_fingerprint and prof.load_fingerprint != r.identity.load_fingerprint:
        sys.exit(f"reuse_of_recorded: {point_file}: the profile's load in {catalog.root} is not the one recorded "
                 f"(load fingerprint {prof.load_fingerprint[:12]} against {r.identity.load_fingerprint[:12]}); give "
                 "--recipes the recipes of the point's commit: git archive <commit> recipes | tar x -C DIR")
    spec = trace_spec(Point(prof, r.identity.concurrency), r.identity.run_id)
    trace, out = work / f"{r.identity.case_id}.jsonl", work / f"{r.identity.case_id}.json"
    traces.write(spec, trace)
    subprocess.run([python, str(TRACE_REUSE), str(tokenizer), str(trace), str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    return reuse.block(json.loads(out.read_text()), r.server, r.identity.concurrency, prof,
                       int(r.requests.recorded or r.requests.completed or 0)) | {"case": r.identity.case_id}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tokenizer", type=Path)
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--recipes", type=Path, default=REPO / "recipes")
    ap.add_argument("--python", default=str(REPO / ".venvs/aiperf/bin/python"))
    ap.add_argument("--write", action="store_true", help="store each part as its point's result `reuse`")
    args = ap.parse_args()
    catalog = Catalog.load(args.recipes)
    print(f"{'point':40} {'allows':>7} {'reused':>7} {'gap':>7}  should hold  warm")
    with tempfile.TemporaryDirectory() as tmp:
        for folder in args.folders:
            for f in sorted(ResultsFolder.at(folder).points.glob("*.json")):
                b = measure(f, catalog, args.tokenizer, args.python, Path(tmp))
                if b.get("error"):
                    print(f"{b['case']:40} {b['error']}")
                    continue
                print(f"{b['case']:40} {b['allowed_share']:7.1%} {b['measured_share']:7.1%} {b['gap']:+7.1%}  "
                      f"{str(b['should_hold']):11}  {b['warm']}")
                if args.write:
                    store(f, b, args.tokenizer)
    return 0


def store(point_file: Path, part: dict, tokenizer: Path) -> None:
    """The part as the point's ``reuse``, labelled as made afterwards; the result must still parse."""
    data = json.loads(point_file.read_text())
    data["reuse"] = TraceReuse.model_validate({k: v for k, v in part.items() if k != "case"} | {"source": (
        "benchmarks/reuse_of_recorded.py, after the run: the trace made again from its profile (with the load "
        f"fingerprint it recorded) and its run id, tokenized with {tokenizer.name}; the server's "
        "prompt_tokens_by_source")}).model_dump()
    parse(data)
    write_json(point_file, data)


if __name__ == "__main__":
    sys.exit(main())
