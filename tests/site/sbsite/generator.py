"""``sitechat``: sbsite/chatload.py as a rackbench load generator, with its own record reader."""

import json
import os
import statistics
import sys
from pathlib import Path

from rackbench.load.generator import Invocation, LoadGenerator, LoadJob
from rackbench.load.records import LoadRecords, Request

SCRIPT = Path(__file__).with_name("chatload.py")


class ChatLoad(LoadGenerator):
    name = "sitechat"

    def unavailable(self):
        return None

    def command(self, job: LoadJob) -> list[str]:
        p = job.point
        return [self.executable or sys.executable, str(SCRIPT), "--url", job.api_url, "--model", job.model_name,
                "--trace", str(job.trace), "--out", str(job.case.load_dir(self.name)),
                "--concurrency", str(p.concurrency), "--duration", str(p.profile.spec.load.duration_s),
                *(["--stamp"] if os.environ.get("SBSITE_STAMP_AT") == str(p.concurrency) else [])]   # a fault

    def invocation(self, job: LoadJob) -> Invocation:
        return Invocation(self.command(job), {}, job.case.load_dir(self.name), job.case.load_log(self.name),
                          job.case.load_command(self.name))

    def records(self, out_dir: Path) -> LoadRecords:
        path = Path(out_dir) / "requests.jsonl"
        raw = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
        reqs = [Request("profiling", r["ok"], None if r["ok"] else {"type": "error", "message": r.get("error")},
                        r["start"], r["end"], None, (r["first"] - r["start"]) * 1000 if r["first"] else None,
                        (r["end"] - r["start"]) * 1000, float(r["tokens"])) for r in raw]
        done = (Path(out_dir) / "done.json")
        if not reqs or not done.is_file():
            return LoadRecords(self.name, tuple(reqs))
        ok = [r for r in reqs if r.ok]
        span = max(r.end_s for r in reqs) - min(r.start_s for r in reqs)
        tokens = sum(r.output_tokens for r in ok)
        dist = lambda xs: {"avg": statistics.fmean(xs), "p50": statistics.median(xs)} if xs else {}  # noqa: E731
        summary = {"successful": {"avg": float(len(ok))}, "errors": {"avg": float(len(reqs) - len(ok))},
                   "completed": {"avg": float(len(reqs))}, "duration_s": {"avg": span},
                   "output_tps": {"avg": tokens / span}, "requests_per_s": {"avg": len(reqs) / span},
                   "ttft_ms": dist([r.ttft_ms for r in ok if r.ttft_ms]), "e2e_ms": dist([r.latency_ms for r in ok])}
        return LoadRecords(self.name, tuple(reqs), summary, True, json.loads(done.read_text())["version"])
