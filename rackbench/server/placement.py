"""Where a deployment runs: node names and addresses in rank order, paths and environment as the nodes see them,
and the facts of the backend that holds the nodes (do they share this host, do processes run in containers).
The same plan is placed on GB200 nodes, on the local Slurm's virtual nodes, or on this machine.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from rackbench.cluster import Backend, backend_for
from rackbench.cluster.request import CONTAINER_CONFIGS, TOOLS_IN_CONTAINER, container_mounts, image_file, \
    model_argument
from rackbench.tools import FOLDER as TOOLS, PINS
from rackbench.core.results_folder import ProfileFolder, ResultsFolder
from rackbench.recipe.profile import Profile
from rackbench.server.steps import ClientSpec, Container

# Run on the node before the server when the cluster file leaves an interface null: the interface of the
# default route becomes NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME unless already set. A fixed script; the server's
# argv follows as "$@", so no value is ever spliced into shell text.
DETECT_INTERFACES = (
    "sh", "-c",
    'i=$(awk \'$2 == "00000000" { print $1; exit }\' /proc/net/route); '
    ': "${NCCL_SOCKET_IFNAME:=$i}" "${GLOO_SOCKET_IFNAME:=$i}"; '
    'export NCCL_SOCKET_IFNAME GLOO_SOCKET_IFNAME; exec "$@"',
    "rackbench-detect-ifname",
)


@dataclass(frozen=True)
class Placement:
    """Where a deployment runs: node names and addresses in rank order, and paths as the nodes see them."""

    nodes: tuple[str, ...]
    addresses: tuple[str, ...]
    model: str                   # --model argument
    workdir: str                 # the profile's folder as the nodes see it (logs, discovery store, infra state)
    python: str = "python3"
    vllm_serve: tuple[str, ...] = ("vllm", "serve")
    environment: dict[str, str | None] = field(default_factory=dict)   # cluster-wide, None = unset
    node_environment: tuple[dict[str, str], ...] = ()                  # per node rank, workers only
    discovery: str = "etcd"
    interfaces: tuple[str | None, str | None] = (None, None)           # NCCL, Gloo (None = detect)
    job_id: str = "JOB"                                                # {job_id} in templates
    configs: str = "configs"     # srt-slurm's configs folder (setup scripts) as the nodes see it
    dynamo_install: bool = True  # run the recipe's dynamo.install (false: the environment carries Dynamo)
    etcd: tuple[str, ...] = ("etcd",)
    nats_server: tuple[str, ...] = ("nats-server",)
    infra_image: str | None = None
    shares_host: bool = False    # the backend's fact: every node is this machine (ports probed, GPUs split)
    containers: bool = False     # the backend's fact: processes run in the recipe's image (pyxis)
    probe_ports: bool = False    # skip ports in use here (a shared host, not a dry run)
    port_offset: int = 0         # where this session's ports start on a shared host (one block per xdist worker)
    gpu_cluster: bool = False
    image: str | None = None     # the container every process runs in (None: the node's own filesystem)
    mounts: tuple[tuple[str, str], ...] = ()   # what that container sees (host -> inside)
    tools: str = str(TOOLS)      # rackbench/tools as the nodes see it (tools/preamble.py, preflight)
    client: ClientSpec | None = None   # where the load generator runs, and with what (cluster runtime.client)

    @property
    def head(self) -> str:
        return self.addresses[0]

    @property
    def folder(self) -> ProfileFolder:
        """The profile's folder as the nodes see it (never resolved on this host)."""
        return ProfileFolder(PurePosixPath(self.workdir))


