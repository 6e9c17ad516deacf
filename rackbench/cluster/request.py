"""From a profile to the allocation it needs (nodes, GPUs, partition, directives, container)."""

from __future__ import annotations

from pathlib import Path

from rackbench.cluster.base import AllocationRequest, Backend, SchedulerOptions
from rackbench.core.results_folder import ProfileFolder
from rackbench.recipe.profile import Profile
from rackbench.tools import FOLDER as TOOLS

CONTAINER_CONFIGS = "/configs"     # srt-slurm mounts the recipes' configs/ folder here in the container
TOOLS_IN_CONTAINER = "/rackbench-tools"   # rackbench/tools (preflight) inside the container
# Mounted read-only: setup scripts run as root in the container, and what they read must not be theirs to change.
READ_ONLY = (CONTAINER_CONFIGS, TOOLS_IN_CONTAINER)


def mount_option(mounts: dict[str, str]) -> str:
    """pyxis's ``--container-mounts`` value: ``SRC:DST`` each, ``:ro`` for the folders rackbench hands in to read."""
    return ",".join(f"{src}:{dst}" + (":ro" if dst in READ_ONLY else "") for src, dst in mounts.items())


def image_file(profile: Profile, image: str | None) -> str | None:
    """What a step's ``--container-image`` names for ``image`` (a recipe's, the infra's or the client's): the
    squashfs file the cluster imported it to (``slurm.images``), else the name itself (pyxis then pulls and imports
    it in that step)."""
    if image is None:
        return None
    return profile.cluster.slurm.images.get(image, image)


def configs_dir(profile: Profile) -> Path:
    """srt-slurm's configs folder (setup scripts) beside the recipes: <recipes>/configs."""
    root = Path(profile.layers.file).resolve().parent
    while root.parent != root and not (root / "clusters").is_dir():
        root = root.parent
    return root / "configs"


def container_mounts(profile: Profile, containers: bool, model_dir: str | None = None,
                     workdir: str | None = None, root: str = ".") -> dict[str, str]:
    """What a container of the profile sees (host path -> path inside): the model at /model, the recipes' configs/
    at /configs, rackbench's tools, the results folder and the client's shared cache at their own paths (the
    load generator writes there, the login side reads it), the cluster's own mounts (staged data: a draft model;
    a relative one is a folder of the repo, ``root``, seen at its own path: the stand-in's venvs), the recipe's."""
    if not containers:
        return {}
    base = Path(root).absolute()
    cluster_mounts = {str(base / src) if not src.startswith("/") else src:
                      str(base / dst) if not dst.startswith("/") else dst
                      for src, dst in profile.cluster.runtime.container_mounts.items()}
    shared = {}
    if workdir is not None:
        results = str(Path(workdir).absolute().parent)
        shared[results] = results
    cache = profile.cluster.runtime.client.cache
    if cache and cache.startswith("/"):
        shared[cache] = cache
    return {**model_argument(profile, containers, model_dir)[1], str(configs_dir(profile)): CONTAINER_CONFIGS,
            str(TOOLS): TOOLS_IN_CONTAINER, **shared, **cluster_mounts, **profile.recipe.container_mounts}


def draft_dir(profile: Profile) -> tuple[str, str] | None:
    """(the Hub repo, the folder on the nodes) of the profile's draft model, where the cluster file names one for it
    in runtime.model_paths (keyed by the model's draft_model name; `rackbench stage` downloads it there)."""
    draft = profile.model.draft_model if profile.model is not None else None
    folder = profile.cluster.runtime.model_paths.get(draft.name) if draft is not None else None
    return (draft.name, folder) if folder else None


def request_for(profile: Profile, backend: Backend, run_id: str, folder: ProfileFolder,
                part: int | None = None, root: str = ".") -> AllocationRequest:
    r, cl = profile.recipe, profile.cluster
    mounts = container_mounts(profile, backend.containers, workdir=str(folder.root), root=root)
    return AllocationRequest(
        name=f"rackbench-{run_id}-{profile.name}" + (f"-{part}" if part is not None else ""),
        nodes=r.resources.total_nodes,
        gpus_per_node=r.resources.gpus_per_node,
        time_limit=r.slurm.time_limit,
        scheduler=SchedulerOptions(
            partition=r.slurm.partition or cl.slurm.partition, account=r.slurm.account or cl.slurm.account,
            directives={k: v for k, v in r.sbatch_directives.items() if k not in cl.slurm.drop},
            step_options={k: v for k, v in r.srun_options.items() if k not in cl.slurm.drop}),
        container_image=image_file(profile, r.model.container) if backend.containers else None,
        container_mounts=mounts,
        # the recipe's Dynamo install pip-installs into the image (srtctl's dynamo.install): its root must be writable
        container_writable=backend.containers and r.dynamo.install and cl.runtime.dynamo_install,
        workdir=Path(folder.root),
        stop_grace_s=profile.spec.stop_grace_s,
        dropped=tuple(k for k in (*r.sbatch_directives, *r.srun_options) if k in cl.slurm.drop),
    )


def model_argument(profile: Profile, containers: bool, model_dir: str | None = None) -> tuple[str, dict[str, str]]:
    """The --model value the processes see, and the container mounts it needs (a container: host dir -> /model).
    ``hf:org/name`` is the repo id org/name, as srtctl reads it (a staged copy is used where the cluster maps one)."""
    cl, alias = profile.cluster, profile.recipe.model.path.removeprefix("hf:")
    host = model_dir or cl.runtime.model_paths.get(alias) or alias
    if not host.startswith("/"):             # a repo id the engine resolves itself: nothing to mount
        return host, {}
    if containers and profile.recipe.model.container:
        return cl.runtime.container_model_dir, {host: cl.runtime.container_model_dir}
    return host, {}
