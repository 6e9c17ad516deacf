"""Every port a deployment uses, handed out by one allocator per deployment, by kind and by host (as srt-slurm's
``NodePortAllocator``): two processes on one host never get the same port, whether they are two workers of one
node or every node of a host that stands in for several. Nothing else adds offsets to base ports.

Where the nodes are this machine (a local cluster, or tests next to each other), the allocator also skips ports
something here already listens on, and each pytest-xdist worker starts its search in a block of its own.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

# kind -> first port of its range on each host (the ranges leave room for many processes per host)
BASES = {
    "frontend": 8000,         # the OpenAI-compatible API (Dynamo's frontend, or vLLM's API server)
    "system": 18081,          # a Dynamo worker's system server: /health, /metrics
    "kv_events": 20080,       # vLLM's KV-event publisher (+ the global DP rank: vLLM adds it itself)
    "dp_rpc": 13345,          # vLLM's data-parallel RPC (on the worker's head node)
    "master": 29500,          # torch.distributed of a multi-node worker (on its head node)
    "etcd": 2379,
    "etcd_peer": 2380,
    "nats": 4222,
}
SPAN = 50                     # ports of one kind per host before the next kind's range would be reached
XDIST_BLOCK = 1000            # each pytest-xdist worker searches its own block of ports on a shared host


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether nothing listens on ``port`` here (binding it succeeds as a server binds it: SO_REUSEADDR, so the
    TIME_WAIT left by an earlier check's connection does not count as in use)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


@dataclass
class PortAllocator:
    """``take(kind, host)`` gives the next port of ``kind`` on ``host``. ``probe``: the hosts are this machine, so a
    port in use here is skipped; ``offset`` shifts every range (one block per xdist worker)."""

    probe: bool = False
    offset: int = 0
    bases: dict[str, int] = field(default_factory=dict)     # a recipe's own choice of a kind's first port
    _next: dict[tuple[str, str], int] = field(default_factory=dict)
    _given: dict[tuple[str, str, str], int] = field(default_factory=dict)
    _used: set[tuple[str, int]] = field(default_factory=set)        # (slot, port) handed out, whatever the kind

    def take(self, kind: str, host: str, count: int = 1, key: str = "") -> int:
        """The first of ``count`` consecutive ports of ``kind`` on ``host``. With ``key``, the same key gets the
        same port again (a worker's master port, shared by all its nodes)."""
        if key and (kind, host, key) in self._given:
            return self._given[(kind, host, key)]
        slot = "shared" if self.probe else host       # one machine: every "host" is the same ports
        first = self.bases.get(kind, BASES[kind]) + self.offset
        port = self._next.get((kind, slot), first)
        while any((slot, p) in self._used or (self.probe and not port_free(p)) for p in range(port, port + count)):
            port += 1
            if port - first > SPAN * 20:
                raise RuntimeError(f"no free {kind} port near {first} on this machine")
        self._next[(kind, slot)] = port + count
        self._used.update((slot, p) for p in range(port, port + count))
        if key:
            self._given[(kind, host, key)] = port
        return port

    def given(self) -> dict[str, int]:
        """Every keyed port handed out, as ``kind:host:key`` -> port (what a plan records)."""
        return {f"{k}:{h}:{key}": p for (k, h, key), p in self._given.items()}


def offset_for(shares_host: bool, xdist_worker: str | None = None) -> int:
    """Where a session's ports start: on a shared host each pytest-xdist worker searches a block of its own."""
    if not shares_host or not xdist_worker or not xdist_worker.startswith("gw"):
        return 0
    return XDIST_BLOCK * int(xdist_worker[2:] or 0)
