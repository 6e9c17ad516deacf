"""From a profile to the server processes of one deployment: what runs on which node, with which argv and env.

The per-node roles come from the pure :mod:`servebench.topology` step (leader/headless followers, hybrid DP
ranks, one process per DP rank); this module renders them for the recipe's frontend:

* ``frontend.type: dynamo`` - ``dynamo.frontend`` (with the recipe's router args) on the head node in front of
  one ``dynamo.vllm`` worker per node, plus etcd + NATS there when the cluster's discovery is ``etcd``;
* ``frontend.type: vllm`` - ``vllm serve`` per node, whose rank-0 process is the API server.

Before any of them, on every node, the launch steps srt-slurm runs as a worker's preamble, here as their own
steps that must finish first: the recipe's ``setup_script`` (from the configs/ folder beside the recipes) and
``dynamo.install`` (the pinned Dynamo into the worker's environment). Environment values and flags listed in
``profile.templates`` get ``{job_id}``, ``{node}``, ``{node_rank}``, ``{head_node}`` and ``{result_dir}`` filled per
node here, so no placeholder reaches a process.

Nothing here starts a process: the plan is data, rendered by ``servebench render`` and launched by
:mod:`servebench.server.deploy`. The same code plans GB200 and local deployments; only the
:class:`~servebench.server.placement.Placement` differs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..flags import SUITE_PLACEHOLDERS, canonical
from ..profile import Profile
from ..topology import LAUNCHER_FLAGS, NodeRole
from .placement import DETECT_INTERFACES, Placement


@dataclass(frozen=True)
class ProcSpec:
    rank: int                    # node rank the process runs on
    name: str                    # setup<r> | dynamo-install<r> | etcd | nats | frontend | worker<r>
    role: str                    # setup | infra | frontend | worker | headless
    argv: tuple[str, ...]
    env: dict[str, str | None]
    image: str | None = None     # pyxis: run in this image instead of the allocation's (etcd/NATS images)

    @property
    def oneshot(self) -> bool:
        return self.role == "setup"


# Runs the setup script only where the model directory exists (it reads the model); exit 97 = not run, said why.
# A fixed script: the model path and the command follow as arguments, so nothing is spliced into shell text.
SETUP_GUARD = ("sh", "-c", 'test -e "$1" || { echo "servebench: $1 does not exist on this node: setup script '
               'not run" >&2; exit 97; }; shift; exec "$@"', "servebench-setup")
SETUP_SKIPPED = 97


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


def topology_args(role: NodeRole, profile: Profile, where: Placement) -> list[str]:
    """The per-node flags of one role (the launcher owns these: topology.LAUNCHER_FLAGS). Workers of an
    agg_workers > 1 deployment each have their own head node and ports."""
    f, topo, head = profile.flags, profile.topology, where.addresses[role.head]
    dp_rpc = str(int(f.value("data-parallel-rpc-port") or where.ports.dp_rpc) + role.worker)
    if role.mode == "dp_rank":
        return ["--data-parallel-rank", str(role.rank - role.head), "--data-parallel-address", head,
                "--data-parallel-rpc-port", dp_rpc]
    if role.mode == "dp_hybrid":
        return ["--data-parallel-size-local", str(len(role.dp_ranks)), "--data-parallel-start-rank",
                str(role.dp_start), "--data-parallel-address", head, "--data-parallel-rpc-port", dp_rpc,
                "--data-parallel-hybrid-lb"]
    if role.mode in ("leader", "headless"):
        master = int(f.value("master-port") or where.ports.master) + role.worker
        argv = ["--master-addr", head, "--master-port", str(master), "--nnodes", str(role.worker_nodes),
                "--node-rank", str(role.rank - role.head)]
        if topo.dp > 1 or f.dp_given:
            argv += ["--data-parallel-address", head, "--data-parallel-rpc-port", dp_rpc]
        return argv + (["--headless"] if role.mode == "headless" else [])
    return []


def plan(profile: Profile, where: Placement) -> ServerPlan:
    """The processes, engines and health endpoints of ``profile`` placed on ``where``."""
    r, topo = profile.recipe, profile.topology
    if len(where.nodes) < topo.nodes:
        raise ValueError(f"{profile.id} needs {topo.nodes} nodes, placement has {len(where.nodes)}")
    name = profile.served_model_name
    kind = "vllm" if r.frontend.type == "vllm" else "dynamo"
    common_env = {**where.environment, **r.environment}
    if kind == "dynamo":
        common_env.update(_dynamo_env(profile, where))
    base_env = {**common_env, **r.backend.aggregated_environment, **_network_env(where)}

    engine_flags = {k: v for k, v in profile.flags.raw.items() if canonical(k) not in LAUNCHER_FLAGS}
    procs: list[ProcSpec] = []            # servers; setup steps and infra go before them
    if r.backend.connector and r.backend.connector.lower() not in ("null", "none"):
        engine_flags = {**engine_flags, "kv-transfer-config": _connector_json(r.backend.connector)}
    engines: list[Engine] = []
    health: list[str] = []
    head = where.head
    for index, role in enumerate(topo.roles):
        rank, headless = role.rank, role.mode == "headless"
        env = node_env(profile, where, base_env, rank)
        flags = fill_flags(profile, where, rank, engine_flags)
        if kind == "dynamo":
            sysport = where.ports.system + index
            argv = [where.python, "-m", "dynamo.vllm", "--model", where.model, "--served-model-name", name]
            if not headless:
                env["DYN_SYSTEM_PORT"] = str(sysport)
                kv = _kv_events(profile, where, index)
                if kv:
                    argv += ["--kv-events-config", kv]
                health.append(f"http://{where.addresses[rank]}:{sysport}/health")
            metrics = f"http://{where.addresses[rank]}:{sysport}/metrics"
        else:
            argv = [*where.vllm_serve, "--model", where.model, "--served-model-name", name]
            if rank == 0:
                argv += ["--host", "0.0.0.0" if topo.nodes > 1 else head, "--port", str(where.ports.frontend)]
                health.append(f"http://{head}:{where.ports.frontend}/health")
            metrics = f"http://{head}:{where.ports.frontend}/metrics"
        argv += topology_args(role, profile, where) + cli_args(flags)
        cl = profile.cluster
        if cl.backend == "local" and cl.kind == "gpu":   # one host standing in for the nodes: split its GPUs
            env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, role.host_devices(cl.gpus_per_node)))
        elif role.devices is not None:        # a worker on a slice of the node's GPUs (agg_workers > 1)
            argv = ["env", "CUDA_VISIBLE_DEVICES=" + ",".join(map(str, role.devices)), *argv]
        if topo.nodes > 1 and None in where.interfaces:
            argv = [*DETECT_INTERFACES, *argv]
        procs.append(ProcSpec(rank, f"worker{index}", "headless" if headless else "worker", tuple(argv), env))
        engines += [Engine(d, rank, metrics, str(d)) for d in role.dp_ranks]

    if kind == "dynamo":
        front_env = fill_env(profile, where, 0, {**common_env, **(r.frontend.env or {})}, ("environment", "frontend.env"))
        argv = [where.python, "-m", "dynamo.frontend", "--http-host", "0.0.0.0" if topo.nodes > 1 else head,
                "--http-port", str(where.ports.frontend), *_frontend_args(r.frontend.args or {})]
        procs.insert(0, ProcSpec(0, "frontend", "frontend", tuple(argv), front_env))
        if where.discovery == "etcd":
            procs[:0] = _infra(where)
        expected = topo.registering
    else:
        expected = 1
    procs[:0] = setup_steps(profile, where, base_env)
    return ServerPlan(kind, name, f"http://{head}:{where.ports.frontend}", tuple(procs), tuple(engines),
                      tuple(health), expected)


def setup_steps(profile: Profile, where: Placement, base_env: dict) -> list[ProcSpec]:
    """Per node, before any server: the recipe's setup script, then the pinned Dynamo install."""
    r, steps = profile.recipe, []
    for rank in range(profile.topology.nodes):
        env = node_env(profile, where, base_env, rank)
        if r.setup_script:
            script = f"{where.configs.rstrip('/')}/{r.setup_script}"
            steps.append(ProcSpec(rank, f"setup{rank}", "setup",
                                  (*SETUP_GUARD, where.model, "bash", script), {**env, "SERVEBENCH_MODEL": where.model}))
        if r.frontend.type != "vllm" and r.dynamo.install and where.dynamo_install:
            steps.append(ProcSpec(rank, f"dynamo-install{rank}", "setup",
                                  (where.python, "-m", "pip", "install", "--no-input", *dynamo_requirements(profile)),
                                  env))
    return steps


