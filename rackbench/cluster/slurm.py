"""The Slurm backend: a holder batch job keeps the nodes; each node process is one ``srun`` step in it.

``sbatch`` submits a job that only sleeps; ``srun --jobid --overlap -w NODE`` starts each per-node process
as its own step, so one allocation serves every concurrency point of a profile. Release = stop the steps'
``srun`` process groups, then ``scancel`` the job by id.
"""

from __future__ import annotations

import logging
import shlex
import shutil
import subprocess
from pathlib import Path

from rackbench.core.files import write_atomic
from rackbench.core.poll import Done, PollTimeout, poll
from rackbench.core.results_folder import ProfileFolder
from rackbench.cluster.base import Allocation, AllocationRequest, Backend, ClusterError
from rackbench.core.timeouts import KILL_WAIT_S
from rackbench.cluster.heartbeat import DEFAULT_ORPHAN_AFTER_S, Heartbeat, holder_lines
from rackbench.core.processes import stop_group
from rackbench.recipe.schema.cluster import SlurmAccess
from rackbench.cluster.slurm_jobs import ENDED, _run, job_identity, job_state
from rackbench.cluster.srun import node_disks, node_local_argv, srun_prefix, step_image, step_name, unset_argv

log = logging.getLogger(__name__)

# Pending reasons that never resolve by waiting. Not ReqNodeNotAvail: nodes drained, down or reserved for maintenance
# come back (the job waits, and a timeout says the reason it waited on).
NEVER_SCHEDULED = ("PartitionNodeLimit", "PartitionConfig", "BadConstraints", "InvalidAccount", "InvalidQOS",
                   "PartitionDown", "PartitionInactive", "AssocMaxNodesPerJobLimit", "QOSMaxNodePerJobLimit",
                   "PartitionTimeLimit")         # a --time above the partition's MaxTime waits forever


def never_starts(state: str, reason: str) -> bool:
    """Whether a job in ``state`` pending for ``reason`` can never start, so that waiting is pointless."""
    return state == "PENDING" and any(reason.startswith(r) for r in NEVER_SCHEDULED)


def partition_nodes(partition: str | None) -> list[str]:
    """The node names of a partition (the default one when None), as sinfo lists them."""
    argv = ["sinfo", "-h", "-N", "-o", "%N"] + ([f"--partition={partition}"] if partition else [])
    return sorted(set(_run(argv).stdout.split()))


def partition_limit(scontrol: str, partition: str | None) -> str | None:
    """From ``scontrol show partition -o``: the limit a job without ``--time`` gets in ``partition`` (the default
    partition when None): its DefaultTime, else its MaxTime; None when both are unlimited (or no such partition)."""
    for line in scontrol.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if (partition is None and fields.get("Default") == "YES") or fields.get("PartitionName") == partition:
            for key in ("DefaultTime", "MaxTime"):
                value = fields.get(key, "")
                if value and value.upper() not in ("NONE", "UNLIMITED", "INFINITE"):
                    return value
            return None
    return None


def sbatch_directives(req: AllocationRequest) -> list[str]:
    opts = {"job-name": req.name, "nodes": str(req.nodes), "ntasks-per-node": "1"}
    if req.gpus_per_node:
        opts["gpus-per-node"] = str(req.gpus_per_node)
    for key, value in (("partition", req.scheduler.partition), ("account", req.scheduler.account),
                       ("time", req.time_limit)):
        if value:
            opts[key] = value
    opts["output"] = str(ProfileFolder(req.workdir).job_log(req.name))
    opts.update(req.scheduler.directives)
    return [f"--{k}={v}" if v != "" else f"--{k}" for k, v in opts.items()]


def sbatch_script(req: AllocationRequest, orphan_after_s: int = DEFAULT_ORPHAN_AFTER_S) -> str:
    """The batch script: directives, then a holder that keeps the allocation until it is cancelled, or until the
    session's heartbeat stops (rackbench.cluster.heartbeat)."""
    lines = ["#!/bin/bash"] + [f"#SBATCH {shlex.quote(d)}" for d in sbatch_directives(req)]
    lines += ["# rackbench holds these nodes; each server process is started as its own srun step. The job ends",
              f"# itself {orphan_after_s} s after the session stops rewriting its heartbeat (a session killed).",
              *holder_lines(ProfileFolder(req.workdir).heartbeat(req.name), orphan_after_s), ""]
    return "\n".join(lines)


# how long a job may take to end after scancel where no cluster file says (its slurm.release_wait_s)
RELEASE_WAIT_S = SlurmAccess.model_fields["release_wait_s"].default


