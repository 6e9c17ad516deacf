"""The card a point ran on, against the card its cluster file names.

A one-GPU cluster file (``local-h200``) serves on H100 and H200 machines alike, and a lent machine is not always the
card asked for: a point run on an H100 was labelled h200 in its case id, ``gpu_type`` and every report, while its
own machine record said H100 (#56). The result keeps the card nvidia-smi names (``identity.card``) and, where the
record contradicts the cluster file (the GPU model, the count per node, the memory per GPU), each contradiction
(``identity.card_differs``); reports label such a point with the card it really ran on.
"""

from __future__ import annotations

MEMORY_TOLERANCE = 0.10       # nvidia-smi's total against the cluster file's hbm_gib_per_gpu (usable vs marketed)


def _squash(text: str) -> str:
    return "".join(c for c in text.lower() if c.isalnum())


def card(nodes: list) -> str | None:
    """The GPU model the point ran on (the first node's first GPU, as nvidia-smi names it); None without GPUs."""
    return next((g.name for n in nodes for g in n.gpus), None)


def contradictions(gpu_type: str, gpus_per_node: int, hbm_gib: float, nodes: list) -> list[str]:
    """How the machine record (rackbench.results.parts.NodeRecord per node) contradicts the cluster file: one phrase
    per node and kind (pure). Nodes without GPUs (a CPU cluster) contradict nothing."""
    out = []
    for n in nodes:
        if not n.gpus:
            continue
        names = sorted({g.name for g in n.gpus})
        if not all(_squash(gpu_type) in _squash(name) for name in names):
            out.append(f"{n.node}: its GPUs are {', '.join(names)}, not the cluster file's gpu_type {gpu_type}")
        if len(n.gpus) < gpus_per_node:
            out.append(f"{n.node}: {len(n.gpus)} GPU(s), the cluster file says {gpus_per_node} per node")
        sizes = sorted({round(g.memory_mib / 1024) for g in n.gpus if g.memory_mib})
        if sizes and any(abs(s - hbm_gib) > MEMORY_TOLERANCE * hbm_gib for s in sizes):
            out.append(f"{n.node}: {'/'.join(map(str, sizes))} GiB per GPU, the cluster file says {hbm_gib:g} "
                       "(hbm_gib_per_gpu)")
    return out


def label(identity) -> str:
    """``gpu_type``, or the card the point really ran on where its record contradicts the cluster file."""
    if identity.card_differs:
        return f"{identity.card or 'another card'} (not the cluster file's {identity.gpu_type})"
    return identity.gpu_type
