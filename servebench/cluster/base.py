"""The interface both backends implement, and process bookkeeping they share."""

from __future__ import annotations

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

log = logging.getLogger(__name__)
# Release order: what serves first (frontend, workers), then what they register with (etcd, NATS).
STOP_TIERS = (("frontend", "worker", "headless", "setup", "preflight"), ("infra",))


class ClusterError(RuntimeError):
    """Allocation or launch failed; the message says what and where."""


class ProcessDied(ClusterError):
    def __init__(self, proc: "NodeProcess"):
        self.proc = proc
        super().__init__(f"{proc.name} on node {proc.node} (rank {proc.rank}) exited with code "
                         f"{proc.popen.returncode}; last lines of {proc.log}:\n{proc.tail()}")


@dataclass(frozen=True)
class AllocationRequest:
    name: str                      # job name, e.g. servebench-<run>-<profile>
    nodes: int
    gpus_per_node: int = 0
    partition: str | None = None
    account: str | None = None
    time_limit: str | None = None
    directives: dict[str, str] = field(default_factory=dict)   # extra #SBATCH --key=value
    srun_options: dict[str, str] = field(default_factory=dict)  # extra srun --key=value per process
    container_image: str | None = None                          # pyxis: run each process in this image
    container_mounts: dict[str, str] = field(default_factory=dict)
    workdir: Path = Path(".")      # where the job script and logs go
    stop_grace_s: float = 60.0     # at release: TERM, then KILL after this many seconds


@dataclass
class NodeProcess:
    rank: int
    node: str
    name: str
    argv: list[str]
    log: Path
    popen: subprocess.Popen
    role: str = "worker"          # infra | frontend | worker | headless | setup | preflight
    oneshot: bool = False         # runs to completion (setup, preflight): its exit is not a death
    step: str = ""                # unique within the allocation (a Slurm step's name): the name, made unique

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError as err:
            return f"<no log: {err}>"


def stop_process_group(popen: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the process group the process leads, then SIGKILL after ``grace`` seconds."""
    if popen.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(popen.pid, sig)
        except ProcessLookupError:
            return
        try:
            popen.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


class Allocation(ABC):
    """Nodes held for one profile. Processes launched on them are tracked and stopped on release."""

    backend = "abstract"

    def __init__(self, request: AllocationRequest, nodes: list[str], job_id: str | None = None):
        self.request, self.nodes, self.job_id = request, nodes, job_id
        self.processes: list[NodeProcess] = []
        self.released = False
        self.started_at = time.time()
        _LIVE.add(self)

    def launch(self, rank: int, name: str, argv: list[str], env: dict[str, str | None], log: Path,
               role: str = "worker", oneshot: bool = False, image: str | None = None) -> NodeProcess:
        """Start ``argv`` on node ``rank`` with ``env`` added to the environment (None unsets), output to ``log``.
        ``role`` decides the stop tier; a ``oneshot`` process (setup, preflight) is expected to exit; ``image``
        replaces the allocation's container image for this process (pyxis)."""
        if self.released:
            raise ClusterError(f"allocation {self.job_id or self.request.name} was released")
        node = self.nodes[rank]
        taken = {p.step for p in self.processes}
        step = name if name not in taken else f"{name}.{len(self.processes)}"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            full = {**os.environ, **{k: v for k, v in env.items() if v is not None}}
            for key in [k for k, v in env.items() if v is None]:
                full.pop(key, None)     # the recipe or cluster asked for it to be unset
            popen = subprocess.Popen(self._command(node, list(argv), env, step, image), env=full,
                                     stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        proc = NodeProcess(rank, node, name, list(argv), log, popen, role, oneshot, step)
        self.processes.append(proc)
        return proc

    def check(self) -> None:
        """Raise ProcessDied for the first launched process that is no longer running."""
        for proc in self.processes:
            if not proc.oneshot and not proc.alive():
                raise ProcessDied(proc)

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
            _LIVE.discard(self)

    def stop_all(self, procs: list[NodeProcess]) -> None:
        """Stop these processes in parallel: TERM, then KILL after the request's grace."""
        running = [p for p in procs if p.alive()]
        if not running:
            return
        log.info("stopping %s", ", ".join(f"{p.name}@{p.node}" for p in running))
        with ThreadPoolExecutor(max_workers=len(running)) as pool:
            list(pool.map(self.stop, running))

    def stop(self, proc: NodeProcess) -> None:
        """Stop one process: its process group here (subclasses signal the remote step first)."""
        stop_process_group(proc.popen, grace=self.request.stop_grace_s)

    def addresses(self) -> list[str]:
        """How the other nodes (and the load generator) reach each node, in rank order."""
        return list(self.nodes)

    def describe(self) -> dict:
        return {"backend": self.backend, "name": self.request.name, "job_id": self.job_id, "nodes": self.nodes,
                "processes": [{"rank": p.rank, "node": p.node, "name": p.name, "pid": p.popen.pid,
                               "log": str(p.log)} for p in self.processes]}

    @abstractmethod
    def _command(self, node: str, argv: list[str], env: dict[str, str], name: str,
                 image: str | None = None) -> list[str]: ...

    @abstractmethod
    def _give_back(self) -> None: ...


class Backend(ABC):
    name = "abstract"

    @abstractmethod
    def allocate(self, request: AllocationRequest, timeout: float = 600.0) -> Allocation: ...

    @abstractmethod
    def unavailable(self) -> str | None:
        """Why this backend cannot allocate here, or None."""


_LIVE: set[Allocation] = set()
_LOCK = threading.Lock()


def release_all() -> None:
    """Release every allocation still held (signal handlers and atexit call this)."""
    with _LOCK:
        for alloc in list(_LIVE):
            try:
                alloc.release()
            except Exception:  # noqa: BLE001 - keep releasing the others
                pass