def placement_for(profile: Profile, nodes: list[str], addresses: list[str], workdir: str, *,
                  backend: Backend | None = None, root: str = ".", model_dir: str | None = None, job_id: str = "JOB", configs: str | None = None,
                  port_offset: int = 0, shares_host: bool = False, probe_ports: bool = False) -> Placement:
    """A placement from the cluster description; relative interpreter paths are taken from ``root`` (the repo).
    ``configs``: the recipes' configs/ folder (setup scripts); in a container it is mounted at /configs."""
    backend = backend or backend_for(profile.cluster)
    rt = profile.cluster.runtime
    in_image = backend.containers and bool(profile.recipe.model.container)
    if in_image:
        configs = CONTAINER_CONFIGS

    def local_path(arg: str) -> str:
        return f"{root.rstrip('/')}/{arg}" if arg.startswith(".") and "/" in arg else arg

    net = profile.cluster.network
    model = model_argument(profile, backend.containers, model_dir)[0]
    image = image_file(profile, profile.recipe.model.container) if in_image else None
    mounts = tuple(container_mounts(profile, backend.containers, model_dir, workdir, root).items()) if in_image else ()
    client_image = image_file(profile, rt.client.image) or image
    client = client_for(profile, nodes[0], workdir, local_path, model, model_dir,
                        Container(client_image, mounts) if client_image else Container(),
                        TOOLS_IN_CONTAINER if in_image else str(TOOLS))
    return Placement(
        nodes=tuple(nodes), addresses=tuple(addresses),
        model=model,
        workdir=workdir, python=local_path(rt.python), vllm_serve=tuple(local_path(a) for a in rt.vllm_serve),
        environment=dict(rt.environment), discovery=rt.discovery,
        node_environment=tuple(dict(e) for e in rt.node_environment),
        interfaces=(net.nccl_socket_ifname, net.gloo_socket_ifname), job_id=job_id,
        configs=configs or "configs", dynamo_install=rt.dynamo_install,
        etcd=tuple(local_path(a) for a in rt.infra.etcd),
        nats_server=tuple(local_path(a) for a in rt.infra.nats_server), infra_image=image_file(profile, rt.infra.image),
        shares_host=shares_host, containers=backend.containers, port_offset=port_offset,
        probe_ports=probe_ports, gpu_cluster=profile.cluster.kind == "gpu",
        image=image, mounts=mounts, tools=TOOLS_IN_CONTAINER if in_image else str(TOOLS), client=client)


def client_for(profile: Profile, head: str, workdir: str, local_path, node_model: str, model_dir: str | None,
               container: Container, node_tools: str) -> ClientSpec:
    """Where the load generator runs (cluster ``runtime.client``), with every path as it sees it: on the head node
    the model is the servers' (``--model``, /model in a container); on the login host it is the path this host
    was given, which a node-local model directory is not (the tokenizer step then says so, before any point)."""
    c = profile.cluster.runtime.client
    cache = shared_cache(profile, workdir)
    executable = tuple(local_path(a) for a in c.executable) if c.executable else None
    if c.placement == "login":
        alias = profile.recipe.model.path.removeprefix("hf:")
        model = model_dir or profile.cluster.runtime.model_paths.get(alias) or alias
        return ClientSpec("login", "login", local_path(c.python), str(TOOLS), executable, cache, c.tmpdir,
                          model if model.startswith("/") else None)
    tools = node_tools if container.image else str(TOOLS)
    image = image_file(profile, c.image)
    constraints = env_dir = None
    if c.install and c.constraints:
        constraints = f"{tools.rstrip('/')}/pins/{c.constraints}"
        env_dir = client_env_dir(cache, c.install, (PINS / c.constraints).read_text(), image or container.image)
    return ClientSpec("head", head, local_path(c.python), tools, executable, cache, c.tmpdir,
                      node_model if node_model.startswith("/") else None, container, image, tuple(c.install),
                      constraints=constraints, env_dir=env_dir)


def shared_cache(profile: Profile, workdir) -> str:
    """The cache every run of the results folder shares (the client's environment, the staged corpus, the Dynamo
    wheelhouse), the one `rackbench stage` fills, never a per-run one: the cluster's runtime.client.cache, else the
    results folder's .hf-cache (``workdir``: the profile's folder in it)."""
    return profile.cluster.runtime.client.cache or str(ResultsFolder.at(PurePosixPath(workdir).parent).hf_cache)


def client_env_dir(cache: str, install, pins: str, image: str | None) -> str:
    """The client's environment in the shared cache, named after what makes it (requirements, pins, image)."""
    return made_dir(cache, "envs", install, pins, image)


def dynamo_wheelhouse(cache: str, requirements, image: str | None) -> str:
    """The pinned Dynamo's wheelhouse in the shared cache (tools/dynamo_env.py), named after its requirements and
    the image: built once per source commit and image, whoever asks first."""
    return made_dir(cache, "dynamo", requirements, image)


def made_dir(cache: str, kind: str, requirements, *inputs) -> str:
    """A folder of the shared cache named after what makes it: a change of any input makes a new one beside the
    old, and the same inputs find the one made before."""
    digest = hashlib.sha256(json.dumps([list(requirements), *inputs]).encode()).hexdigest()[:12]
    first = requirements[0].split(" @ ")[0].rsplit("/", 1)[-1]          # a name, never a URL or a wheel's folder
    name = re.sub(r"[^A-Za-z0-9.]+", "-", first).strip("-")[:60]
    return f"{cache.rstrip('/')}/{kind}/{name}-{digest}"
