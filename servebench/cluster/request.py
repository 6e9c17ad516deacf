"""From a profile to the allocation it needs (nodes, GPUs, partition, directives, container)."""

from __future__ import annotations

from pathlib import Path

from ..profile import Profile
from .base import AllocationRequest

CONTAINER_CONFIGS = "/configs"     # srt-slurm mounts the recipes' configs/ folder here in the container
TOOLS_IN_CONTAINER = "/servebench-tools"   # servebench/tools (preflight) inside the container


def configs_dir(profile: Profile) -> Path:
    """srt-slurm's configs folder (setup scripts) beside the recipes: <recipes>/configs."""
    root = Path(profile.layers.file).resolve().parent
    while root.parent != root and not (root / "clusters").is_dir():
        root = root.parent
    return root / "configs"


def request_for(profile: Profile, run_id: str, results_dir: Path | str) -> AllocationRequest:
    r, cl = profile.recipe, profile.cluster
    mounts = {}
    if cl.slurm.pyxis:
        mounts = {**model_argument(profile)[1], str(configs_dir(profile)): CONTAINER_CONFIGS,
                  str(Path(__file__).resolve().parent.parent / "tools"): TOOLS_IN_CONTAINER, **r.container_mounts}
    return AllocationRequest(
        name=f"servebench-{run_id}-{profile.name}",
        nodes=r.resources.total_nodes,
        gpus_per_node=r.resources.gpus_per_node,
        partition=r.slurm.partition or cl.slurm.partition,
        account=r.slurm.account or cl.slurm.account,
        time_limit=r.slurm.time_limit,
        directives={k: v for k, v in r.sbatch_directives.items() if k not in cl.slurm.drop},
        srun_options={k: v for k, v in r.srun_options.items() if k not in cl.slurm.drop},
        container_image=r.model.container if cl.slurm.pyxis else None,
        container_mounts=mounts,
        workdir=Path(results_dir) / profile.id,
        stop_grace_s=profile.spec.stop_grace_s,
    )


def model_argument(profile: Profile, model_dir: str | None = None) -> tuple[str, dict[str, str]]:
    """The --model value the processes see, and the container mounts it needs (pyxis: host dir -> /model)."""
    cl, alias = profile.cluster, profile.recipe.model.path
    host = model_dir or cl.runtime.model_paths.get(alias) or alias
    if cl.slurm.pyxis and profile.recipe.model.container:
        return cl.runtime.container_model_dir, {host: cl.runtime.container_model_dir}
    return host, {}
