"""The Slurm backend: a holder batch job keeps the nodes; each node process is one ``srun`` step in it.

``sbatch`` submits a job that only sleeps; ``srun --jobid --overlap -w NODE`` starts each per-node process
as its own step, so one allocation serves every concurrency point of a profile. Release = stop the steps'
``srun`` process groups, then ``scancel`` the job by id.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import time

from .base import Allocation, AllocationRequest, Backend, ClusterError

# Pending reasons that never resolve by waiting.
NEVER_SCHEDULED = ("PartitionNodeLimit", "PartitionConfig", "BadConstraints", "InvalidAccount", "InvalidQOS",
                   "PartitionDown", "PartitionInactive", "AssocMaxNodesPerJobLimit", "QOSMaxNodePerJobLimit",
                   "ReqNodeNotAvail")


def _run(argv: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def sbatch_directives(req: AllocationRequest) -> list[str]:
    opts = {"job-name": req.name, "nodes": str(req.nodes), "ntasks-per-node": "1"}
    if req.gpus_per_node:
        opts["gpus-per-node"] = str(req.gpus_per_node)
    for key, value in (("partition", req.partition), ("account", req.account), ("time", req.time_limit)):
        if value:
            opts[key] = value
    opts["output"] = str(req.workdir / f"{req.name}.sbatch.log")
    opts.update(req.directives)
    return [f"--{k}={v}" if v != "" else f"--{k}" for k, v in opts.items()]


def sbatch_script(req: AllocationRequest) -> str:
    """The batch script: directives, then a holder that keeps the allocation until it is cancelled."""
    lines = ["#!/bin/bash"] + [f"#SBATCH {shlex.quote(d)}" for d in sbatch_directives(req)]
    lines += ["# servebench holds these nodes; each server process is started as its own srun step.",
              "exec sleep infinity", ""]
    return "\n".join(lines)


def srun_prefix(job_id: str, node: str, req: AllocationRequest) -> list[str]:
    argv = ["srun", f"--jobid={job_id}", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={node}",
            "--export=ALL", f"--job-name={req.name}"]
    if req.container_image:
        argv.append(f"--container-image={req.container_image}")
        if req.container_mounts:
            argv.append("--container-mounts=" + ",".join(f"{s}:{d}" for s, d in req.container_mounts.items()))
    argv += [f"--{k}={v}" if v != "" else f"--{k}" for k, v in req.srun_options.items()]
    return argv


class SlurmAllocation(Allocation):
    backend = "slurm"

    def _command(self, node: str, argv: list[str], env: dict[str, str]) -> list[str]:
        return [*srun_prefix(self.job_id, node, self.request), "--", *argv]

    def addresses(self) -> list[str]:
        """Each node's NodeAddr as Slurm knows it (the node name when Slurm has none)."""
        out = []
        for node in self.nodes:
            info = _run(["scontrol", "show", "node", "-o", node]).stdout
            addr = next((f.split("=", 1)[1] for f in info.split() if f.startswith("NodeAddr=")), "")
            out.append(addr or node)
        return out

    def _give_back(self) -> None:
        _run(["scancel", self.job_id])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not _run(["squeue", "-h", "-j", self.job_id, "-o", "%i"]).stdout.strip():
                return
            time.sleep(0.3)
        raise ClusterError(f"job {self.job_id} still listed by squeue 30 s after scancel")


class SlurmBackend(Backend):
    name = "slurm"

    def unavailable(self) -> str | None:
        if shutil.which("sbatch") is None:
            return "no Slurm client (sbatch) on PATH"
        try:
            probe = _run(["sinfo", "-h", "-o", "%P"], timeout=15)
        except subprocess.TimeoutExpired:
            return "Slurm controller did not answer sinfo within 15 s"
        if probe.returncode != 0:
            return f"Slurm controller unreachable: {probe.stderr.strip() or probe.stdout.strip()}"
        return None

    def allocate(self, request: AllocationRequest, timeout: float = 600.0) -> Allocation:
        request.workdir.mkdir(parents=True, exist_ok=True)
        script = request.workdir / f"{request.name}.sbatch"
        script.write_text(sbatch_script(request))
        sub = _run(["sbatch", "--parsable", str(script)])
        if sub.returncode != 0:
            raise ClusterError(f"sbatch {script} failed: {sub.stderr.strip()}")
        job_id = sub.stdout.strip().split(";")[0]
        try:
            nodelist = self._wait_running(job_id, timeout)
            hosts = _run(["scontrol", "show", "hostnames", nodelist]).stdout.split()
        except BaseException:
            _run(["scancel", job_id])
            raise
        return SlurmAllocation(request, hosts, job_id)

    @staticmethod
    def _wait_running(job_id: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            out = _run(["squeue", "-h", "-j", job_id, "-o", "%T|%r|%N"]).stdout.strip()
            if not out:
                raise ClusterError(f"job {job_id} ended before it ran (see `scontrol show job {job_id}`)")
            state, reason, nodes = out.split("|", 2)
            if state == "RUNNING":
                return nodes
            if state == "PENDING" and any(reason.startswith(r) for r in NEVER_SCHEDULED):
                raise ClusterError(f"job {job_id} can never start: pending with reason {reason} "
                                   "(more nodes or GPUs than the partition has?)")
            if time.monotonic() > deadline:
                raise ClusterError(f"job {job_id} still {state} ({reason}) after {timeout:.0f} s")
            time.sleep(0.3)

