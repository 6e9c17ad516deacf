"""The hosts during a point (#34): a sampler step per host of the deployment (rackbench/tools/host_sampler.py, the
node's own interpreter, beside the GPU sampler of rackbench.server.machine) reads, every second, the CPU time of
each process that carries the deployment's token (its servers and what they started: engine cores, workers) or the
client's (the load generator), and the host's load average and CPU clock. A result then says which process was busy
while the GPU idled: a host-bound point (rackbench.results.bound) is told from a GPU-bound one.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from rackbench.cluster import Allocation
from rackbench.cluster.base import NodeProcess
from rackbench.core.results_folder import CaseFolder
from rackbench.server.identity import CLIENT_ENV, TOKEN_ENV
from rackbench.server.machine import INTERVAL_MS, hosts, json_lines, runner
from rackbench.server.plan import ServerPlan
from rackbench.tools import HOST_SAMPLER, in_folder

SOURCE = "rackbench/tools/host_sampler.py: /proc/PID/stat of the point's processes, /proc/loadavg, /proc/cpuinfo"


def client_env(token: str | None) -> dict[str, str]:
    """What the load generator's environment carries so the samplers count it as the point's client."""
    return {CLIENT_ENV: token} if token else {}


@dataclass
class HostSampling:
    allocation: Allocation
    procs: dict[str, NodeProcess]       # node -> its sampler step
    interval_s: float

    def stop(self) -> dict | None:
        """Stop the samplers and summarize what they read (None when none ran)."""
        if not self.procs:
            return None
        self.allocation.stop_all(list(self.procs.values()))
        return summarize({node: json_lines(proc.log) for node, proc in self.procs.items()}, self.interval_s)


def sampler_argv(python: str, tools: str, token: str, interval_ms: int = INTERVAL_MS) -> list[str]:
    """The sampler's command with the node's interpreter and tools folder (the variables named here, by their owner)."""
    return [python, in_folder(tools, HOST_SAMPLER), token, str(interval_ms), TOKEN_ENV, CLIENT_ENV]


def start(plan: ServerPlan, allocation: Allocation, token: str | None, case: CaseFolder,
          interval_ms: int = INTERVAL_MS) -> HostSampling:
    """A sampler on every host of the deployment, for the point's run (none without a token to find it by)."""
    procs: dict[str, NodeProcess] = {}
    if token:
        for rank in hosts(plan, allocation):
            python, tools = runner(plan, rank)
            proc = allocation.launch(rank, "hostload", sampler_argv(python, tools, token, interval_ms), {},
                                     case.host_samples(rank), role="client", oneshot=True)
            procs[proc.node] = proc
    return HostSampling(allocation, procs, interval_ms / 1000)


def summarize(rows: dict[str, list[dict]], interval_s: float) -> dict | None:
    """Per host: samples, load average and CPU clock; per process: CPU seconds per second over the run (its ticks
    from its first sample to its last, over that time) and the most in one interval; the busiest server process
    (pure: no I/O)."""
    nodes, procs = [], []
    for node, lines in rows.items():
        head = next((ln for ln in lines if "hz" in ln), {"hz": 100})
        samples = [ln for ln in lines if "t" in ln]
        if not samples:
            continue
        loads = [s["load"] for s in samples if s.get("load") is not None]
        clocks = [s["mhz"] for s in samples if s.get("mhz") is not None]
        nodes.append({"node": node, "samples": len(samples), "cores": head.get("cores"),
                      "load_mean": statistics.fmean(loads) if loads else None, "load_max": max(loads, default=None),
                      "cpu_mhz_mean": statistics.fmean(clocks) if clocks else None})
        seen: dict[str, list[tuple[float, int]]] = {}
        named: dict[str, tuple[str, str]] = {}
        for s in samples:
            for pid, (name, role, ticks) in s["procs"].items():
                seen.setdefault(pid, []).append((s["t"], ticks))
                named[pid] = (name, role)
        for pid, points in seen.items():
            if len(points) < 2 or points[-1][0] <= points[0][0]:
                continue
            rates = [(b[1] - a[1]) / head["hz"] / (b[0] - a[0]) for a, b in zip(points, points[1:]) if b[0] > a[0]]
            total = (points[-1][1] - points[0][1]) / head["hz"] / (points[-1][0] - points[0][0])
            procs.append({"node": node, "name": named[pid][0], "pid": int(pid), "role": named[pid][1],
                          "cores_mean": round(total, 3), "cores_max": round(max(rates, default=0.0), 3)})
    if not nodes:
        return None
    procs.sort(key=lambda p: -p["cores_mean"])
    hottest = next(({"name": p["name"], "node": p["node"], "cores": p["cores_mean"]} for p in procs
                    if p["role"] == "server"), None)
    return {"source": SOURCE, "interval_s": interval_s, "nodes": nodes, "processes": procs, "hottest": hottest}
