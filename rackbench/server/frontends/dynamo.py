"""``frontend.type: dynamo``: ``dynamo.frontend`` (with the recipe's router args) on the head node in front of one
``dynamo.vllm`` worker per node, plus etcd + NATS there when the cluster's discovery is ``etcd``; the pinned Dynamo
pip-installed in each process's preamble (``dynamo.install``). Ready when every registering worker's system server
says ``ready``, the frontend's ``/health`` lists that many ``generate`` instances (it answers "healthy" with none)
and ``/v1/models`` lists the model; its OpenAPI document's ``info.version`` says the release."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from rackbench.catalog.flag_rules import pins
from rackbench.cluster.base import loopback
from rackbench.server.environment import dynamo_env, fill_env
from rackbench.server.frontends.base import Frontend, WorkerLaunch
from rackbench.server.spec import ProcSpec
from rackbench.server.readiness import generate_instances, models_listed
from rackbench.server.placement import dynamo_wheelhouse
from rackbench.server.steps import Container
from rackbench.tools import DYNAMO_ENV, in_folder


class DynamoFrontend(Frontend):
    name = "dynamo"
    seed_framework = "dynamo-vllm"
    worker_entrypoint = "dynamo.vllm"
    entrypoints = {"dynamo.vllm": "dynamo.vllm", "dynamo.frontend": "dynamo.frontend"}
    components = ("vllm", "dynamo")
    titles = {"dynamo.vllm": "Dynamo's vLLM worker (python -m dynamo.vllm)",
              "dynamo.frontend": "the Dynamo frontend (python -m dynamo.frontend)"}
    api_entrypoint = "dynamo.frontend"

    def installs(self, recipe: dict) -> dict[str, str]:
        written = recipe.get("dynamo") or {}
        return {"dynamo": str(written["version"])} if isinstance(written, dict) and written.get("version") else {}

    def infra(self, profile, where, ports) -> list[tuple[str, str, int]]:
        if where.discovery != "etcd":
            return []
        head = where.head
        return [("etcd", head, ports.take("etcd", head)), ("etcd-peer", head, ports.take("etcd_peer", head)),
                ("nats", head, ports.take("nats", head))]

    def environment(self, profile, where, infra) -> dict[str, str]:
        return dynamo_env(profile, where, infra.get("etcd"), infra.get("nats"))

    def worker(self, profile, where, role, host, api, ports) -> WorkerLaunch:
        argv = [where.python, "-m", "dynamo.vllm", "--model", where.model, "--served-model-name",
                profile.served_model_name]
        if role.mode == "headless":
            return WorkerLaunch(tuple(argv), {}, None, "")
        sysport = ports.take("system", host)
        kv = _kv_events(profile, role, host, ports)
        if kv:
            argv += ["--kv-events-config", kv]
        return WorkerLaunch(tuple(argv), {"DYN_SYSTEM_PORT": str(sysport), **bound_to(host, profile, where)},
                            f"http://{host}:{sysport}/health",
                            f"http://{host}:{sysport}/metrics")

    def front(self, profile, where, api, common_env, infra, preamble) -> list[ProcSpec]:
        r, head = profile.recipe, where.head
        bound = bound_to(head, profile, where)
        env = fill_env(profile, where, 0, {**common_env, **bound, **(r.frontend.env or {})},
                       ("environment", "frontend.env"))
        argv = [where.python, "-m", "dynamo.frontend", "--http-host", head, "--http-port", str(api),
                *_frontend_args(r.frontend.args or {})]
        steps, needs = preamble(env)
        front = ProcSpec(0, "frontend", "frontend", tuple(argv), env, preamble=steps,
                         container=Container(where.image, where.mounts), needs=needs,
                         runner=(where.python, where.tools))
        return [*(_infra(where, infra) if infra else []), front]

    def install(self, profile, where) -> list[dict[str, Any]]:
        """The recipe's pinned Dynamo: built once into a wheelhouse of the shared cache by the first step that
        lacks it (or by `rackbench stage --dynamo`), then installed from there with no network in every step."""
        if not (profile.recipe.dynamo.install and where.dynamo_install):
            return []
        return [{"name": "dynamo", "argv": dynamo_env_argv(profile, where)}]

    def unbuilt(self, profile, cache: str, image: str | None) -> tuple[str, str, str] | None:
        """A Dynamo from a source commit whose wheelhouse is not built yet."""
        if not (builds_from_source(profile) and profile.cluster.runtime.dynamo_install):
            return None
        house = dynamo_wheelhouse(cache, dynamo_requirements(profile), image)
        source = dynamo_requirements(profile)[-1].split(" @ ")[-1]
        return None if Path(house).is_dir() else (f"Dynamo from source ({source})", house,
                                                  "GitHub, git and a Rust toolchain (cargo)")

    def expected_instances(self, profile) -> int:
        return profile.topology.registering

    def router_metrics_url(self, profile, plan) -> str | None:
        """The frontend's own /metrics, where ``router-mode: kv`` keeps its indexer's kv_cache_events_applied."""
        return f"{plan.api_url}/metrics" if kv_router(profile) else None

    def readiness_urls(self, plan) -> list[str]:
        return [*plan.health_urls, f"{plan.api_url}/health", f"{plan.api_url}/v1/models"]

    def ready_workers(self, plan, answers) -> int:
        """The `generate` instances the frontend lists: the workers its router sends to (Dynamo's own count)."""
        return generate_instances(answers[f"{plan.api_url}/health"][1])

    def interpret(self, plan, answers) -> str | None:
        for url in plan.health_urls:
            code, body = answers[url]
            if not (code == 200 and isinstance(body, dict) and body.get("status") == "ready"):
                return f"worker {url} not ready ({code} {str(body)[:120]})"
        listed = generate_instances(answers[f"{plan.api_url}/health"][1])
        if listed < plan.expected_instances:
            return f"frontend lists {listed} of {plan.expected_instances} generate instance(s)"
        return models_listed(plan, answers)

    def reported_versions(self, plan, get) -> dict[str, str]:
        code, body = get(f"{plan.api_url}/openapi.json")
        info = body.get("info") if isinstance(body, dict) else None
        if code == 200 and isinstance(info, dict) and info.get("version"):
            return {"dynamo": str(info["version"])}
        return {}


# The first release measured to take an address in DYN_TCP_RESPONSE_STREAM_HOST; Dynamo 1.4.0 takes an interface's
# name there: given 127.0.0.1 its frontend never registers the model ("build_preprocessed_routing: Interface not
# found: 127.0.0.1"; H200 lease of 2026-12-04, reproduced here with 1.4.0's frontend and mocker). Releases between
# 1.4.0 and 1.6.1 are unmeasured and treated as 1.4.0.
RESPONSE_STREAM_TAKES_ADDRESS = Version("1.6.1")
DYNAMO_REPO = "https://github.com/ai-dynamo/dynamo.git"


def bound_to(host: str, profile, where) -> dict[str, str]:
    """Where a Dynamo process binds its servers: the node's own address, never every interface (its system server,
    the request plane, the response streams and the event plane; loopback on this machine). For a Dynamo that names
    the response streams' interface instead (before ``RESPONSE_STREAM_TAKES_ADDRESS``): ``lo`` for a loopback
    address, else the cluster's NCCL interface, else unset (Dynamo's own choice; docs/clusters.md)."""
    env = {name: host for name in ("DYN_SYSTEM_HOST", "DYN_TCP_RPC_HOST", "DYN_TCP_RESPONSE_STREAM_HOST",
                                   "DYN_EVENT_PLANE_HOST")}
    if _response_stream_takes_address(pins(profile).get("dynamo")):
        return env
    interface = "lo" if loopback(host) else where.interfaces[0]
    if interface:
        env["DYN_TCP_RESPONSE_STREAM_HOST"] = interface
    else:
        del env["DYN_TCP_RESPONSE_STREAM_HOST"]
    return env


def _response_stream_takes_address(version: str | None) -> bool:
    try:
        return version is None or Version(str(version)) >= RESPONSE_STREAM_TAKES_ADDRESS
    except InvalidVersion:
        return True


def dynamo_requirements(profile) -> list[str]:
    """What is built for the recipe's dynamo section (srt-slurm's sources: version, hash, wheel, top of tree). From
    source, the runtime is built at the same commit (``lib/bindings/python``): ``ai-dynamo`` alone would take
    ``ai-dynamo-runtime`` from the package index, a release that is not the commit's."""
    d = profile.recipe.dynamo
    if d.wheel:
        return [d.wheel]
    if d.hash or d.top_of_tree:
        source = f"git+{DYNAMO_REPO}@{d.hash or 'main'}"
        return [f"ai-dynamo-runtime @ {source}#subdirectory=lib/bindings/python", f"ai-dynamo @ {source}"]
    return [f"ai-dynamo=={d.version}", f"ai-dynamo-runtime=={d.version}"]


def dynamo_env_argv(profile, where, make_only: bool = False) -> list[str]:
    """tools/dynamo_env.py's command for the recipe's Dynamo: make the wheelhouse if missing and install from it (a
    step's preamble), or only make it (``make_only``: `rackbench stage --dynamo`)."""
    return [where.python, in_folder(where.tools, DYNAMO_ENV), *(["--make-only"] if make_only else []),
            wheelhouse(profile, where), *dynamo_requirements(profile)]


def wheelhouse(profile, where) -> str:
    """Where the recipe's Dynamo is built, in the shared cache as the steps see it (the client's cache)."""
    return dynamo_wheelhouse(where.client.cache, dynamo_requirements(profile), where.image)


def builds_from_source(profile) -> bool:
    """The recipe's Dynamo is a source commit: its build needs GitHub, git and a Rust toolchain."""
    d = profile.recipe.dynamo
    return bool(d.install and not d.wheel and (d.hash or d.top_of_tree))


def _frontend_args(args: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key, value in args.items():
        if value is True:
            out.append(f"--{key}")
        elif value is not False and value is not None:
            out += [f"--{key}", str(value)]
    return out


def kv_router(profile) -> bool:
    """The frontend routes by the workers' KV caches (``router-mode: kv``), from the KV events they publish."""
    return (profile.recipe.frontend.args or {}).get("router-mode") == "kv"


def _kv_events(profile, role, host: str, ports) -> str | None:
    """KV events for the KV router: vLLM's publisher binds a wildcard endpoint (never a host address), on the
    endpoint's port + the engine's global DP index, so each process gets a block of ports, one per DP rank."""
    cfg = profile.recipe.backend.kv_events_config
    if cfg is None and not (kv_router(profile) and (profile.recipe.frontend.args or {}).get("router-kv-events", True)):
        return None
    if cfg is False:
        return None
    payload = {"enable_kv_cache_events": True, "publisher": "zmq"}
    if isinstance(cfg, dict):
        payload.update(cfg)
    block = ports.take("kv_events", host, count=max(1, len(role.dp_ranks)))
    payload["endpoint"] = f"tcp://*:{block - min(role.dp_ranks, default=0)}"
    return json.dumps(payload, separators=(",", ":"))


# Where etcd and NATS keep their data inside a container: enroot gives each container its own /tmp (a tmpfs in the
# node's memory, enroot's 10-system.fstab), gone with the step, as srtctl keeps it on the node's /tmp; never on the
# shared file system, where an allocation's etcd would write its WAL to Lustre.
CONTAINER_INFRA_STATE = "/tmp/rackbench-infra"


def infra_state(where) -> str:
    """etcd's and NATS's data folder, fresh per allocation (no member of an earlier run): the container's own /tmp
    where they run in a container, else the profile folder's ``infra-<job>``."""
    in_container = where.containers and bool(where.infra_image or where.image)
    return CONTAINER_INFRA_STATE if in_container else str(where.folder.infra_state(where.job_id))


def _infra(where, port: dict[str, int]) -> list[ProcSpec]:
    head = where.head
    state = infra_state(where)
    etcd = [*where.etcd, "--name", "rackbench", "--data-dir", f"{state}/etcd",
            "--listen-client-urls", f"http://{head}:{port['etcd']}",        # the head's address: what the nodes use
            "--advertise-client-urls", f"http://{head}:{port['etcd']}",
            "--listen-peer-urls", f"http://{head}:{port['etcd-peer']}",
            "--initial-advertise-peer-urls", f"http://{head}:{port['etcd-peer']}",
            "--initial-cluster", f"rackbench=http://{head}:{port['etcd-peer']}"]
    nats = [*where.nats_server, "-js", "-a", head, "-p", str(port["nats"]), "-sd", f"{state}/nats"]
    infra = Container(where.infra_image or where.image, where.mounts)      # srun gives every container step the mounts
    return [ProcSpec(0, "etcd", "infra", tuple(etcd), {}, where.infra_image, container=infra),
            ProcSpec(0, "nats", "infra", tuple(nats), {}, where.infra_image, container=infra)]
