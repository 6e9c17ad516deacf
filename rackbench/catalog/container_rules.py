"""The rules about what a process sees inside its container on a pyxis cluster. Part of
:data:`rackbench.catalog.rules.RULES`.

enroot's root filesystem is read-only unless a step asks for a writable one, and a writable one is the step's own
overlay, gone when the step ends; its ``/tmp`` is a tmpfs of the container's own (enroot's ``10-system.fstab``). So a
cache folder that an environment variable points at must be a mounted folder to be written and kept: a Hub cache at a
path nothing mounts fails a download with EROFS, or downloads again in every step.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Iterator

from rackbench.core.errors import Problem
from rackbench.recipe.profile import Profile

# The variables that name a folder a library writes its downloads or builds into (Hugging Face Hub, transformers,
# vLLM's own cache, Triton's and torch's compile caches)
CACHE_VARIABLES = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE", "VLLM_CACHE_ROOT",
                   "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "XDG_CACHE_HOME")
# Writable in every enroot container, for the step's life
CONTAINER_TMP = "/tmp"


def mount_targets(p: Profile) -> list[str]:
    """The container paths the cluster file and the recipe mount (absolute ones: a relative target is a folder of
    the repo at its own path)."""
    targets = [*p.cluster.runtime.container_mounts.values(), *p.recipe.container_mounts.values()]
    return [t for t in targets if t.startswith("/")]


def cache_values(p: Profile) -> list[tuple[list[str], str, str]]:
    """(key path, folder, "recipe" or "cluster") of every cache variable the recipe's or the cluster file's
    environment sets to a path inside the container."""
    cluster_env = [(["runtime", "environment", k], v, "cluster") for k, v in p.cluster.runtime.environment.items()]
    recipe_env = [([*path.split("."), k], v, "recipe") for path, env in p.recipe.environments().items()
                  for k, v in env.items()]
    return [(path, value, where) for path, value, where in recipe_env + cluster_env
            if path[-1] in CACHE_VARIABLES and isinstance(value, str) and value.startswith("/")]


def cache_sources(p: Profile) -> set[str]:
    """The host folders of the cluster's and the recipe's mounts that hold a cache folder (the Hub cache)."""
    declared = {**p.cluster.runtime.container_mounts, **p.recipe.container_mounts}
    values = [PurePosixPath(value) for _, value, _ in cache_values(p)]
    return {src for src, dst in declared.items() if dst.startswith("/") and any(v.is_relative_to(dst) for v in values)}


def unmounted_caches(p: Profile) -> Iterator[Problem]:
    """Catches a cache variable (``HF_HUB_CACHE`` and the like, in an environment block of the recipe or the
    cluster file) pointing inside the container at a folder that no mount provides, where the cluster runs the
    recipe in containers."""
    if not (p.cluster.slurm.pyxis and p.recipe.model.container):
        return
    targets = mount_targets(p)
    for path, value, where in cache_values(p):
        if any(PurePosixPath(value).is_relative_to(folder) for folder in (CONTAINER_TMP, *targets)):
            continue
        message = (f"{path[-1]}={value} inside the container, but no mount of cluster {p.cluster.name} or of the "
                   "recipe provides it: enroot's root is read-only (a download there fails with EROFS) or, written "
                   "with --container-writable, lost when the step ends")
        fix = (f"mount a folder on shared storage there (runtime.container_mounts of recipes/clusters/"
               f"{p.cluster.name}.yaml: <shared folder>: {value}), or point it under {CONTAINER_TMP}")
        if where == "recipe":
            yield p.recipe_problem(path, message, fix)
        else:
            yield Problem(f"recipes/clusters/{p.cluster.name}.yaml", ".".join(path), message, fix)
