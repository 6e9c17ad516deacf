"""What the login node can check without a node, and so before ``sbatch`` and the queue wait for the nodes: the
imported image files, the model's mapping, and what the profile's containers mount from the storage the login node
shares with the nodes (``slurm.login_sees``: the draft model, etcd's and NATS's binaries, the Hub cache). Also the
findings about a container mount source that a node lacks (enroot refuses the container), each with its fix."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from rackbench.catalog.container_rules import cache_sources
from rackbench.cluster.base import AllocationRequest
from rackbench.cluster.request import draft_dir, image_file, model_argument
from rackbench.recipe.profile import Profile
from rackbench.server import frontends, mounts
from rackbench.server.findings import Finding
from rackbench.server.placement import Placement, shared_cache

LOGIN = "login"


def before_sbatch(profile: Profile, request: AllocationRequest) -> list[Finding]:
    """What is missing that the login node can see, checked before any job is queued: an image file a step runs in,
    a container mount source on shared storage (each one would stop the job on its nodes)."""
    out = missing_images(profile, bool(request.container_image)) + unbuilt_dynamo(profile, request)
    shared = profile.cluster.slurm.login_sees
    infra = infra_files(profile, request.container_mounts)
    gone = [PurePosixPath(path) for path in [*request.container_mounts, *infra]
            if any(PurePosixPath(path).is_relative_to(folder) for folder in shared) and not Path(path).exists()]
    binaries = [path for path in gone if str(path) in infra]
    gone = [str(path) for path in gone if path in binaries or not any(b.is_relative_to(path) for b in binaries)]
    if gone:            # a folder that held etcd's or NATS's binary is said as those binaries, with their fix
        out += mount_findings(profile, {LOGIN: gone}, infra,
                              seen_from="the login node, which shares it with the nodes (slurm.login_sees)")
    return out


def unbuilt_dynamo(profile: Profile, request: AllocationRequest) -> list[Finding]:
    """A build from source that the shared cache does not hold yet (a Dynamo commit: GitHub, git and a Rust
    toolchain, which a GB200 node's vLLM image may lack; the frontend's own ``unbuilt``), which the job's first step
    would run while every node of the job waits. Said where the login node sees the cache."""
    cache = shared_cache(profile, request.workdir)       # the results folder's own, unless the cluster names one
    named = profile.cluster.runtime.client.cache
    if named and not any(PurePosixPath(cache).is_relative_to(f) for f in profile.cluster.slurm.login_sees):
        return []
    pending = frontends.of(profile.recipe.frontend.type).unbuilt(profile, cache, request.container_image)
    if pending is None:
        return []
    what, house, needs = pending
    return [Finding(LOGIN, None, "build", "build from source",
                    f"{what} is not built in the shared cache ({house}): the job's first step would build it on a "
                    f"node, which needs {needs} in the image, while every node of the job waits",
                    f"build it once before the job: rackbench stage {profile.id} --dynamo (a one-node srun step in "
                    "the recipe's image), or pin a released version (dynamo.version)")]


def login_findings(profile: Profile, where: Placement, dropped: tuple[str, ...] = ()) -> list[Finding]:
    """What the login node can tell without a node: the image the recipe wants vs what the cluster runs, and the
    recipe's job options the cluster does not apply (``dropped``: the allocation request's)."""
    out, cl, image = [], profile.cluster, profile.recipe.model.container
    if image and image.lower() != "none" and not where.containers:
        out.append(Finding(LOGIN, None, "image", "container image",
                           f"the recipe runs in {image}; cluster {cl.name} runs no containers, so every process "
                           f"runs in {where.python} instead (its versions are checked on the nodes)",
                           "run on a cluster with slurm.pyxis: true to check the image itself"))
    out += missing_images(profile, where.containers)
    if dropped:
        out.append(Finding(LOGIN, None, "image", "slurm options",
                           f"cluster {cl.name} does not apply the recipe's {', '.join('--' + k for k in dropped)} "
                           "(slurm.drop: options of the real cluster's nodes and image)",
                           "run on the cluster the recipe was written for to use them"))
    if not where.model.startswith("/"):
        out.append(unmapped_model(profile, where.model))
    return out


def missing_images(profile: Profile, containers: bool) -> list[Finding]:
    """An image file that a step runs in and that does not exist (a registry name is pulled in the step)."""
    cl, out = profile.cluster, []
    used = {name for name in (profile.recipe.model.container, cl.runtime.infra.image, cl.runtime.client.image)
            if name and name.lower() != "none"}
    for name in sorted(used if containers else ()):
        file, mapped = image_file(profile, name), name in cl.slurm.images
        if (mapped or file.startswith("/")) and not Path(file).is_file():
            out.append(Finding(
                LOGIN, None, "image", "imported image",
                f"{file}, " + (f"the import of {name} that every step runs in (slurm.images)" if mapped else
                               f"an image file a step runs in (clusters/{cl.name}.yaml)") + ", does not exist",
                f"import it once: rackbench stage {profile.id} --images (a one-node srun step: enroot import -o "
                f"{file} docker://{name})" if mapped else f"import it there once (enroot import -o {file} "
                "docker://IMAGE), or name the image and its file in slurm.images"))
    return out


def unmapped_model(profile: Profile, model: str) -> Finding:
    return Finding(LOGIN, None, "model", "model directory",
                   f"model.path {model!r} is no directory and cluster {profile.cluster.name} maps no path for it",
                   f"add runtime.model_paths.{model} to recipes/clusters/{profile.cluster.name}.yaml")


def infra_files(profile: Profile, container_mounts: dict[str, str]) -> tuple[str, ...]:
    """The host paths of etcd's and NATS's executables where the containers run them from a mount (gb200-nv: their
    release binaries on shared storage, as srtctl's setup leaves them; the vLLM image carries neither)."""
    rt = profile.cluster.runtime
    if rt.discovery != "etcd" or rt.infra.image:
        return ()
    found = (mounts.on_the_host(argv[0], container_mounts)
             for argv in (rt.infra.etcd, rt.infra.nats_server) if argv and argv[0].startswith("/"))
    return tuple(p for p in found if p)


def mount_findings(profile: Profile, absent: dict[str, list[str] | None], infra: tuple[str, ...] = (),
                   seen_from: str = "this node") -> list[Finding]:
    """One finding per container mount source a node lacks (enroot refuses the container), the model's own named as
    the model, etcd's and NATS's binaries as theirs, a cache folder as one to make; a node whose look did not
    answer is said too."""
    model = set(model_argument(profile, True)[1])
    draft, caches = draft_dir(profile), cache_sources(profile)
    steps = "here" if seen_from == "this node" else "on the nodes"
    out = []
    for node, paths in absent.items():
        if paths is None:
            out.append(Finding(node, None, "preflight", "container mounts", "the look at the mount sources did not "
                               "answer (its log: mounts*.log in the profile's logs)"))
        for path in [p for p in paths or [] if p in infra]:
            out.append(Finding(node, None, "infra", "etcd/NATS binary",
                               f"{path} does not exist on {seen_from}: the discovery step (etcd, NATS) cannot start, "
                               "and no worker registers",
                               "put the release binary for the nodes' architecture there (docs/clusters.md, "
                               "\"etcd and NATS\"), or set runtime.infra in "
                               f"recipes/clusters/{profile.cluster.name}.yaml"))
        for path in [p for p in paths or [] if p not in infra]:
            out.append(Finding(node, None, "model" if path in model else "mount", "container mount",
                               f"{path} does not exist on {seen_from}: enroot refuses to start a container that "
                               f"mounts it, so no step of the profile starts {steps} (etcd, NATS, frontend, workers, "
                               "client)",
                               "stage the model on every node (runtime.model_paths)" if path in model else
                               f"rackbench stage {profile.id} (it downloads the draft model there, from a machine "
                               "that reaches the Hub)" if draft and path == draft[1] else
                               f"rackbench stage {profile.id} (it makes the client's shared cache and stages the "
                               "corpus and tokenizer there)" if path == profile.cluster.runtime.client.cache else
                               f"make the cache folder once: mkdir -p {path} (empty to begin with; writable by every "
                               "user who shares it)" if path in caches else
                               f"stage {path} on every node, or drop the mount (runtime.container_mounts of "
                               f"recipes/clusters/{profile.cluster.name}.yaml, the recipe's container_mounts)"))
    return out
