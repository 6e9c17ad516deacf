"""Preflight: seconds of checks on every allocated node, in the exact environment each process will get, before
any weights load (``rackbench preflight PROFILE``, and first in every hardware run).

On each node, one step runs ``rackbench/tools/preflight_node.py`` with the node's interpreter (in the image with
pyxis), the worker's environment (templates filled, interface detection as the worker gets it) and a request
saying what to check: the entrypoints import; each process's argv passes the real parsers of *that*
environment; flags naming a Python object (``scheduler-cls``, ...) resolve; the model directory and what the setup
script should have made exist; the step sees the GPUs the layout needs; the NCCL/Gloo interface exists;
etcd/NATS answer; the versions there are the recipe's pins. One line per node and problem.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rackbench.cluster.base import Allocation
from rackbench.core.errors import ConfigError, Problem
from rackbench.core.poll import Done, PollTimeout, poll
from rackbench.core.results_folder import ProfileFolder, ResultsFolder
from rackbench.recipe.profile import Profile
from rackbench.catalog.flag_rules import OBJECT_FLAGS
from rackbench.core.timeouts import PREFLIGHT_TIMEOUT_S
from rackbench.server import frontends, mounts
from rackbench.server.findings import Finding, Report
from rackbench.server.login_checks import LOGIN, before_sbatch, infra_files, login_findings, mount_findings
from rackbench.server.containers import preamble_said
from rackbench.tools import PREFLIGHT, in_folder, preamble_command
from rackbench.server.placement import DETECT_INTERFACES, Placement
from rackbench.server.ports import PortTaken
from rackbench.server.plan import ProcSpec, ServerPlan
from rackbench.recipe.schema.cluster import ClusterSpec

log = logging.getLogger(__name__)


def entrypoint(proc: ProcSpec, front: frontends.Frontend) -> tuple[str, list[str]] | None:
    """(entrypoint, its arguments) of a server process of ``front``'s plan, or None (etcd, NATS, setup steps): a
    ``python -m <entrypoint>`` the frontend runs, else its worker entrypoint's arguments from ``--model`` on."""
    argv = list(proc.argv)
    if tuple(argv[:len(DETECT_INTERFACES)]) == DETECT_INTERFACES:
        argv = argv[len(DETECT_INTERFACES):]
    if "-m" in argv[:3] and argv[argv.index("-m") + 1] in front.entrypoints:
        return argv[argv.index("-m") + 1], argv[argv.index("-m") + 2:]
    if "--model" in argv and proc.role in ("worker", "headless"):
        return front.worker_entrypoint, argv[argv.index("--model"):]
    return None


def retarget(profile: Profile, cluster: ClusterSpec, own_installs: bool = False) -> Profile:
    """The profile on another cluster of the same shape (e.g. the local Slurm stand-in for gb200-nv). With
    ``own_installs``, the stand-in takes what its own cluster installs and runs from shared storage: the Dynamo
    install, the client's environment as made on the cluster (its interpreter in the image, its pinned install), and
    etcd's and NATS's argv (binaries on shared storage, where the stand-in mounts its own at the same path); the
    stand-in keeps its interpreter for the servers (its image has no vLLM) and its own cache."""
    need = profile.recipe.resources
    if cluster.gpus_per_node != need.gpus_per_node or cluster.nodes < need.total_nodes:
        raise ConfigError(Problem(profile.file, "profile.cluster", f"cluster {cluster.name} has {cluster.nodes} "
                                  f"nodes x {cluster.gpus_per_node} GPUs; {profile.id} needs {need.total_nodes} x "
                                  f"{need.gpus_per_node}", "pick a cluster of the profile's shape"))
    if own_installs:
        own, rt = profile.cluster.runtime, cluster.runtime
        client = own.client.model_copy(update={"cache": rt.client.cache, "image": rt.client.image})
        cluster = cluster.model_copy(update={"runtime": rt.model_copy(update={
            "dynamo_install": own.dynamo_install, "client": client, "infra": own.infra})})
    return dataclasses.replace(profile, cluster=cluster)


