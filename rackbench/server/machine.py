"""On what a deployment ran: a machine record per node (rackbench/tools/machine_info.py, once per deployment) and
GPU telemetry sampled during each point (``nvidia-smi --query-gpu ... -lms``, a step per host beside the load
generator, its CSV the step's log). A result carries both, so a slowdown can be told from a clock, a power cap, a
hot GPU or another tenant.

Nodes that are one host (a local stand-in) are recorded and sampled once. A node without nvidia-smi has a record
without GPUs and no telemetry, and says so.
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from rackbench.cluster import Allocation
from rackbench.cluster.base import NodeProcess
from rackbench.core.poll import Done, PollTimeout, poll
from rackbench.core.results_folder import CaseFolder, ProfileFolder
from rackbench.server.plan import ServerPlan
from rackbench.tools import MACHINE_INFO, in_folder

log = logging.getLogger(__name__)

# What each telemetry sample holds, in nvidia-smi's names and in the result's (the order of the CSV columns).
TELEMETRY = (("timestamp", None), ("index", None), ("uuid", None), ("clocks.sm", "sm_clock_mhz"),
             ("clocks.mem", "mem_clock_mhz"), ("power.draw", "power_w"), ("temperature.gpu", "temperature_c"),
             ("utilization.gpu", "utilization_pct"), ("memory.used", "memory_used_mib"))
INTERVAL_MS = 1000


def sampler_argv(interval_ms: int = INTERVAL_MS) -> list[str]:
    return ["nvidia-smi", f"--query-gpu={','.join(f for f, _ in TELEMETRY)}", "--format=csv,noheader,nounits",
            "-lms", str(interval_ms)]


def hosts(plan: ServerPlan, allocation: Allocation) -> list[int]:
    """One node rank per distinct host of the deployment (every worker node; a shared host once)."""
    ranks = sorted({p.rank for p in plan.processes if p.role in ("worker", "headless")} or {0})
    seen, out = set(), []
    addresses = allocation.addresses()
    for rank in ranks:
        host = addresses[rank] if rank < len(addresses) else str(rank)
        if allocation.shares_host:
            host = "this host"
        if host not in seen:
            seen.add(host)
            out.append(rank)
    return out


def runner(plan: ServerPlan, rank: int) -> tuple[str, str]:
    worker = next((p for p in plan.processes if p.rank == rank and p.role in ("worker", "headless")), None)
    if worker is not None and worker.runner:
        return worker.runner
    return plan.client.python, plan.client.tools          # a plan without workers (a fake server in tests)


def record(plan: ServerPlan, allocation: Allocation, folder: ProfileFolder, timeout: float = 120.0) -> list[dict]:
    """Each host's machine record (a step with the node's interpreter, in its container), in rank order."""
    procs: dict[int, NodeProcess] = {}
    for rank in hosts(plan, allocation):
        python, tools = runner(plan, rank)
        procs[rank] = allocation.launch(rank, f"machine{rank}", [python, in_folder(tools, MACHINE_INFO)], {},
                                        folder.log(f"machine{rank}"), role="preflight", oneshot=True)
    try:
        poll(lambda: Done(True) if not any(p.alive() for p in procs.values()) else "running", timeout=timeout,
             interval=0.2, backoff=1.5, max_interval=2, what="machine records")
    except PollTimeout:
        allocation.stop_all(list(procs.values()))
    out = []
    for rank, proc in procs.items():
        found = _last_json(proc.log)
        if found is None:
            found = {"problems": [f"no machine record (exit {proc.popen.returncode if proc.popen else None}): "
                                  f"{proc.tail(3)}"], "gpus": []}
        out.append({"node": proc.node, "rank": rank, **found})
    return out


def json_lines(path: Path) -> list[dict]:
    """The JSON lines a node step wrote into its log (a line of another shape, such as a warning, left out)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def _last_json(path: Path) -> dict | None:
    found = json_lines(path)
    return found[-1] if found else None