class SlurmAllocation(Allocation):
    backend = "slurm"

    def __init__(self, request: AllocationRequest, nodes: list[str], job_id: str | None = None, dry: bool = False,
                 node_local: dict[str, str] | None = None, heartbeat: Heartbeat | None = None,
                 release_wait_s: float = RELEASE_WAIT_S, identity: dict | None = None):
        super().__init__(request, nodes, job_id, dry)
        self.identity = identity       # the job beyond its id (slurm_jobs.job_identity), kept in the manifest
        self.node_local = dict(node_local or {})
        self.heartbeat = heartbeat
        self.release_wait_s = release_wait_s

    def _command(self, node: str, argv: list[str], env: dict[str, str | None], name: str,
                 image: str | None = None) -> list[str]:
        if step_image(self.request, image):
            # in a container: pyxis' options set the environment and mount the node-local disks, whose folders on
            # this host must exist (pyxis fails a step whose mount source does not)
            for backing in node_disks(self.node_local, node).values() if not self.dry else ():
                Path(backing).mkdir(parents=True, exist_ok=True)
            return [*srun_prefix(self.job_id, node, self.request, name, image, env, self.node_local), "--",
                    *unset_argv(env, argv)]
        return [*srun_prefix(self.job_id, node, self.request, name, image), "--",
                *node_local_argv(self.node_local, node, argv)]

    def describe(self) -> dict:
        return {**super().describe(), "job": self.identity}

    def steps(self) -> dict[str, str]:
        """step name -> step id (JOB.STEP) of this job's running steps."""
        out = _run(["squeue", "-h", "-s", "-j", self.job_id, "-o", "%i|%j"]).stdout
        return {name: sid for sid, _, name in (line.partition("|") for line in out.splitlines()) if sid}

    def interrupt(self, proc) -> None:
        """SIGINT to the step's tasks on the node (the local srun would only forward it, and a second one kills)."""
        step = self.steps().get(step_name(self.request, proc.step))
        if step is None:
            return super().interrupt(proc)
        _run(["scancel", "--signal=INT", step])

    def stop(self, proc) -> None:
        """Signal the step itself (TERM to every task on the node, as Slurm wants; the engine shuts down and
        deregisters), wait for the srun client to see it end, then KILL after the grace; the local srun's
        process group last. Killing only the local srun would SIGKILL the remote engine."""
        step = self.steps().get(step_name(self.request, proc.step))
        if step is None:                     # not (or no longer) a running step
            return super().stop(proc)
        grace = self.request.stop_grace_s
        for signal_name, wait in (("TERM", grace), ("KILL", KILL_WAIT_S)):
            _run(["scancel", f"--signal={signal_name}", "--full", step])
            try:
                proc.popen.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                log.warning("step %s (%s) still running %.0f s after %s", step, proc.name, wait, signal_name)
        # The step did not end (e.g. slurmd still launching it): the local srun client goes at once, without a
        # second grace period; cancelling the job (release) ends the step on the node.
        stop_group(proc.popen, grace=5.0)

    def addresses(self) -> list[str]:
        """Each node's NodeAddr as Slurm knows it (the node name when Slurm has none)."""
        if self.dry:
            return list(self.nodes)
        if getattr(self, "_addresses", None) is not None:
            return list(self._addresses)
        out = []
        for node in self.nodes:
            info = _run(["scontrol", "show", "node", "-o", node]).stdout
            addr = next((f.split("=", 1)[1] for f in info.split() if f.startswith("NodeAddr=")), "")
            out.append(addr or node)
        self._addresses = out
        return list(out)

    def ended(self) -> str | None:
        """The job ended first (the session's heartbeat stopped, scancel, the time limit, a node lost): its state
        and the last line the job itself wrote, where the real cause is (the process only saw its step end)."""
        if self.dry or not self.job_id:
            return None

        def settled():         # a job being ended shows COMPLETING for a moment after its steps have ended
            state, rest = job_state(self.job_id)
            return "ending" if state and state.split()[0] == "COMPLETING" else Done((state, rest))
        try:
            state, rest = poll(settled, timeout=ENDING_S, interval=0.2, backoff=1.5, max_interval=1,
                               what=f"job {self.job_id}'s state")
        except PollTimeout:
            state, rest = "COMPLETING", ""
        if state is None or state.split()[0] not in (*ENDED, "COMPLETING"):
            return None        # the job runs on: the process ended by itself
        try:
            said = [ln for ln in ProfileFolder(self.request.workdir).job_log(self.request.name).read_text(
                errors="replace").splitlines() if ln.strip()]
        except OSError:
            said = []
        reason = rest.split("|", 1)[0].strip()
        why = state.split()[0] + (f", {reason}" if reason and reason != "None" else "")
        return f"its Slurm job {self.job_id} ended first ({why})" + (
            f"; the job's log says: {said[-1].strip()}" if said else "")

    def _give_back(self) -> None:
        _run(["scancel", self.job_id])
        if self.heartbeat is not None:
            self.heartbeat.stop()

        def gone():
            state, _ = job_state(self.job_id)
            return Done(state) if state is None or state.split()[0] in ENDED else state
        try:
            poll(gone, timeout=self.release_wait_s, interval=0.2, backoff=1.5, max_interval=5,
                 what=f"job {self.job_id} to end")
        except PollTimeout as err:
            raise ClusterError(f"job {self.job_id} still {err.last} {self.release_wait_s:g} s after scancel: a node of "
                               f"it does not answer its controller (`scontrol show job {self.job_id}` and `sinfo -R` "
                               "name it); what ran there may live on until its slurmd is back, and Slurm then ends "
                               f"it; if it does not come back, `scancel {self.job_id}` again later or ask the site to "
                               "drain or reboot the node") from None


