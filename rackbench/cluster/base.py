"""The interface every cluster backend implements (rackbench's: slurm, local; a site's through the
``rackbench.backends`` entry points), and the process bookkeeping they share.

What the rest of rackbench needs to know about where processes run is asked of the backend, never read out of
the cluster file: whether a scheduler holds the nodes (:attr:`Backend.scheduled`), whether processes run in a
container image (:attr:`Backend.containers`), what is submitted (:meth:`Backend.job_script`); and of the
allocation once held, whether its nodes are this machine (:attr:`Allocation.shares_host`).
"""

from __future__ import annotations

from typing import ClassVar

import logging
import os
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from rackbench.cluster.died import ClusterError, ProcessDied, port_taken  # noqa: F401  (re-exported)
from rackbench.core.processes import stop_group
from rackbench.core.secrets import redact
from rackbench.recipe.schema.cluster import ClusterSpec

log = logging.getLogger(__name__)
# Release order: the load generator, then what serves (frontend, workers), then what they register with (etcd, NATS).
STOP_TIERS = (("client", "preflight"), ("frontend", "worker", "headless"), ("infra",))
# launch(image=ON_THE_NODE): the step runs on the node's own filesystem, not in the allocation's container image
# (a look at the node itself: are the containers' mount sources there). "none", as a recipe's container says it.
ON_THE_NODE = "none"


@dataclass(frozen=True)
class SchedulerOptions:
    """What only a batch scheduler reads (Slurm's, in rackbench.cluster.slurm and the srun line); a backend that
    holds nodes without one (local, a site's) ignores it."""

    partition: str | None = None
    account: str | None = None
    directives: dict[str, str] = field(default_factory=dict)    # extra #SBATCH --key=value
    step_options: dict[str, str] = field(default_factory=dict)  # extra srun --key=value per process


@dataclass(frozen=True)
class AllocationRequest:
    """What a profile needs held, in the suite's own terms: the nodes and GPUs, how long, the container its steps
    run in, where its files go; a scheduler's own options apart (``scheduler``)."""

    name: str                      # job name, e.g. rackbench-<run>-<profile>
    nodes: int
    gpus_per_node: int = 0
    time_limit: str | None = None
    scheduler: SchedulerOptions = field(default_factory=SchedulerOptions)
    container_image: str | None = None                          # pyxis: run each process in this image
    container_mounts: dict[str, str] = field(default_factory=dict)
    container_writable: bool = False                            # a step installs into the image (pyxis --container-writable)
    workdir: Path = Path(".")      # where the job script and logs go
    stop_grace_s: float = 60.0     # at release: TERM, then KILL after this many seconds
    dropped: tuple[str, ...] = ()  # the recipe's sbatch directives / srun options this cluster does not apply


