"""From a profile to the server processes of one deployment: what runs on which node, with which argv and env.

The layout follows srt-slurm's aggregated vLLM launch:

* **TP (x PP) across nodes**: one worker process per node; node rank 0 leads, the others run ``--headless``
  with ``--master-addr/--nnodes/--node-rank``. One engine.
* **DP with replicas inside a node** (DEP16 = TP4 x DP4 on 4 GPUs per node): one worker per node owning its
  local DP ranks (``--data-parallel-size-local``, ``--data-parallel-start-rank``, ``--data-parallel-address``,
  ``--data-parallel-rpc-port``, ``--data-parallel-hybrid-lb``), so every node registers with the frontend.
  One engine per DP rank, one metrics endpoint per worker process.
* **Frontend**: ``frontend.type: dynamo`` puts ``dynamo.frontend`` (with the recipe's router args) on the head
  node in front of ``dynamo.vllm`` workers; ``frontend.type: vllm`` is ``vllm serve`` whose rank-0 process is
  the API server.

Nothing here starts a process: the plan is data, rendered by ``servebench render`` and launched by
:mod:`servebench.server.deploy`. The same code plans GB200 and local deployments; only the
:class:`Placement` (node names, addresses, ports, interpreter) differs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..cluster.request import model_argument
from ..flags import Flags, canonical
from ..recipe import Profile

# Flags the launcher derives from the topology; a recipe value for them is replaced (srt-slurm does the same).
TOPOLOGY_FLAGS = frozenset({
    "headless", "master-addr", "master-port", "nnodes", "node-rank", "data-parallel-size-local",
    "data-parallel-start-rank", "data-parallel-address", "data-parallel-rpc-port", "data-parallel-hybrid-lb",
    "data-parallel-rank", "host", "port",
})


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

    @property
    def head(self) -> str:
        return self.addresses[0]


@dataclass(frozen=True)
class ProcSpec:
    rank: int                    # node rank the process runs on
    name: str                    # frontend | worker<r> | etcd | nats
    role: str                    # infra | frontend | worker | headless
    argv: tuple[str, ...]
    env: dict[str, str | None]


@dataclass(frozen=True)
class Engine:
    """One vLLM engine (DP rank) and where its Prometheus metrics are scraped."""

    dp_rank: int
    rank: int                    # node rank of the process that owns it
    metrics_url: str
    label: str                   # the engine="..." label vLLM puts on its series


@dataclass(frozen=True)
class ServerPlan:
    kind: str                    # dynamo | vllm
    model_name: str
    api_url: str                 # OpenAI-compatible base URL the load generator targets
    processes: tuple[ProcSpec, ...]
    engines: tuple[Engine, ...]
    health_urls: tuple[str, ...]  # per registering process (Dynamo worker system /health, or vLLM /health)
    expected_instances: int      # Dynamo: `generate` instances the frontend must list; vLLM: API servers

    @property
    def metrics_urls(self) -> list[str]:
        return list(dict.fromkeys(e.metrics_url for e in self.engines))

    def proc(self, name: str) -> ProcSpec:
        return next(p for p in self.processes if p.name == name)


def cli_args(flags: dict[str, Any]) -> list[str]:
    """Recipe flags -> argv: true -> --flag, false -> --no-flag, null dropped, mappings as JSON, lists spread."""
    argv: list[str] = []
    for key, value in flags.items():
        name = f"--{canonical(key)}"
        if value is None:
            continue
        if value is True:
            argv.append(name)
        elif value is False:
            argv.append(f"--no-{canonical(key)}")
        elif isinstance(value, dict):
            argv += [name, json.dumps(value, separators=(",", ":"))]
        elif isinstance(value, list):
            argv += [name, *(str(v) for v in value)]
        else:
            argv += [name, str(value)]
    return argv


def _without(flags: dict[str, Any], names: frozenset[str] | set[str]) -> dict[str, Any]:
    return {k: v for k, v in flags.items() if canonical(k) not in names}


def served_model_name(profile: Profile) -> str:
    flags = Flags(profile.recipe.aggregated_flags)
    return str(flags.get("served-model-name") or profile.recipe.model.path)


def plan(profile: Profile, where: Placement) -> ServerPlan:
    """The processes, engines and health endpoints of ``profile`` placed on ``where``."""
    r = profile.recipe
    flags = Flags(r.aggregated_flags)
    tp = flags.int("tensor-parallel-size", 1)
    pp = flags.int("pipeline-parallel-size", 1)
    dp = flags.int("data-parallel-size", 1)
    gpus_per_node = r.resources.gpus_per_node
    nnodes = r.resources.total_nodes
    if len(where.nodes) < nnodes:
        raise ValueError(f"{profile.id} needs {nnodes} nodes, placement has {len(where.nodes)}")
    replica = tp * pp
    name = served_model_name(profile)
    kind = "vllm" if r.frontend.type == "vllm" else "dynamo"
    common_env = {**where.environment, **r.environment}
    if kind == "dynamo":
        common_env.update(_dynamo_env(profile, where))
    base_env = {**common_env, **r.backend.aggregated_environment, **_network_env(where)}

    engine_flags = _without(r.aggregated_flags, TOPOLOGY_FLAGS | {"served-model-name", "model"})
    if r.backend.connector and r.backend.connector.lower() not in ("null", "none"):
        engine_flags = {**engine_flags, "kv-transfer-config": _connector_json(r.backend.connector)}
    procs: list[ProcSpec] = []
    engines: list[Engine] = []
    health: list[str] = []
    head = where.head
    dp_rpc = str(flags.int("data-parallel-rpc-port", where.ports.dp_rpc))
    master_port = str(flags.int("master-port", where.ports.master))
    dp_mode = dp > 1 or flags.has("data-parallel-size")

    for rank in range(nnodes):
        topo: list[str] = []
        headless = False
        if dp_mode and r.backend.dp_launch_mode == "per_rank" and replica == gpus_per_node:
            # srt-slurm's per_rank mode: one process per DP rank, each its own (externally balanced) engine.
            topo = ["--data-parallel-rank", str(rank), "--data-parallel-address", head,
                    "--data-parallel-rpc-port", dp_rpc]
            owned = range(rank, rank + 1)
        elif dp_mode and replica <= gpus_per_node:
            local = gpus_per_node // replica
            topo = ["--data-parallel-size-local", str(local), "--data-parallel-start-rank", str(rank * local),
                    "--data-parallel-address", head, "--data-parallel-rpc-port", dp_rpc,
                    "--data-parallel-hybrid-lb"]
            owned = range(rank * local, (rank + 1) * local)
        elif nnodes > 1:
            topo = ["--master-addr", head, "--master-port", master_port, "--nnodes", str(nnodes),
                    "--node-rank", str(rank)]
            if dp_mode:
                topo += ["--data-parallel-address", head, "--data-parallel-rpc-port", dp_rpc]
            headless = rank > 0
            if headless:
                topo.append("--headless")
            owned = range(dp) if rank == 0 else range(0)
        else:
            owned = range(dp)
        env = dict(base_env)
        if rank < len(where.node_environment):
            env.update(where.node_environment[rank])
        if kind == "dynamo":
            sysport = where.ports.system + rank
            argv = [where.python, "-m", "dynamo.vllm", "--model", where.model, "--served-model-name", name]
            if not headless:
                env["DYN_SYSTEM_PORT"] = str(sysport)
                kv = _kv_events(profile, where, rank)
                if kv:
                    argv += ["--kv-events-config", kv]
            argv += topo + cli_args(engine_flags)
            metrics = f"http://{where.addresses[rank]}:{sysport}/metrics"
            if not headless:
                health.append(f"http://{where.addresses[rank]}:{sysport}/health")
        else:
            argv = [*where.vllm_serve, "--model", where.model, "--served-model-name", name]
            if rank == 0:
                argv += ["--host", "0.0.0.0" if nnodes > 1 else head, "--port", str(where.ports.frontend)]
                health.append(f"http://{head}:{where.ports.frontend}/health")
            argv += topo + cli_args(engine_flags)
            metrics = f"http://{head}:{where.ports.frontend}/metrics"
        if nnodes > 1 and None in where.interfaces:
            argv = [*DETECT_INTERFACES, *argv]
        procs.append(ProcSpec(rank, f"worker{rank}", "headless" if headless else "worker", tuple(argv), env))
        engines += [Engine(d, rank, metrics, str(d)) for d in owned]

    if kind == "dynamo":
        front_env = {**common_env, **(r.frontend.env or {})}
        argv = [where.python, "-m", "dynamo.frontend", "--http-host", "0.0.0.0" if nnodes > 1 else head,
                "--http-port", str(where.ports.frontend), *_frontend_args(r.frontend.args or {})]
        procs.insert(0, ProcSpec(0, "frontend", "frontend", tuple(argv), front_env))
        if where.discovery == "etcd":
            procs[:0] = _infra(where)
        expected = sum(p.role == "worker" for p in procs)
    else:
        expected = 1
    return ServerPlan(kind, name, f"http://{head}:{where.ports.frontend}", tuple(procs), tuple(engines),
                      tuple(health), expected)


def _frontend_args(args: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key, value in args.items():
        if value is True:
            out.append(f"--{key}")
        elif value is not False and value is not None:
            out += [f"--{key}", str(value)]
    return out


def _connector_json(connector: str) -> dict | str:
    presets = {"nixl": {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
               "lmcache": {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}}
    return presets.get(connector.lower(), connector)


def _kv_events(profile: Profile, where: Placement, rank: int) -> str | None:
    """KV events for the KV router: vLLM's publisher must bind a wildcard endpoint, never a host address."""
    cfg = profile.recipe.backend.kv_events_config
    args = profile.recipe.frontend.args or {}
    if cfg is None and not (args.get("router-mode") == "kv" and args.get("router-kv-events", True)):
        return None
    if cfg is False:
        return None
    payload = {"enable_kv_cache_events": True, "publisher": "zmq"}
    if isinstance(cfg, dict):
        payload.update(cfg)
    payload["endpoint"] = f"tcp://*:{where.ports.kv_events + rank}"
    return json.dumps(payload, separators=(",", ":"))


