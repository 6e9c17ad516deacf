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

:mod:`servebench.server.plan` renders a :class:`Topology` into argv for Dynamo or ``vllm serve``; the rules
check it offline. The flag sets below are the one definition of what the launcher owns.
"""

from __future__ import annotations

from dataclasses import dataclass
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

    @property
    def registers(self) -> bool:
        """Whether this process serves requests itself (a Dynamo ``generate`` instance, or vLLM's API)."""
        return self.mode != "headless"


@dataclass(frozen=True)
class Topology:
    tp: int
    dp: int
    pp: int
    nodes: int
    gpus_per_node: int
    roles: tuple[NodeRole, ...]

    @property
    def replica_gpus(self) -> int:
        return self.tp * self.pp

    @property
    def gpus(self) -> int:
        return self.tp * self.dp * self.pp

    @property
    def engines(self) -> int:
        return sum(len(r.dp_ranks) for r in self.roles)

    @property
    def registering(self) -> int:
        return sum(r.registers for r in self.roles)

    @property
    def multinode_engine(self) -> bool:
        return any(r.mode in ("leader", "headless") for r in self.roles)

    def table(self) -> list[str]:
        return [f"node {r.rank}: {r.mode}, DP ranks {list(r.dp_ranks)}" for r in self.roles]


def topology(*, tp: int, dp: int, pp: int, nodes: int, gpus_per_node: int, dp_given: bool = False,
             dp_launch_mode: str = "per_node") -> Topology:
    """The per-node roles of one aggregated deployment. ``dp_given``: the recipe passes --data-parallel-size
    (vLLM then takes its DP code path even at DP 1)."""
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
    return Topology(tp, dp, pp, nodes, gpus_per_node, tuple(roles))
