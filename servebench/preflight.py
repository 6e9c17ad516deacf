"""Preflight: seconds of checks on every allocated node, in the exact environment each process will get, before
any weights load (``servebench preflight PROFILE``, and first in every hardware run).

On each node, one step runs ``servebench/tools/preflight_node.py`` with the node's interpreter (in the image with
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
from dataclasses import dataclass, field
from pathlib import Path

from .cluster.base import Allocation
from .cluster.request import TOOLS_IN_CONTAINER
from .errors import ConfigError, Problem
from .poll import Done, PollTimeout, poll
from .profile import Profile
from .flag_rules import OBJECT_FLAGS, components
from .server.placement import DETECT_INTERFACES, Placement
from .server.plan import ProcSpec, ServerPlan
from .spec.sweep import ClusterSpec
from .tools import PREFLIGHT

log = logging.getLogger(__name__)
ENTRY_MODULES = {"dynamo.vllm": "dynamo.vllm", "dynamo.frontend": "dynamo.frontend", "vllm serve": "vllm"}


@dataclass(frozen=True)
class Finding:
    node: str
    rank: int | None
    kind: str                 # import | flags | object | model | setup | image | gpus | network | infra | preflight
    check: str
    message: str
    fix: str = ""


@dataclass
class Report:
    profile: str
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def kinds(self) -> set[str]:
        return {f.kind for f in self.findings}

    def lines(self) -> list[str]:
        """One line per problem; a problem every node has alike is one line naming the nodes."""
        groups: dict[tuple, list[Finding]] = {}
        for f in self.findings:
            groups.setdefault((f.kind, f.check, f.message, f.fix), []).append(f)
        head = f"{self.profile}: preflight " + ("passed" if self.ok else f"found {len(groups)} problem(s)") + \
            f" in {self.seconds:.0f} s"
        out = [head]
        for (kind, check, message, fix), found in groups.items():
            nodes = ", ".join(f.node if f.rank is None else f"{f.node} (rank {f.rank})" for f in found)
            out.append(f"  {nodes}: {kind}: {check}: {message}" + (f" (fix: {fix})" if fix else ""))
        return out + [f"  note: {n}" for n in dict.fromkeys(self.notes)]


def entrypoint(proc: ProcSpec) -> tuple[str, list[str]] | None:
    """(entrypoint, its arguments) of a server process, or None (etcd, NATS, setup steps)."""
    argv = list(proc.argv)
    if tuple(argv[:len(DETECT_INTERFACES)]) == DETECT_INTERFACES:
        argv = argv[len(DETECT_INTERFACES):]
    if "-m" in argv[:3] and argv[argv.index("-m") + 1] in ("dynamo.vllm", "dynamo.frontend"):
        return argv[argv.index("-m") + 1], argv[argv.index("-m") + 2:]
    if "--model" in argv and proc.role in ("worker", "headless"):
        return "vllm serve", argv[argv.index("--model"):]
    return None


def retarget(profile: Profile, cluster: ClusterSpec) -> Profile:
    """The profile on another cluster of the same shape (e.g. the local Slurm stand-in for gb200-nv)."""
    need = profile.recipe.resources
    if cluster.gpus_per_node != need.gpus_per_node or cluster.nodes < need.total_nodes:
        raise ConfigError(Problem(profile.file, "profile.cluster", f"cluster {cluster.name} has {cluster.nodes} "
                                  f"nodes x {cluster.gpus_per_node} GPUs; {profile.id} needs {need.total_nodes} x "
                                  f"{need.gpus_per_node}", "pick a cluster of the profile's shape"))
    return dataclasses.replace(profile, cluster=cluster)


def login_findings(profile: Profile, where: Placement) -> list[Finding]:
    """What the login node can tell without a node: the image the recipe wants vs what the cluster runs."""
    out, cl, image = [], profile.cluster, profile.recipe.model.container
    if image and image.lower() != "none" and not cl.slurm.pyxis:
        out.append(Finding("login", None, "image", "container image",
                           f"the recipe runs in {image}; cluster {cl.name} has no pyxis, so every process runs in "
                           f"{where.python} instead (its versions are checked on the nodes)",
                           "run on a cluster with slurm.pyxis: true to check the image itself"))
    dropped = [k for k in (*profile.recipe.sbatch_directives, *profile.recipe.srun_options) if k in cl.slurm.drop]
    if dropped:
        out.append(Finding("login", None, "image", "slurm options",
                           f"cluster {cl.name} does not apply the recipe's {', '.join('--' + k for k in dropped)} "
                           "(slurm.drop: options of the real cluster's nodes and image)",
                           "run on the cluster the recipe was written for to use them"))
    if not where.model.startswith("/"):
        out.append(Finding("login", None, "model", "model directory",
                           f"model.path {where.model!r} is no directory and cluster {cl.name} maps no path for it",
                           f"add runtime.model_paths.{where.model} to recipes/clusters/{cl.name}.yaml"))
    return out


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
    endpoints = []
    if sp.kind == "dynamo" and where.discovery == "etcd":
        endpoints = [{"what": "etcd", "host": where.head, "port": where.ports.etcd},
                     {"what": "NATS", "host": where.head, "port": where.ports.nats}]
    interfaces = sorted({i or "" for i in where.interfaces}) if topo.nodes > 1 else []
    gpus = min(profile.cluster.gpus_per_node, topo.gpus) if profile.cluster.kind == "gpu" else 0
    out = {}
    for rank in range(topo.nodes):
        mine = [p for p in sp.processes if p.rank == rank and entrypoint(p)]
        parse = [{"id": p.name, "entrypoint": entrypoint(p)[0], "args": entrypoint(p)[1]} for p in mine]
        out[rank] = {"node": where.nodes[rank], "rank": rank, "paths": paths, "gpus": gpus,
                     "imports": sorted({ENTRY_MODULES[e["entrypoint"]] for e in parse}), "parse": parse,
                     "objects": objects, "interfaces": interfaces, "endpoints": endpoints,
                     "versions": {k: v for k, v in profile.recipe.identity.frameworks.items()
                                  if k in components(profile) or k not in ("vllm", "dynamo")}}
    return out


def run(profile: Profile, sp: ServerPlan, allocation: Allocation, where: Placement, log_dir: Path,
        timeout: float = 900.0) -> Report:
    """Run the node checks on every node of the allocation (in parallel) and collect the findings."""
    start = time.monotonic()
    report = Report(profile.id, login_findings(profile, where))
    tool = f"{TOOLS_IN_CONTAINER}/preflight_node.py" if allocation.request.container_image else str(PREFLIGHT)
    procs = {}
    for rank, req in requests(profile, sp, where).items():
        worker = next((p for p in sp.processes if p.rank == rank and p.role in ("worker", "headless")), None)
        env = dict(worker.env) if worker else {}
        argv = [*DETECT_INTERFACES, where.python, tool, json.dumps(req)] if "" in req["interfaces"] \
            else [where.python, tool, json.dumps(req)]
        procs[rank] = allocation.launch(rank, f"preflight{rank}", argv, env, log_dir / f"preflight{rank}.log",
                                        role="preflight", oneshot=True)
    try:
        poll(lambda: Done(True) if all(not p.alive() for p in procs.values()) else "running",
             timeout=timeout, interval=0.5, backoff=1.2, max_interval=5, what=f"{profile.id} preflight")
    except PollTimeout:
        allocation.stop_all(list(procs.values()))
    for rank, proc in procs.items():
        answer = _answer(proc.log)
        if answer is None:
            report.findings.append(Finding(proc.node, rank, "preflight", "node checks", f"no answer (exit "
                                           f"{proc.popen.returncode}); last lines of {proc.log}:\n{proc.tail(15)}"))
            continue
        report.findings += [Finding(proc.node, rank, p["kind"], p["check"], p["message"], p["fix"])
                            for p in answer["problems"]]
        report.notes += answer["notes"]
    report.seconds = time.monotonic() - start
    for line in report.lines():
        log.info("%s", line)
    return report


def allocate_and_check(profile: Profile, results_dir: Path, root: Path) -> Report:
    """``servebench preflight``: allocate the profile's nodes, run its setup steps and etcd/NATS, check every
    node, release (whatever happens). A setup step that fails is a finding too."""
    from .cluster import backend_for
    from .cluster.request import configs_dir, request_for
    from .server import deploy
    from .server.placement import placement_for
    from .server.plan import plan

    backend = backend_for(profile.cluster.backend)
    why = backend.unavailable()
    if why:
        return Report(profile.id, [Finding("login", None, "preflight", "allocation", f"cannot allocate on "
                                           f"{profile.cluster.name}: {why}")])
    run_id = "preflight-" + time.strftime("%Y%m%d-%H%M%S")
    alloc = backend.allocate(request_for(profile, run_id, results_dir))
    try:
        work = Path(results_dir).resolve() / profile.id
        where = placement_for(profile, alloc.nodes, alloc.addresses(), str(work), root=str(root),
                              job_id=alloc.job_id or run_id, configs=str(configs_dir(profile)))
        sp = plan(profile, where)
        try:
            dep = deploy.prepare(profile, sp, alloc, work / "logs")
        except deploy.ServerError as err:
            return Report(profile.id, [Finding("nodes", None, "setup", "setup steps", str(err))])
        report = run(profile, sp, alloc, where, work / "logs")
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
