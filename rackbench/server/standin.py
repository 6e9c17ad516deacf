"""What a first run reads before the weights, staged on a stand-in cluster's node-local disks (``slurm.node_local``)
for a rehearsal: ``rackbench rehearse``.

``rackbench/data/standin/<name>/`` holds, per folder a recipe mounts into its containers (by the folder's name), a
stand-in of the files the launch touches before any weight loads: for Kimi K3, a remote-code tokenizer whose module
imports its sibling modules (what the client's offline tokenizer copy must carry) and the model's config; for its
DSpark draft, the checkpoint config the setup script maps. No weights: nothing here can serve.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path, PurePosixPath

from rackbench.cluster.request import container_mounts
from rackbench.cluster.srun import node_disks
from rackbench.recipe.profile import Profile

DATA = Path(str(resources.files("rackbench").joinpath("data/standin")))


def on_node(profile: Profile, path: str, node: str) -> Path | None:
    """Where ``path`` (as the node's steps see it) is on this host for ``node``: under one of the cluster's
    node-local disks, else None (not a stand-in's node disk)."""
    for disk, backing in node_disks(profile.cluster.slurm.node_local, node).items():
        if PurePosixPath(path).is_relative_to(disk):
            return Path(backing) / PurePosixPath(path).relative_to(disk)
    return None


def stageable(profile: Profile) -> list[str]:
    """The container mount sources of the profile that have a stand-in and lie on a node-local disk."""
    sources = container_mounts(profile, True)
    return [src for src in sources if (DATA / PurePosixPath(src).name).is_dir()
            and on_node(profile, src, "n") is not None]


def stage(profile: Profile, nodes: list[str]) -> list[Path]:
    """Copy each stand-in to every node's disk where the folder is missing; the folders made (to remove after)."""
    made = []
    for src in stageable(profile):
        for node in nodes:
            target = on_node(profile, src, node)
            if target is not None and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copytree(DATA / PurePosixPath(src).name, target)
                made.append(target)
    return made


def remove(made: list[Path]) -> None:
    for path in made:
        shutil.rmtree(path, ignore_errors=True)
