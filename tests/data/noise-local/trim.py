"""How this folder was made from the experiment's results folders: the result files as written, and of each point's
AIPerf records (profile_export.jsonl) only the fields the history reads. Usage: python trim.py SRC DEST."""
import json
import shutil
import sys
from pathlib import Path

KEEP_METRICS = ("output_sequence_length", "request_latency", "time_to_first_token")
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
shutil.copytree(src / "points", dst / "points")
for records in sorted(src.glob("*/*/aiperf/profile_export.jsonl")):
    out = dst / records.relative_to(src)
    out.parent.mkdir(parents=True)
    lines = []
    for line in records.read_text().splitlines():
        rec = json.loads(line)
        small = {"metadata": {k: rec["metadata"][k] for k in ("benchmark_phase", "request_end_ns")},
                 "metrics": {k: {"value": rec["metrics"][k]["value"]} for k in KEEP_METRICS if k in rec["metrics"]}}
        if "error" in rec:
            small["error"] = rec["error"]
        lines.append(json.dumps(small, separators=(",", ":")))
    out.write_text("\n".join(lines) + "\n")