def dynamo_requirements(profile: Profile) -> list[str]:
    """What pip installs for the recipe's dynamo section (srt-slurm's sources: version, hash, wheel, top of tree)."""
    d = profile.recipe.dynamo
    if d.wheel:
        return [d.wheel]
    if d.hash or d.top_of_tree:
        return [f"ai-dynamo @ git+https://github.com/ai-dynamo/dynamo.git@{d.hash or 'main'}"]
    return [f"ai-dynamo=={d.version}", f"ai-dynamo-runtime=={d.version}"]


def _values(where: Placement, rank: int) -> dict[str, str]:
    return {"job_id": where.job_id, "node": where.nodes[rank], "node_rank": str(rank), "head_node": where.nodes[0],
            "result_dir": where.workdir}


def _fill(text: str, values: dict[str, str]) -> str:
    for name in SUITE_PLACEHOLDERS:       # plain replacement: no format(), so other braces stay literal
        text = text.replace("{" + name + "}", values[name])
    return text


def fill_env(profile: Profile, where: Placement, rank: int, env: dict, blocks: tuple[str, ...]) -> dict:
    """``env`` with the values of keys listed in profile.templates (e.g. environment.LOG_DIR) filled for ``rank``."""
    wanted = {t.rpartition(".")[2] for t in profile.spec.templates if t.rpartition(".")[0] in blocks}
    values = _values(where, rank)
    return {k: _fill(v, values) if k in wanted and isinstance(v, str) else v for k, v in env.items()}