def _dynamo_env(profile: Profile, where: Placement) -> dict[str, str]:
    d = profile.recipe.dynamo
    env = {"DYN_REQUEST_PLANE": d.request_plane}
    if d.event_plane:
        env["DYN_EVENT_PLANE"] = d.event_plane
    if where.discovery == "etcd":
        env.update({"ETCD_ENDPOINTS": f"http://{where.head}:{where.ports.etcd}",
                    "NATS_SERVER": f"nats://{where.head}:{where.ports.nats}"})
    else:
        env.update({"DYN_DISCOVERY_BACKEND": "file", "DYN_FILE_KV": f"{where.workdir}/dynamo-discovery"})
    return env


def _network_env(where: Placement) -> dict[str, str]:
    """NCCL/Gloo interfaces from the cluster description; unset ones are detected on the node at launch."""
    nccl, gloo = where.interfaces
    env = {}
    if nccl:
        env["NCCL_SOCKET_IFNAME"] = nccl
    if gloo:
        env["GLOO_SOCKET_IFNAME"] = gloo
    return env


def _infra(where: Placement) -> list[ProcSpec]:
    head, p = where.head, where.ports
    etcd = ["etcd", "--name", "servebench", "--data-dir", f"{where.workdir}/etcd",
            "--listen-client-urls", f"http://0.0.0.0:{p.etcd}", "--advertise-client-urls", f"http://{head}:{p.etcd}",
            "--listen-peer-urls", f"http://0.0.0.0:{p.etcd + 1}",
            "--initial-advertise-peer-urls", f"http://{head}:{p.etcd + 1}",
            "--initial-cluster", f"servebench=http://{head}:{p.etcd + 1}"]
    nats = ["nats-server", "-js", "-p", str(p.nats), "-sd", f"{where.workdir}/nats"]
    return [ProcSpec(0, "etcd", "infra", tuple(etcd), {}), ProcSpec(0, "nats", "infra", tuple(nats), {})]