ENDING_S = 8          # how long a job Slurm is ending may show COMPLETING before its final state


class SlurmBackend(Backend):
    name = "slurm"

    @property
    def containers(self) -> bool:
        return bool(self.cluster is not None and self.cluster.slurm.pyxis)

    @property
    def _node_local(self) -> dict[str, str]:
        return dict(self.cluster.slurm.node_local) if self.cluster is not None else {}

    @property
    def orphan_after_s(self) -> int:
        return self.cluster.slurm.orphan_after_s if self.cluster is not None else DEFAULT_ORPHAN_AFTER_S

    def job_script(self, request: AllocationRequest) -> str:
        return sbatch_script(request, self.orphan_after_s)

    def dry_run(self, request: AllocationRequest) -> Allocation:
        return SlurmAllocation(request, [f"node{i}" for i in range(request.nodes)], "JOB", dry=True,
                               node_local=self._node_local)

    def default_time_limit(self, partition: str | None) -> str | None:
        try:
            return partition_limit(_run(["scontrol", "show", "partition", "-o"], timeout=15).stdout, partition)
        except (OSError, subprocess.TimeoutExpired):
            return None

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
        folder = ProfileFolder(request.workdir)
        script = write_atomic(folder.job_script(request.name), self.job_script(request))
        beat = Heartbeat(folder.heartbeat(request.name), self.orphan_after_s)   # beating before the job can start
        sub = _run(["sbatch", "--parsable", str(script)])
        if sub.returncode != 0:
            beat.stop()
            raise ClusterError(f"sbatch {script} failed: {sub.stderr.strip()}")
        job_id = sub.stdout.strip().split(";")[0]
        try:
            identity = job_identity(job_id)        # listed from submission on: pending or running
            nodelist = self._wait_running(job_id, timeout)
            hosts = _run(["scontrol", "show", "hostnames", nodelist]).stdout.split()
        except BaseException:
            beat.stop()
            _run(["scancel", job_id])
            raise
        return SlurmAllocation(request, hosts, job_id, node_local=self._node_local, heartbeat=beat,
                               release_wait_s=self.cluster.slurm.release_wait_s if self.cluster else RELEASE_WAIT_S,
                               identity=identity)

    @staticmethod
    def _wait_running(job_id: str, timeout: float) -> str:
        """Poll with backoff (0.5 s growing to 10 s): a pending job costs a login node a handful of calls a minute."""
        seen = [False]

        def probe():
            state, rest = job_state(job_id)
            if state is None:
                if seen[0]:
                    raise ClusterError(f"job {job_id} vanished from squeue and accounting before it ran")
                return "not listed yet"
            seen[0] = True
            reason, nodes = rest.split("|", 1) if "|" in rest else (rest, "")
            if state == "RUNNING":
                return Done(nodes)
            if state.split()[0] in ENDED:
                raise ClusterError(f"job {job_id} ended ({state}) before it ran (see `scontrol show job {job_id}`)")
            if never_starts(state, reason):
                raise ClusterError(f"job {job_id} can never start: pending with reason {reason} "
                                   "(more nodes or GPUs than the partition has?)")
            return f"{state} ({reason})"
        try:
            return poll(probe, timeout=timeout, interval=0.5, backoff=1.5, max_interval=10,
                        what=f"job {job_id} to start")
        except PollTimeout as err:
            raise ClusterError(f"job {job_id} still {err.last} after {timeout:.0f} s") from None