def requests(profile: Profile, sp: ServerPlan, where: Placement) -> dict[int, dict]:
    """Per node rank: what preflight_node.py checks there."""
    topo, f = profile.topology, profile.flags
    objects = [{"flag": name, "value": str(f.value(name))} for name in OBJECT_FLAGS
               if f.has(name) and str(f.value(name)) not in ("", "auto")]
    spec_model = (f.json.get("speculative-config") or {}).get("model")
    paths = [{"what": "model directory (--model)", "path": where.model, "kind": "model",
              "fix": "stage the model on every node (runtime.model_paths)"}] if where.model.startswith("/") else []
    if isinstance(spec_model, str) and spec_model.startswith("/"):
        made = profile.recipe.setup_script
        paths.append({"what": "speculative-config.model" + (f" (made by setup script {made})" if made else ""),
                      "path": spec_model, "kind": "setup" if made else "model",
                      "fix": f"check {made}'s log in the profile's logs" if made else "stage the draft model"})
    endpoints = [{"what": {"etcd": "etcd", "nats": "NATS"}[what], "host": host, "port": port}
                 for what, host, port in sp.infra]
    interfaces = sorted({i or "" for i in where.interfaces}) if topo.nodes > 1 else []
    gpus = min(profile.cluster.gpus_per_node, topo.gpus) if profile.cluster.kind == "gpu" else 0
    front = sp.frontend
    every_component = frontends.every_component()     # a pin of another frontend's component is not checked here
    infra_kinds = {"etcd", "etcd_peer", "nats"}           # started before preflight: in use by then, as planned
    first_on = {}                                          # a host's ports are checked once, by its first rank
    for rank in range(topo.nodes):
        first_on.setdefault(where.addresses[rank], rank)
    out = {}
    for rank in range(topo.nodes):
        host = where.addresses[rank]
        node_ports = [{"kind": k, "port": p} for k, h, p in sp.ports
                      if h == host and k not in infra_kinds and first_on[host] == rank]
        mine = [p for p in sp.processes if p.rank == rank and entrypoint(p, front)]
        parse = [{"id": p.name, "entrypoint": entrypoint(p, front)[0], "args": entrypoint(p, front)[1]}
                 for p in mine]
        out[rank] = {"node": where.nodes[rank], "rank": rank, "paths": paths, "gpus": gpus,
                     "imports": sorted({front.entrypoints[e["entrypoint"]] for e in parse}), "parse": parse,
                     "objects": objects, "interfaces": interfaces, "endpoints": endpoints, "ports": node_ports,
                     "versions": {k: v for k, v in profile.recipe.identity.frameworks.items()
                                  if k in front.components or k not in every_component}}
    return out


@dataclass(frozen=True)
class CheckStep:
    """One more check step beside the node checks (the load generator's client check, on the client's node): it
    answers like preflight_node.py, one JSON line with "problems" and "notes"."""

    name: str
    rank: int
    argv: list[str]
    env: dict[str, str]
    image: str | None = None


Extra = Callable[[ServerPlan], list[CheckStep]]


def mounts_report(profile: Profile, allocation: Allocation, where: Placement, folder: ProfileFolder,
                  start: float) -> Report | None:
    """The report of a profile whose containers cannot start on some node (a mount source missing there), or None:
    no container would start, so nothing else is checked."""
    infra = infra_files(profile, allocation.request.container_mounts)
    absent = mount_findings(profile, mounts.missing(allocation, folder, infra), infra)
    if not absent:
        return None
    return Report(profile.id, login_findings(profile, where, allocation.request.dropped) + absent,
                  ["checks not run: no container of the profile can start where a mount source is missing (their "
                   f"logs: {folder.logs}/mounts*.log)"], time.monotonic() - start)


