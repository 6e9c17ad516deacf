"""Where a profile's processes run: one allocation per profile, processes on its nodes, always released.

``backend_for(cluster)`` builds the backend a cluster file names (``backend: slurm``, ``local``, or a site's, found
through the ``rackbench.backends`` entry points: rackbench.core.entry_points).
"""

from rackbench.cluster.base import (Allocation, AllocationRequest, Backend, ClusterError, NodeProcess, ProcessDied,
                                     SchedulerOptions, release_all)
from rackbench.core import entry_points
from rackbench.recipe.schema.cluster import ClusterSpec


def backend_for(cluster: ClusterSpec) -> Backend:
    """The backend of ``cluster``, configured with it."""
    return entry_points.load(entry_points.BACKENDS, cluster.backend)(cluster)


__all__ = ["Allocation", "AllocationRequest", "Backend", "ClusterError", "NodeProcess", "ProcessDied",
           "SchedulerOptions", "backend_for", "release_all"]
