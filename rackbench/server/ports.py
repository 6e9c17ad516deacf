"""Every port a deployment uses, handed out by one allocator per deployment, by kind and by host (as srt-slurm's
``NodePortAllocator``): two processes on one host never get the same port, whether they are two workers of one
node or every node of a host that stands in for several. Nothing else adds offsets to base ports.

Where the nodes are this machine (a local cluster, or tests next to each other), the allocator also skips ports
something here has bound (listening or not: vLLM binds its API port a minute before it listens), and holds every
port it hands out in a :class:`PortLease` until the allocation is released: one locked file per port in a folder
every user and session of this host shares, so a second session never picks a port the first has planned but not
bound yet. The lock is the kernel's (``flock``): a session that dies lets go of its ports with its last breath.
On a cluster's own nodes (which this machine cannot probe) every range starts at an offset of the job's id, so two
jobs that share a node rarely meet, and the node's preflight refuses a port in use with its holder named
(rackbench.tools.preflight_node). A port the recipe pins is used as it is, never another: taken, it is refused
before any server starts, with its holder named.
"""

from __future__ import annotations

import fcntl
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rackbench.core.listeners import listening

# kind -> first port of its range on each host (the ranges leave room for many processes per host)
BASES = {
    "frontend": 8000,         # the OpenAI-compatible API (Dynamo's frontend, or vLLM's API server)
    "system": 18081,          # a Dynamo worker's system server: /health, /metrics
    "kv_events": 20080,       # vLLM's KV-event publisher (+ the global DP rank: vLLM adds it itself)
    "dp_rpc": 13360,          # vLLM's data-parallel RPC (on the worker's head node); not vLLM's default 13345, which
                              # recipes pin (the seed's DEP): a session's own port never takes another's pinned one
    "master": 29500,          # torch.distributed of a multi-node worker (on its head node)
    "etcd": 2379,
    "etcd_peer": 2380,
    "nats": 4222,
}
SPAN = 50                     # ports of one kind per host before the next kind's range would be reached
XDIST_BLOCK = 1000            # each pytest-xdist worker searches its own block of ports on a shared host
JOB_BLOCKS, JOB_BLOCK = 16, 100   # a cluster job's ranges start at (job id mod 16) x 100: below the closest bases' gap
LEASES = "/tmp/rackbench-ports"  # every session of this host, whoever runs it ($RACKBENCH_PORT_LEASES moves it)


class PortTaken(RuntimeError):
    """A port the recipe pins is in use here; the message names it and its holder."""


def port_free(port: int, strict: bool = True) -> bool:
    """Whether nothing here has ``port``. ``strict``: not even bound without listening (vLLM binds its API port,
    with SO_REUSEADDR, a minute before it listens; only a bind without SO_REUSEADDR finds that, and it counts a
    TIME_WAIT an earlier connection left too, which costs a port). Not strict (a port the recipe pins): nothing
    listens on it and a server's bind (SO_REUSEADDR) would succeed."""
    if not strict and listening(port):
        return False
    with socket.socket() as sock:
        if not strict:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


class PortLease:
    """Ports held on this machine until :meth:`close`: one file per port under ``folder``, locked while held, with
    its holder's description in it (what a session that finds it taken names)."""

    def __init__(self, holder: str, folder: str | Path | None = None):
        self.holder = holder
        self.folder = Path(folder or os.environ.get("RACKBENCH_PORT_LEASES") or LEASES)
        self._held: dict[int, int] = {}          # port -> the locked file's descriptor

    def _path(self, port: int) -> Path:
        return self.folder / f"{port}"

    def take(self, port: int) -> bool:
        """Hold ``port``; False when another session holds it."""
        if port in self._held:
            return True
        if not self.folder.is_dir():
            self.folder.mkdir(parents=True, exist_ok=True)
            os.chmod(self.folder, 0o1777)       # every user's sessions, as /tmp itself
        try:
            fd = os.open(self._path(port), os.O_RDWR | os.O_CREAT, 0o666)
            writable = True
        except PermissionError:                 # another user's file: a lock needs no write access
            fd, writable = os.open(self._path(port), os.O_RDONLY), False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        if writable:
            try:
                os.fchmod(fd, 0o666)            # the next session may be another user's
            except PermissionError:
                pass
            os.ftruncate(fd, 0)
            os.write(fd, self.holder.encode())
        self._held[port] = fd
        return True

    def drop(self, port: int) -> None:
        fd = self._held.pop(port, None)
        if fd is not None:
            os.close(fd)

    def holder_of(self, port: int) -> str | None:
        """Who holds ``port`` in another session (its description), or None."""
        path = self._path(port)
        if port in self._held or not path.is_file():
            return None
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return path.read_text(errors="replace").strip() or "another rackbench session"
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    @property
    def ports(self) -> list[int]:
        return sorted(self._held)

    def close(self) -> None:
        for port in list(self._held):
            self.drop(port)


