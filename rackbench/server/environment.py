"""Environment and templated values of a deployment's processes, per node: the cluster's and the recipe's
environment blocks, Dynamo's discovery variables, NCCL/Gloo interfaces, and the values listed in
``profile.templates`` with ``{job_id}``, ``{node}``, ``{node_rank}``, ``{head_node}`` and ``{result_dir}`` filled, so
no placeholder reaches a process. Pure: no I/O."""

from __future__ import annotations

from rackbench.recipe.flags import canonical
from rackbench.recipe.placeholders import SUITE_PLACEHOLDERS
from rackbench.recipe.profile import Profile
from rackbench.server.placement import Placement

FLAG_TEMPLATES = "backend.vllm_config.aggregated."


def _values(where: Placement, rank: int) -> dict[str, str]:
    return {"job_id": where.job_id, "node": where.nodes[rank], "node_rank": str(rank), "node_id": str(rank),
            "head_node": where.nodes[0], "result_dir": where.workdir}


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
    wanted = {canonical(t[len(FLAG_TEMPLATES):]) for t in profile.spec.templates if t.startswith(FLAG_TEMPLATES)}
    values = _values(where, rank)
    return {k: _fill(v, values) if canonical(k) in wanted and isinstance(v, str) else v for k, v in flags.items()}


def node_env(profile: Profile, where: Placement, base_env: dict, rank: int) -> dict:
    env = dict(base_env)
    if rank < len(where.node_environment):
        env.update(where.node_environment[rank])
    return fill_env(profile, where, rank, env, ("environment", "backend.aggregated_environment"))


def dynamo_env(profile: Profile, where: Placement, etcd: int | None, nats: int | None) -> dict[str, str]:
    """Dynamo's request plane and discovery: etcd + NATS on the head node, or a shared file store."""
    d = profile.recipe.dynamo
    env = {"DYN_REQUEST_PLANE": d.request_plane}
    if d.event_plane:
        env["DYN_EVENT_PLANE"] = d.event_plane
    if where.discovery == "etcd":
        env.update({"ETCD_ENDPOINTS": f"http://{where.head}:{etcd}", "NATS_SERVER": f"nats://{where.head}:{nats}"})
    else:
        env.update({"DYN_DISCOVERY_BACKEND": "file", "DYN_FILE_KV": str(where.folder.discovery)})
    return env


def network_env(where: Placement) -> dict[str, str]:
    """NCCL/Gloo interfaces from the cluster description; unset ones are detected on the node at launch."""
    nccl, gloo = where.interfaces
    env = {}
    if nccl:
        env["NCCL_SOCKET_IFNAME"] = nccl
    if gloo:
        env["GLOO_SOCKET_IFNAME"] = gloo
    return env
