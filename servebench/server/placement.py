"""Where a deployment runs: node names and addresses in rank order, ports, paths and environment as the nodes
see them. The same plan is placed on GB200 nodes, on local Slurm's virtual nodes, or on this machine.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from ..cluster.request import CONTAINER_CONFIGS, model_argument
from ..profile import Profile


# Run on the node before the server when the cluster file leaves an interface null: the interface of the
# default route becomes NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME unless already set. A fixed script; the server's
# argv follows as "$@", so no value is ever spliced into shell text.
DETECT_INTERFACES = (
    "sh", "-c",
    'i=$(awk \'$2 == "00000000" { print $1; exit }\' /proc/net/route); '
    ': "${NCCL_SOCKET_IFNAME:=$i}" "${GLOO_SOCKET_IFNAME:=$i}"; '
    'export NCCL_SOCKET_IFNAME GLOO_SOCKET_IFNAME; exec "$@"',
    "servebench-detect-ifname",
)


@dataclass(frozen=True)
class Ports:
    """Base ports; a per-node port adds the node rank, so ranks sharing one host never collide."""

    frontend: int = 8000
    system: int = 18081          # Dynamo worker system server (/health, /metrics): + node rank
    dp_rpc: int = 13345
    master: int = 29500
    kv_events: int = 20080       # + node rank
    etcd: int = 2379
    nats: int = 4222

    def shifted(self, offset: int) -> "Ports":
        return Ports(**{k: v + offset for k, v in self.__dict__.items()})


@dataclass(frozen=True)
class Placement:
    """Where a deployment runs: node names and addresses in rank order, ports, and paths as the nodes see them."""

    nodes: tuple[str, ...]
    addresses: tuple[str, ...]
    model: str                   # --model argument
    workdir: str                 # per-profile directory shared by the nodes (logs, discovery store)
    python: str = "python3"
    vllm_serve: tuple[str, ...] = ("vllm", "serve")
    ports: Ports = Ports()
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

    @property
    def head(self) -> str:
        return self.addresses[0]


def placement_for(profile: Profile, nodes: list[str], addresses: list[str], workdir: str, *,
                  root: str = ".", model_dir: str | None = None, ports: Ports = Ports(), job_id: str = "JOB",
                  configs: str | None = None) -> Placement:
    """A placement from the cluster description; relative interpreter paths are taken from ``root`` (the repo).
    ``configs``: the recipes' configs/ folder (setup scripts); with pyxis it is mounted at /configs."""
    rt = profile.cluster.runtime
    if profile.cluster.slurm.pyxis and profile.recipe.model.container:
        configs = CONTAINER_CONFIGS

    def local_path(arg: str) -> str:
        return f"{root.rstrip('/')}/{arg}" if arg.startswith(".") and "/" in arg else arg

    net = profile.cluster.network
    return Placement(
        nodes=tuple(nodes), addresses=tuple(addresses), model=model_argument(profile, model_dir)[0],
        workdir=workdir, python=local_path(rt.python), vllm_serve=tuple(local_path(a) for a in rt.vllm_serve),
        ports=ports, environment=dict(rt.environment), discovery=rt.discovery,
        node_environment=tuple(dict(e) for e in rt.node_environment),
        interfaces=(net.nccl_socket_ifname, net.gloo_socket_ifname), job_id=job_id,
        configs=configs or "configs", dynamo_install=rt.dynamo_install,
        etcd=tuple(local_path(a) for a in rt.infra.etcd),
        nats_server=tuple(local_path(a) for a in rt.infra.nats_server), infra_image=rt.infra.image)


def dry_placement(profile: Profile) -> Placement:
    """Placeholder node names for rendering without an allocation."""
    from ..models import GENERATED, cached_path   # the generated model's cache path (no generation here)

    n = profile.recipe.resources.total_nodes
    alias = profile.recipe.model.path
    model_dir = str(cached_path(alias)) if alias in GENERATED else None
    if profile.cluster.backend == "local":
        names = [f"local{i}" for i in range(n)]
        return placement_for(profile, names, ["127.0.0.1"] * n, f"results/{profile.id}", model_dir=model_dir)
    names = [f"node{i}" for i in range(n)]
    return placement_for(profile, names, names, f"results/{profile.id}", model_dir=model_dir)


def free_ports(nodes: int, start: int = 0) -> Ports:
    """A Ports block (offset by multiples of 50 from ``start``) where nothing on this host listens."""
    for step in range(start, start + 1000, 50):
        ports = Ports().shifted(step)
        wanted = [ports.frontend, ports.dp_rpc, ports.master, ports.etcd, ports.etcd + 1, ports.nats,
                  *(ports.system + r for r in range(nodes)), *(ports.kv_events + r for r in range(nodes))]
        try:
            for port in wanted:
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return ports
    raise RuntimeError(f"no free block of ports from offset {start}")
