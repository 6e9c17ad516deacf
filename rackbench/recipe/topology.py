"""Topology: which process runs on which node and owns which data-parallel ranks. Pure: no I/O, no addresses.

srt-slurm's aggregated vLLM launch, tabulated per layout (one process per node):

=================  =====================================================================  =======  ===========
layout             per node                                                               engines  registering
=================  =====================================================================  =======  ===========
single node        one process owning every DP rank                                       DP       1
TP (x PP) > node   rank 0 leads, ranks 1.. run ``--headless`` (``--master-addr/--nnodes``)  DP       1
DP, replica<=node  each node owns ``GPUs per node / (TP x PP)`` local DP ranks            DP       nodes
                   (``--data-parallel-size-local/--start-rank``, hybrid load balancing)
DP per_rank        srt-slurm's ``dp_launch_mode: per_rank``: one process per DP rank      DP       nodes
=================  =====================================================================  =======  ===========

``agg_workers`` > 1 repeats that per worker, each an independent engine group: a worker smaller than a node
takes a slice of its GPUs (several workers per node, each pinned to its own devices); a larger one spans
``GPUs / GPUs per node`` nodes of its own. Engines, registering processes and GPUs add up over the workers.

:mod:`rackbench.server.plan` renders a :class:`Topology` into argv for Dynamo or ``vllm serve``; the rules
check it offline. The flag sets below are the one definition of what the launcher owns.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

# Flags the launcher derives per node from the topology; a recipe may not set them (rule entrypoint-flags).
DERIVED_FLAGS = frozenset({
    "headless", "master-addr", "nnodes", "node-rank", "data-parallel-size-local", "data-parallel-start-rank",
    "data-parallel-address", "data-parallel-hybrid-lb", "data-parallel-rank", "host", "port", "model",
})
# Ports the launcher passes on every node; a recipe may choose them, and the launcher uses its value.
PORT_FLAGS = frozenset({"master-port", "data-parallel-rpc-port"})
# Everything the launcher writes itself (the recipe's served-model-name is honoured, then re-added).
LAUNCHER_FLAGS = DERIVED_FLAGS | PORT_FLAGS | {"served-model-name"}

Mode = Literal["single", "leader", "headless", "dp_hybrid", "dp_rank"]


@dataclass(frozen=True)
class NodeRole:
    rank: int                    # node rank
    mode: Mode
    dp_ranks: tuple[int, ...]    # DP ranks (engines) this node's process owns; () for a headless follower
    dp_start: int = 0            # dp_hybrid: first local rank
    worker: int = 0              # which independent worker (agg_workers) the process belongs to
    head: int = 0                # node rank of the worker's first node (master / DP address)
    worker_nodes: int = 1        # nodes the worker spans
    devices: tuple[int, ...] | None = None   # GPU indexes on the node, when the worker takes a slice of it

    @property
    def registers(self) -> bool:
        """Whether this process serves requests itself (a Dynamo ``generate`` instance, or vLLM's API)."""
        return self.mode != "headless"

    def host_devices(self, gpus_per_node: int) -> tuple[int, ...]:
        """GPU indexes on a host that stands in for several nodes (a local GPU cluster): node r owns GPUs
        r x gpus_per_node ..; a worker on a slice of its node takes its slice of those."""
        local = self.devices if self.devices is not None else range(gpus_per_node)
        return tuple(self.rank * gpus_per_node + d for d in local)


@dataclass(frozen=True)
class Topology:
    tp: int
    dp: int
    pp: int
    nodes: int
    gpus_per_node: int
    roles: tuple[NodeRole, ...]
    workers: int = 1

    @property
    def gpus(self) -> int:
        """GPUs of every worker together: what per-GPU throughput divides by."""
        return self.tp * self.dp * self.pp * self.workers

    @property
    def engines(self) -> int:
        return sum(len(r.dp_ranks) for r in self.roles)

    @property
    def registering(self) -> int:
        return sum(r.registers for r in self.roles)


def topology(*, tp: int, dp: int, pp: int, nodes: int, gpus_per_node: int, workers: int = 1,
             dp_given: bool = False, dp_launch_mode: str = "per_node") -> Topology:
    """The per-node roles of one aggregated deployment of ``workers`` independent workers. ``dp_given``: the
    recipe passes --data-parallel-size (vLLM then takes its DP code path even at DP 1)."""
    workers = max(workers, 1)
    if workers == 1:
        return Topology(tp, dp, pp, nodes, gpus_per_node, _one_worker(tp, dp, pp, nodes, gpus_per_node, dp_given,
                                                                        dp_launch_mode))
    per_worker = tp * dp * pp
    roles: list[NodeRole] = []
    if per_worker < gpus_per_node:                       # several workers share a node, each on its own GPUs
        slots = max(gpus_per_node // per_worker, 1)
        for w in range(workers):
            node, slot = divmod(w, slots)
            devices = tuple(range(slot * per_worker, (slot + 1) * per_worker))
            for r in _one_worker(tp, dp, pp, 1, per_worker, dp_given, dp_launch_mode):
                roles.append(replace(r, rank=node, worker=w, head=node, devices=devices))
    else:                                               # each worker spans whole nodes of its own
        span = max(per_worker // gpus_per_node, 1)
        for w in range(workers):
            for r in _one_worker(tp, dp, pp, span, gpus_per_node, dp_given, dp_launch_mode):
                roles.append(replace(r, rank=w * span + r.rank, worker=w, head=w * span, worker_nodes=span))
    return Topology(tp, dp, pp, nodes, gpus_per_node, tuple(roles), workers)


def _one_worker(tp: int, dp: int, pp: int, nodes: int, gpus_per_node: int, dp_given: bool,
                dp_launch_mode: str) -> tuple[NodeRole, ...]:
    replica = tp * pp
    dp_mode = dp > 1 or dp_given
    roles: list[NodeRole] = []
    for rank in range(max(nodes, 1)):
        if dp_mode and dp_launch_mode == "per_rank" and replica == gpus_per_node:
            roles.append(NodeRole(rank, "dp_rank", (rank,)))
        elif dp_mode and replica <= gpus_per_node:
            local = gpus_per_node // replica
            roles.append(NodeRole(rank, "dp_hybrid", tuple(range(rank * local, (rank + 1) * local)), rank * local))
        elif nodes > 1:
            roles.append(NodeRole(rank, "leader" if rank == 0 else "headless", tuple(range(dp)) if rank == 0 else ()))
        else:
            roles.append(NodeRole(rank, "single", tuple(range(dp))))
    return tuple(replace(r, worker_nodes=max(nodes, 1)) for r in roles)