def run(profile: Profile, sp: ServerPlan, allocation: Allocation, where: Placement, folder: ProfileFolder,
        timeout: float = PREFLIGHT_TIMEOUT_S, extra: Extra | None = None, mounts_checked: bool = False) -> Report:
    """Run the node checks on every node of the allocation and ``extra``'s steps (the client's), in parallel, and
    collect the findings (first, unless done: whether the containers' mount sources are on the nodes)."""
    start = time.monotonic()
    absent = None if mounts_checked else mounts_report(profile, allocation, where, folder, start)
    if absent is not None:
        return absent
    report = Report(profile.id, login_findings(profile, where, allocation.request.dropped))
    procs = {}
    for rank, req in requests(profile, sp, where).items():
        procs[f"preflight{rank}"] = allocation.launch(
            rank, f"preflight{rank}", node_command(sp, where, rank, req),
            dict(_worker(sp, rank).env) if _worker(sp, rank) else {}, folder.log(f"preflight{rank}"),
            role="preflight", oneshot=True)
    for step in (extra(sp) if extra is not None else []):
        procs[step.name] = allocation.launch(step.rank, step.name, step.argv, step.env, folder.log(step.name),
                                             role="preflight", oneshot=True, image=step.image)
    try:
        poll(lambda: Done(True) if all(not p.alive() for p in procs.values()) else "running",
             timeout=timeout, interval=0.5, backoff=1.2, max_interval=5, what=f"{profile.id} preflight")
    except PollTimeout:
        allocation.stop_all(list(procs.values()))
    said: dict[str, list[str]] = {}
    for proc in procs.values():
        rank = proc.rank
        answer = _answer(proc.log)
        skipped, failed = preamble_said(proc.log)
        for line in skipped:
            said.setdefault(line, []).append(proc.node)
        if answer is None and failed:
            report.findings.append(Finding(proc.node, rank, "setup", "launch preamble", f"{failed} ({proc.name}); "
                                           f"last lines of {proc.log}:\n{proc.tail(15)}",
                                           "the process it precedes would stop the same way"))
            continue
        if answer is None:
            report.findings.append(Finding(proc.node, rank, "preflight", f"{proc.name} checks", f"no answer (exit "
                                           f"{proc.popen.returncode}); last lines of {proc.log}:\n{proc.tail(15)}"))
            continue
        report.findings += [Finding(proc.node, rank, p["kind"], p["check"], p["message"], p["fix"])
                            for p in answer["problems"]]
        report.notes += answer["notes"]
    report.notes[:0] = [f"{', '.join(nodes)}: {line}" for line, nodes in said.items()]
    report.seconds = time.monotonic() - start
    for line in report.lines():
        log.info("%s", line)
    return report


def _worker(sp: ServerPlan, rank: int) -> ProcSpec | None:
    return next((p for p in sp.processes if p.rank == rank and p.role in ("worker", "headless")), None)


def node_command(sp: ServerPlan, where: Placement, rank: int, req: dict) -> list[str]:
    """The node's checks as its worker will run: in the worker's step and container, after the worker's own
    preamble (setup script, Dynamo install), so what they made is there to be checked."""
    check = [where.python, in_folder(where.tools, PREFLIGHT), json.dumps(req)]
    worker = _worker(sp, rank)
    if worker is not None and worker.preamble:
        check = preamble_command(*worker.runner, worker.preamble, check)
    return [*DETECT_INTERFACES, *check] if "" in req["interfaces"] else check


def allocate_and_check(profile: Profile, results: ResultsFolder, root: Path, extra: Extra | None = None) -> Report:
    """``rackbench preflight``: allocate the profile's nodes, start etcd/NATS, check every node (after the
    worker's preamble, in its step), release (whatever happens). A plan that cannot work as launched is a finding."""
    from rackbench.server import deploy
    from rackbench.server.assembly import Assembly

    start = time.monotonic()
    run_id = "preflight-" + time.strftime("%Y%m%d-%H%M%S")
    assembly = Assembly(profile, results, run_id, root=root)
    why = assembly.backend.unavailable()
    if why:
        return Report(profile.id, [Finding(LOGIN, None, "preflight", "allocation", f"cannot allocate on "
                                           f"{profile.cluster.name}: {why}")])
    req = assembly.request()
    missing = before_sbatch(profile, req)
    if missing:             # said before the queue wait, not after it
        return Report(profile.id, missing, ["not allocated: the login node sees these missing, and each would stop "
                                            "the job on its nodes"], time.monotonic() - start, unallocated=True)
    alloc = assembly.allocate(req)
    try:
        try:
            where, sp = assembly.plan(alloc)
        except PortTaken as err:        # another session on this host holds a port the recipe pins
            return Report(profile.id, [Finding(LOGIN, None, "ports", "pinned port", str(err))])
        absent = mounts_report(profile, alloc, where, assembly.folder, start)
        if absent is not None:      # before etcd/NATS: their containers mount the same folders
            return absent
        try:
            dep = assembly.prepare(alloc, sp)
        except deploy.ServerError as err:
            return Report(profile.id, [Finding("nodes", None, "setup", "launch plan", str(err))])
        report = run(profile, sp, alloc, where, assembly.folder, extra=extra, mounts_checked=True)
        report.notes = dep.notes + report.notes
        return report
    finally:
        alloc.release()


def _answer(path: Path) -> dict | None:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith("{") and '"problems"' in line:
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None
