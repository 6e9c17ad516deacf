"""Where a profile's processes run: one allocation per profile, processes on its nodes, always released.

``backend_for(cluster)`` picks the implementation named by the cluster description (``slurm`` or ``local``).
"""

from .base import Allocation, AllocationRequest, Backend, ClusterError, NodeProcess, ProcessDied, release_all


def backend_for(name: str) -> Backend:
    if name == "slurm":
        from .slurm import SlurmBackend
        return SlurmBackend()
    if name == "local":
        from .local import LocalBackend
        return LocalBackend()
    raise ValueError(f"unknown cluster backend {name!r}")


__all__ = ["Allocation", "AllocationRequest", "Backend", "ClusterError", "NodeProcess", "ProcessDied",
           "backend_for", "release_all"]