def placement_for(profile: Profile, nodes: list[str], addresses: list[str], workdir: str, *,
                  root: str = ".", model_dir: str | None = None, ports: Ports = Ports()) -> Placement:
    """A placement from the cluster description; relative interpreter paths are taken from ``root`` (the repo)."""
    rt = profile.cluster.runtime

    def local_path(arg: str) -> str:
        return f"{root.rstrip('/')}/{arg}" if arg.startswith(".") and "/" in arg else arg

    net = profile.cluster.network
    return Placement(
        nodes=tuple(nodes), addresses=tuple(addresses), model=model_argument(profile, model_dir)[0],
        workdir=workdir, python=local_path(rt.python), vllm_serve=tuple(local_path(a) for a in rt.vllm_serve),
        ports=ports, environment=dict(rt.environment), discovery=rt.discovery,
        node_environment=tuple(dict(e) for e in rt.node_environment),
        interfaces=(net.nccl_socket_ifname, net.gloo_socket_ifname))


def dry_placement(profile: Profile) -> Placement:
    """Placeholder node names for rendering without an allocation."""
    from ..models import GENERATED, cached_path

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
    import socket

    for step in range(start, start + 1000, 50):
        ports = Ports().shifted(step)
        wanted = [ports.frontend, ports.dp_rpc, ports.master, *(ports.system + r for r in range(nodes)),
                  *(ports.kv_events + r for r in range(nodes))]
        try:
            for port in wanted:
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return ports
    raise RuntimeError(f"no free block of ports from offset {start}")