@dataclass
class PortAllocator:
    """``take(kind, host)`` gives the next port of ``kind`` on ``host``. ``probe``: the hosts are this machine, so a
    port bound here, or held by another session's ``lease``, is skipped; ``offset`` shifts every range (one block per
    xdist worker, or per cluster job); a kind in ``bases`` (the recipe pins it) gets exactly that port first."""

    probe: bool = False
    offset: int = 0
    bases: dict[str, int] = field(default_factory=dict)     # a recipe's own choice of a kind's first port
    lease: PortLease | None = None                          # probe: where the ports handed out are held
    describe: Callable[[int], str | None] | None = None     # probe: port -> who has bound it here (or None)
    _next: dict[tuple[str, str], int] = field(default_factory=dict)
    _given: dict[tuple[str, str, str], int] = field(default_factory=dict)
    _used: set[tuple[str, int]] = field(default_factory=set)        # (slot, port) handed out, whatever the kind
    handed: list[tuple[str, str, int]] = field(default_factory=list)  # (kind, host, port) of every port handed out

    def take(self, kind: str, host: str, count: int = 1, key: str = "") -> int:
        """The first of ``count`` consecutive ports of ``kind`` on ``host``. With ``key``, the same key gets the
        same port again (a worker's master port, shared by all its nodes)."""
        if key and (kind, host, key) in self._given:
            return self._given[(kind, host, key)]
        slot = "shared" if self.probe else host       # one machine: every "host" is the same ports
        pinned = kind in self.bases and (kind, slot) not in self._next
        first = self.bases[kind] if kind in self.bases else BASES[kind] + self.offset
        port = self._next.get((kind, slot), first)
        while not self._usable(slot, port, count, strict=not pinned):
            if pinned:
                who = "another process of this plan" if (slot, port) in self._used else self.holder(port)
                raise PortTaken(f"port {port} ({kind}, pinned by the recipe) is taken on this machine by "
                                f"{who}: stop it, or pin another port")
            port += 1
            if port - first > SPAN * 20:
                raise RuntimeError(f"no free {kind} port near {first} on this machine")
        self._next[(kind, slot)] = port + count
        self._used.update((slot, p) for p in range(port, port + count))
        self.handed += [(kind, host, p) for p in range(port, port + count)]
        if key:
            self._given[(kind, host, key)] = port
        return port

    def _usable(self, slot: str, port: int, count: int, strict: bool = True) -> bool:
        block = range(port, port + count)
        if any((slot, p) in self._used for p in block):
            return False
        if not self.probe:
            return True
        if not all(port_free(p, strict) for p in block):
            return False
        if self.lease is None:
            return True
        taken = []
        for p in block:
            if not self.lease.take(p):
                for q in taken:
                    self.lease.drop(q)
                return False
            taken.append(p)
        return True

    def holder(self, port: int) -> str:
        """Who has ``port`` here: another session's lease, else the process bound to it (``describe``)."""
        held = self.lease.holder_of(port) if self.lease is not None else None
        found = self.describe(port) if held is None and self.describe is not None else None
        return held or found or "a process this session cannot see"

    def given(self) -> dict[str, int]:
        """Every keyed port handed out, as ``kind:host:key`` -> port (what a plan records)."""
        return {f"{k}:{h}:{key}": p for (k, h, key), p in self._given.items()}


def offset_for(shares_host: bool, xdist_worker: str | None = None, job_id: str | None = None) -> int:
    """Where a session's ports start: on a shared host each pytest-xdist worker searches a block of its own (the
    lease keeps sessions apart); on a cluster's nodes, a block chosen by the job's id."""
    if not shares_host:
        return JOB_BLOCK * (int(job_id) % JOB_BLOCKS) if job_id and str(job_id).isdigit() else 0
    if not xdist_worker or not xdist_worker.startswith("gw"):
        return 0
    return XDIST_BLOCK * int(xdist_worker[2:] or 0)