@dataclass
class Sampling:
    allocation: Allocation
    procs: dict[str, NodeProcess]       # node -> its sampler step
    interval_s: float
    started: float = 0.0                # wall clock when the samplers were launched
    power: list[tuple[float, str, float]] = field(default_factory=list)   # (wall clock, GPU uuid, W), after stop()
    rows: dict[str, list[list[str]]] = field(default_factory=dict)        # node -> its sampled rows, after stop()

    def stop(self) -> dict | None:
        """Stop the samplers and summarize what they sampled over the whole span (None when nothing was sampled);
        ``power`` then holds every power sample on the wall clock, ``rows`` every row (:func:`summarize` takes them
        again with the measured window once it is known)."""
        if not self.procs:
            return None
        self.allocation.stop_all(list(self.procs.values()))
        self.rows = {node: read_samples(proc.log) for node, proc in self.procs.items()}
        self.power = [s for lines in self.rows.values() for s in power_samples(lines, self.started)]
        return summarize(self.rows, self.interval_s)


def stamped(lines: list[list[str]], started: float) -> list[tuple[float, list[str]]]:
    """A node's rows with their wall-clock times (pure). nvidia-smi stamps each row in the node's local time, whose
    zone the login host may not share: the times are taken relative to the node's first row and placed from
    ``started``, when the sampler was launched (late by the step's start-up, about a second at most)."""
    out, first = [], None
    for line in lines:
        try:
            stamp = datetime.strptime(line[0], "%Y/%m/%d %H:%M:%S.%f")
        except ValueError:
            continue
        first = first or stamp
        out.append((started + (stamp - first).total_seconds(), line))
    return out


def power_samples(lines: list[list[str]], started: float) -> list[tuple[float, str, float]]:
    """A node's power samples as (wall clock, GPU uuid, watts) (pure; times as :func:`stamped` places them)."""
    col = TELEMETRY.index(("power.draw", "power_w"))
    return [(t, line[2], watts) for t, line in stamped(lines, started) if (watts := _num(line[col])) is not None]


def in_window(rows: dict[str, list[list[str]]], started: float, window: tuple[float, float]) -> dict:
    """Each node's rows sampled inside ``window`` (wall clock), as :func:`stamped` places them (pure)."""
    return {node: [line for t, line in stamped(lines, started) if window[0] <= t <= window[1]]
            for node, lines in rows.items()}


def start(plan: ServerPlan, allocation: Allocation, machine: list[dict], case: CaseFolder,
          interval_ms: int = INTERVAL_MS) -> Sampling:
    """A sampler on every host whose record lists GPUs, for the point's run."""
    procs = {}
    for rec in machine:
        if rec.get("gpus"):
            procs[rec["node"]] = allocation.launch(rec["rank"], "telemetry", sampler_argv(interval_ms), {},
                                                   case.telemetry(rec["node"]), role="client", oneshot=True)
    return Sampling(allocation, procs, interval_ms / 1000, started=time.time())


def read_samples(path: Path) -> list[list[str]]:
    """A sampler's CSV as rows of TELEMETRY's columns (lines of another shape, such as a warning, left out)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    return [[c.strip() for c in line.split(",")] for line in text.splitlines()
            if line.count(",") == len(TELEMETRY) - 1]


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:            # "[N/A]", "[Not Supported]"
        return None


def summarize(rows: dict[str, list[list[str]]], interval_s: float) -> dict:
    """Per GPU: samples, and mean / min / max of each sampled quantity (pure: no I/O)."""
    gpus = []
    for node, lines in rows.items():
        by_gpu: dict[str, list[list[str]]] = {}
        for line in lines:
            by_gpu.setdefault(line[2], []).append(line)
        for uuid, samples in by_gpu.items():
            entry = {"node": node, "index": int(samples[0][1]) if samples[0][1].isdigit() else None, "uuid": uuid,
                     "samples": len(samples)}
            for col, (_, name) in enumerate(TELEMETRY):
                if name is None:
                    continue
                values = [v for v in (_num(s[col]) for s in samples) if v is not None]
                entry[name] = ({"mean": statistics.fmean(values), "min": min(values), "max": max(values)}
                               if values else None)
            gpus.append(entry)
    return {"source": "nvidia-smi", "interval_s": interval_s, "gpus": sorted(gpus, key=lambda g: (g["node"],
                                                                                                 g["index"] or 0))}
