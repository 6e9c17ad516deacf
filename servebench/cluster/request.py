"""From a profile to the allocation it needs (nodes, GPUs, partition, directives, container)."""

from __future__ import annotations

from pathlib import Path

from ..profile import Profile
from .base import AllocationRequest


def request_for(profile: Profile, run_id: str, results_dir: Path | str) -> AllocationRequest:
    r, cl = profile.recipe, profile.cluster
    return AllocationRequest(
        name=f"servebench-{run_id}-{profile.name}",
        nodes=r.resources.total_nodes,
        gpus_per_node=r.resources.gpus_per_node,
        partition=r.slurm.partition or cl.slurm.partition,
        account=r.slurm.account or cl.slurm.account,
        time_limit=r.slurm.time_limit,
        directives=dict(r.sbatch_directives),
        srun_options=dict(r.srun_options),
        container_image=r.model.container if cl.slurm.pyxis else None,
        container_mounts={**model_argument(profile)[1], **r.container_mounts} if cl.slurm.pyxis else {},
        workdir=Path(results_dir) / profile.id,
    )


def model_argument(profile: Profile, model_dir: str | None = None) -> tuple[str, dict[str, str]]:
    """The --model value the processes see, and the container mounts it needs (pyxis: host dir -> /model)."""
    cl, alias = profile.cluster, profile.recipe.model.path
    host = model_dir or cl.runtime.model_paths.get(alias) or alias
    if cl.slurm.pyxis and profile.recipe.model.container:
        return cl.runtime.container_model_dir, {host: cl.runtime.container_model_dir}
    return host, {}
