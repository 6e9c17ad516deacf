"""From a profile to the server processes of one deployment: what runs on which node, with which argv and env.

The per-node roles come from the pure :mod:`rackbench.recipe.topology` step (leader/headless followers, hybrid DP
ranks, one process per DP rank); this module renders them for the recipe's frontend:

* ``frontend.type: dynamo`` - ``dynamo.frontend`` (with the recipe's router args) on the head node in front of
  one ``dynamo.vllm`` worker per node, plus etcd + NATS there when the cluster's discovery is ``etcd``;
* ``frontend.type: vllm`` - ``vllm serve`` per node, whose rank-0 process is the API server.

Each of them starts with the launch preamble srt-slurm runs before a worker or frontend, in the same step and so in the
same container: the recipe's ``setup_script`` (from the configs/ folder beside the recipes) and ``dynamo.install``
(the pinned Dynamo into the process's environment). With pyxis an unnamed container vanishes with its step, so a
preamble run as a step of its own would leave nothing behind for the process (rackbench.server.containers checks
every plan for that). Environment values and flags listed in
``profile.templates`` get ``{job_id}``, ``{node}``, ``{node_rank}``, ``{head_node}`` and ``{result_dir}`` filled per
node here, so no placeholder reaches a process.

Nothing here starts a process: the plan is data, rendered by ``rackbench render`` and launched by
:mod:`rackbench.server.deploy`. The same code plans GB200 and local deployments; only the
:class:`~rackbench.server.placement.Placement` differs. Every port comes from one
:class:`~rackbench.server.ports.PortAllocator` per plan (on a host that stands in for several nodes it skips
ports in use here: the only I/O of planning).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rackbench.core.listeners import holder
from rackbench.recipe.flags import canonical
from rackbench.recipe.profile import Profile
from rackbench.recipe.topology import LAUNCHER_FLAGS, NodeRole
from rackbench.server import frontends
from rackbench.server.environment import fill_flags, network_env, node_env
from rackbench.server.placement import DETECT_INTERFACES, Placement
from rackbench.server.spec import ProcSpec
from rackbench.server.steps import ClientSpec, Container
from rackbench.server.ports import PortAllocator, PortLease
from rackbench.tools import preamble_command


@dataclass(frozen=True)
class Engine:
    """One vLLM engine (DP rank) and where its Prometheus metrics are scraped."""

    dp_rank: int
    rank: int                    # node rank of the process that owns it
    metrics_url: str
    label: str                   # the engine="..." label vLLM puts on its series


@dataclass(frozen=True)
class ServerPlan:
    kind: str                    # the frontend's name (rackbench.server.frontends): vllm | dynamo | a site's
    model_name: str
    api_url: str                 # OpenAI-compatible base URL the load generator targets
    processes: tuple[ProcSpec, ...]
    engines: tuple[Engine, ...]
    health_urls: tuple[str, ...]  # per registering process (Dynamo worker system /health, or vLLM /health)
    expected_instances: int      # Dynamo: `generate` instances the frontend must list; vLLM: API servers
    infra: tuple[tuple[str, str, int], ...] = ()   # (what, host, port) of etcd / NATS, when the plan starts them
    client: ClientSpec | None = None               # where the load generator runs (Placement.client)
    ports: tuple[tuple[str, str, int], ...] = ()   # (kind, host, port) of every port the plan gives a process
    alias: str | None = None                       # the deployment's own served name (Frontend.alias), if any

    @property
    def metrics_urls(self) -> list[str]:
        return list(dict.fromkeys(e.metrics_url for e in self.engines))

    def proc(self, name: str) -> ProcSpec:
        return next(p for p in self.processes if p.name == name)

    @property
    def frontend(self):
        """The frontend that serves it (rackbench.server.frontends), by its name."""
        return frontends.of(self.kind)


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


def topology_args(role: NodeRole, profile: Profile, where: Placement, ports: PortAllocator) -> list[str]:
    """The per-node flags of one role (the launcher owns these: topology.LAUNCHER_FLAGS). Each worker of an
    agg_workers > 1 deployment has its own head node and its own master and DP RPC ports there."""
    f, topo, head = profile.flags, profile.topology, where.addresses[role.head]
    worker = f"worker{role.worker}"
    dp_rpc = str(ports.take("dp_rpc", head, key=worker))
    if role.mode == "dp_rank":
        return ["--data-parallel-rank", str(role.rank - role.head), "--data-parallel-address", head,
                "--data-parallel-rpc-port", dp_rpc]
    if role.mode == "dp_hybrid":
        return ["--data-parallel-size-local", str(len(role.dp_ranks)), "--data-parallel-start-rank",
                str(role.dp_start), "--data-parallel-address", head, "--data-parallel-rpc-port", dp_rpc,
                "--data-parallel-hybrid-lb"]
    if role.mode in ("leader", "headless"):
        argv = ["--master-addr", head, "--master-port", str(ports.take("master", head, key=worker)),
                "--nnodes", str(role.worker_nodes), "--node-rank", str(role.rank - role.head)]
        if topo.dp > 1 or f.dp_given:
            argv += ["--data-parallel-address", head, "--data-parallel-rpc-port", dp_rpc]
        return argv + (["--headless"] if role.mode == "headless" else [])
    return []


def allocator(profile: Profile, where: Placement, lease: PortLease | None = None) -> PortAllocator:
    """The plan's port allocator; a port the recipe chooses (master-port, data-parallel-rpc-port) is its kind's
    first, exactly. ``lease``: where a plan on this machine holds its ports until the allocation is released."""
    bases = {kind: int(profile.flags.value(flag)) for kind, flag in (("master", "master-port"),
                                                                     ("dp_rpc", "data-parallel-rpc-port"))
             if str(profile.flags.value(flag) or "").isdigit()}
    return PortAllocator(probe=where.probe_ports, offset=where.port_offset, bases=bases, lease=lease,
                         describe=holder)


def plan(profile: Profile, where: Placement, lease: PortLease | None = None) -> ServerPlan:
    """The processes, engines and health endpoints of ``profile`` placed on ``where``; the recipe's frontend
    (rackbench.server.frontends) says what differs between vLLM alone and Dynamo. On this machine its ports are
    held in ``lease``."""
    r, topo = profile.recipe, profile.topology
    if len(where.nodes) < topo.nodes:
        raise ValueError(f"{profile.id} needs {topo.nodes} nodes, placement has {len(where.nodes)}")
    front = frontends.of(r.frontend.type)
    ports = allocator(profile, where, lease)
    head = where.head
    api = ports.take("frontend", head)
    infra = front.infra(profile, where, ports)
    infra_ports = {what: port for what, _, port in infra}
    common_env = {**where.environment, **r.environment, **front.environment(profile, where, infra_ports)}
    base_env = {**common_env, **r.backend.aggregated_environment, **network_env(where)}

    engine_flags = {k: v for k, v in profile.flags.raw.items() if canonical(k) not in LAUNCHER_FLAGS}
    procs: list[ProcSpec] = []            # servers; the frontend's own processes and infra go before them
    if r.backend.connector and r.backend.connector.lower() not in ("null", "none"):
        engine_flags = {**engine_flags, "kv-transfer-config": _connector_json(r.backend.connector)}
    engines: list[Engine] = []
    health: list[str] = []
    container = Container(where.image, where.mounts)
    runner = (where.python, where.tools)
    for index, role in enumerate(topo.roles):
        rank, host = role.rank, where.addresses[role.rank]
        env = node_env(profile, where, base_env, rank)
        flags = fill_flags(profile, where, rank, engine_flags)
        launch = front.worker(profile, where, role, host, api, ports)
        env.update(launch.env)
        if launch.health:
            health.append(launch.health)
        argv = [*launch.argv, *topology_args(role, profile, where, ports), *cli_args(flags)]
        if where.shares_host and where.gpu_cluster:   # one host standing in for the nodes: split its GPUs
            env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, role.host_devices(profile.cluster.gpus_per_node)))
        elif role.devices is not None:        # a worker on a slice of the node's GPUs (agg_workers > 1)
            argv = ["env", "CUDA_VISIBLE_DEVICES=" + ",".join(map(str, role.devices)), *argv]
        if topo.nodes > 1 and None in where.interfaces:
            argv = [*DETECT_INTERFACES, *argv]
        steps, needs = preamble(profile, where, env)
        procs.append(ProcSpec(rank, f"worker{index}", "headless" if role.mode == "headless" else "worker",
                              tuple(argv), env, preamble=steps, container=container, needs=needs, runner=runner))
        engines += [Engine(d, rank, launch.metrics, str(d)) for d in role.dp_ranks]
    procs[:0] = front.front(profile, where, api, common_env, infra_ports, lambda e: preamble(profile, where, e))
    return ServerPlan(front.name, profile.served_model_name, f"http://{head}:{api}", tuple(procs), tuple(engines),
                      tuple(health), front.expected_instances(profile),
                      tuple((w, h, p) for w, h, p in infra if w != "etcd-peer"), where.client, tuple(ports.handed),
                      front.alias(profile, where))


def preamble(profile: Profile, where: Placement, env: dict) -> tuple[tuple[dict, ...], frozenset[str]]:
    """The launch preamble a worker or frontend runs in its own step (srt-slurm's), and what the process needs of
    it: the recipe's setup script (only where the model directory exists: it reads the model; a Hub repo id, an
    ``hf:`` model the engine downloads itself, has no directory to wait for, and srtctl runs the script all the
    same), then the frontend's install steps (the pinned Dynamo)."""
    r, steps, needs = profile.recipe, [], set()
    if r.setup_script:
        script = f"{where.configs.rstrip('/')}/{r.setup_script}"
        steps.append({"name": "setup", "argv": ["bash", script], "env": {"RACKBENCH_MODEL": where.model},
                      **({"unless_missing": where.model} if where.model.startswith("/") else {})})
        needs.add("setup")
    for step in frontends.of(r.frontend.type).install(profile, where):
        steps.append(step)
        needs.add(step["name"])
    return tuple(steps), frozenset(needs)


def _connector_json(connector: str) -> dict | str:
    presets = {"nixl": {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
               "lmcache": {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}}
    return presets.get(connector.lower(), connector)