@dataclass
class NodeProcess:
    rank: int
    node: str
    name: str
    argv: list[str]
    log: Path
    popen: subprocess.Popen | None   # None: a dry run's process (recorded, never started)
    role: str = "worker"          # infra | frontend | worker | headless | client | preflight
    oneshot: bool = False         # runs to completion (a point's client, preflight): its exit is not a death
    step: str = ""                # unique within the allocation (a Slurm step's name): the name, made unique
    command: list[str] = field(default_factory=list)   # what was started on this host (srun ... -- argv)
    env: dict[str, str | None] = field(default_factory=dict)

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int = 40) -> str:
        """The log's last lines, credentials redacted (a server prints its arguments; the tail is quoted in results,
        reports and failures)."""
        try:
            return redact("\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]))
        except OSError as err:
            return f"<no log: {err}>"


class Allocation(ABC):
    """Nodes held for one profile. Processes launched on them are tracked and stopped on release."""

    backend = "abstract"

    def __init__(self, request: AllocationRequest, nodes: list[str], job_id: str | None = None, dry: bool = False):
        self.request, self.nodes, self.job_id, self.dry = request, nodes, job_id, dry
        self.processes: list[NodeProcess] = []
        self.holds: list = []          # what the allocation keeps until it is released (a port lease): close()d then
        self.released = False
        self.started_at = time.time()
        if not dry:
            _LIVE.add(self)

    def launch(self, rank: int, name: str, argv: list[str], env: dict[str, str | None], log: Path,
               role: str = "worker", oneshot: bool = False, image: str | None = None) -> NodeProcess:
        """Start ``argv`` on node ``rank`` with ``env`` added to the environment (None unsets), output to ``log``.
        ``role`` decides the stop tier; a ``oneshot`` process (client, preflight) is expected to exit; ``image``
        replaces the allocation's container image for this process (pyxis; :data:`ON_THE_NODE`: none)."""
        if self.released:
            raise ClusterError(f"allocation {self.job_id or self.request.name} was released")
        node = self.nodes[rank]
        taken = {p.step for p in self.processes}
        step = name if name not in taken else f"{name}.{len(self.processes)}"
        command = self._command(node, list(argv), env, step, image)
        popen = None
        if not self.dry:
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "ab") as out:
                full = {**os.environ, **{k: v for k, v in env.items() if v is not None}}
                for key in [k for k, v in env.items() if v is None]:
                    full.pop(key, None)     # the recipe or cluster asked for it to be unset
                popen = subprocess.Popen(command, env=full, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        proc = NodeProcess(rank, node, name, list(argv), log, popen, role, oneshot, step, command, dict(env))
        self.processes.append(proc)
        if popen is not None:
            self._started(proc)
        return proc

    def _started(self, proc: NodeProcess) -> None:
        """A process was started (a backend that guards its processes against the session's death hooks here)."""

    def hold(self, thing):
        """Keep ``thing`` (anything with ``close()``) until the allocation is released; returns it."""
        self.holds.append(thing)
        return thing

    def check(self) -> None:
        """Raise ProcessDied for the first launched process that is no longer running."""
        for proc in self.processes:
            if not proc.oneshot and not self.dry and not proc.alive():
                raise ProcessDied(proc, here=self.shares_host, cause=self.ended())

    def ended(self) -> str | None:
        """Why the allocation itself ended under its processes (a scheduler's job cancelled or timed out), as the
        cause of a process's end; None where it did not (a backend without jobs)."""
        return None

    def release(self) -> None:
        """Stop every process by tier (frontend and workers in parallel, then etcd/NATS), then give the nodes
        back. Safe to call twice."""
        if self.released:
            return
        self.released = True
        try:
            for tier in STOP_TIERS:
                self.stop_all([p for p in self.processes if p.role in tier])
            self.stop_all([p for p in self.processes if not any(p.role in t for t in STOP_TIERS)])
            self._give_back()
        finally:
            for thing in self.holds:
                thing.close()
            _LIVE.discard(self)

    def stop_all(self, procs: list[NodeProcess]) -> None:
        """Stop these processes in parallel: TERM, then KILL after the request's grace."""
        running = [p for p in procs if p.popen is not None]     # a dead leader's group may live on
        if not running:
            return
        log.info("stopping %s", ", ".join(f"{p.name}@{p.node}" for p in running))
        with ThreadPoolExecutor(max_workers=len(running)) as pool:
            list(pool.map(self.stop, running))

    def interrupt(self, proc: NodeProcess) -> None:
        """SIGINT to one process (a load generator ends its run and writes its files); here, to its group."""
        if proc.popen is not None:
            try:
                os.killpg(proc.popen.pid, signal.SIGINT)
            except ProcessLookupError:
                pass

    def stop(self, proc: NodeProcess) -> None:
        """Stop one process: its whole process group here, leader alive or not (subclasses signal the remote
        step first)."""
        stop_group(proc.popen, grace=self.request.stop_grace_s)

    def addresses(self) -> list[str]:
        """How the other nodes (and the load generator) reach each node, in rank order."""
        return list(self.nodes)

    @property
    def shares_host(self) -> bool:
        """Every node of this allocation is this machine (a local stand-in): ports must be probed here and a GPU
        host's devices split among the nodes."""
        return all(_this_host(a) for a in self.addresses())

    def describe(self) -> dict:
        return {"backend": self.backend, "name": self.request.name, "job_id": self.job_id, "nodes": self.nodes,
                "processes": [{"rank": p.rank, "node": p.node, "name": p.name, "role": p.role, "step": p.step,
                               "pid": p.popen.pid if p.popen else None, "log": str(p.log)} for p in self.processes]}

    @abstractmethod
    def _command(self, node: str, argv: list[str], env: dict[str, str], name: str,
                 image: str | None = None) -> list[str]: ...

    @abstractmethod
    def _give_back(self) -> None: ...


class Backend(ABC):
    """One cluster's way of holding nodes and starting processes on them. ``options``: the strict pydantic model of
    the cluster file's ``backend_options`` this backend reads (None: it reads none, and any key there is refused
    when the cluster file loads)."""

    name = "abstract"
    options: ClassVar[type | None] = None

    def __init__(self, cluster: ClusterSpec | None = None):
        self.cluster = cluster

    # A scheduler holds the nodes (a job is submitted, and queues); False: the backend starts the processes itself.
    # Whether the nodes are this machine is the allocation's to say (Allocation.shares_host), once it has them.
    scheduled: ClassVar[bool] = True

    @property
    def containers(self) -> bool:
        """Processes run in the recipe's container image, seeing only its mounts (pyxis)."""
        return False

    @abstractmethod
    def allocate(self, request: AllocationRequest, timeout: float = 600.0) -> Allocation: ...

    @abstractmethod
    def dry_run(self, request: AllocationRequest) -> Allocation:
        """An allocation on placeholder nodes whose launches are recorded, never started (rackbench render)."""

    def job_script(self, request: AllocationRequest) -> str | None:
        """What is submitted to hold the nodes (None: nothing is)."""
        return None

    def default_time_limit(self, partition: str | None) -> str | None:
        """The time limit a job that names none gets in ``partition`` (None: none, or not known here)."""
        return None

    @abstractmethod
    def unavailable(self) -> str | None:
        """Why this backend cannot allocate here, or None."""


def loopback(address: str) -> bool:
    """Whether an address (or the name localhost) is this machine's loopback."""
    import ipaddress
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


def _this_host(address: str) -> bool:
    import socket
    return loopback(address) or address == socket.gethostname()


_LIVE: set[Allocation] = set()
_LOCK = threading.Lock()


def release_all() -> list[str]:
    """Release every allocation still held (session end, signal handlers and atexit call this); what could not
    be released, one line each (also logged: a failed release is never silent)."""
    failed = []
    with _LOCK:
        for alloc in list(_LIVE):
            try:
                alloc.release()
            except Exception as err:  # noqa: BLE001 - keep releasing the others
                what = f"{alloc.backend} allocation {alloc.job_id or alloc.request.name}"
                log.error("releasing %s failed: %s", what, err)
                failed.append(f"{what}: {err}")
    return failed