def fill_flags(profile: Profile, where: Placement, rank: int, flags: dict) -> dict:
    prefix = "backend.vllm_config.aggregated."
    wanted = {canonical(t[len(prefix):]) for t in profile.spec.templates if t.startswith(prefix)}
    values = _values(where, rank)
    return {k: _fill(v, values) if canonical(k) in wanted and isinstance(v, str) else v for k, v in flags.items()}


def node_env(profile: Profile, where: Placement, base_env: dict, rank: int) -> dict:
    env = dict(base_env)
    if rank < len(where.node_environment):
        env.update(where.node_environment[rank])
    return fill_env(profile, where, rank, env, ("environment", "backend.aggregated_environment"))


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
    state = f"{where.workdir}/infra-{where.job_id}"      # fresh per allocation: no member of an earlier run
    etcd = [*where.etcd, "--name", "servebench", "--data-dir", f"{state}/etcd",
            "--listen-client-urls", f"http://0.0.0.0:{p.etcd}", "--advertise-client-urls", f"http://{head}:{p.etcd}",
            "--listen-peer-urls", f"http://0.0.0.0:{p.etcd + 1}",
            "--initial-advertise-peer-urls", f"http://{head}:{p.etcd + 1}",
            "--initial-cluster", f"servebench=http://{head}:{p.etcd + 1}"]
    nats = [*where.nats_server, "-js", "-p", str(p.nats), "-sd", f"{state}/nats"]
    return [ProcSpec(0, "etcd", "infra", tuple(etcd), {}, where.infra_image),
            ProcSpec(0, "nats", "infra", tuple(nats), {}, where.infra_image)]
