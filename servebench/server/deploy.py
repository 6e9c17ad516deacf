"""Start a :class:`~servebench.server.plan.ServerPlan` on an allocation and wait until it really serves.

Readiness is the expected number of engines answering, never a bare "healthy" (what counts is
:mod:`servebench.server.readiness`). The wait is bounded by the recipe's ``health_check`` (attempts x interval);
a process that exits meanwhile fails at once with its log tail. Then the versions the running server reports are
compared with the recipe's ``identity.frameworks``.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from typing import Callable

import httpx

from ..cluster import Allocation
from ..cluster.base import NodeProcess
from ..profile import Profile
from ..poll import Done, PollTimeout, poll
from . import metrics, readiness
from .plan import SETUP_SKIPPED, ServerPlan

log = logging.getLogger(__name__)

_VLLM_VERSION = re.compile(r"Initializing a V1 LLM engine \(v([0-9][^)\s]*)\)")


class ServerError(RuntimeError):
    """The deployment did not come up, or does not match the recipe; the message says why and where."""


@dataclass
class Deployment:
    profile: Profile
    plan: ServerPlan
    allocation: Allocation
    log_dir: Path
    processes: dict[str, NodeProcess] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    ready_seconds: float = 0.0
    tokenizer_dir: Path | None = None    # the model's tokenizer as the load generator's host sees it
    notes: list[str] = field(default_factory=list)   # setup steps not run, and why

    def check(self) -> None:
        """Raise ProcessDied (with the node's log tail) if any server process has exited."""
        self.allocation.check()

    def scrape(self, client: httpx.Client | None = None) -> dict[str, metrics.Snapshot]:
        """One metrics snapshot per metrics URL (one per engine-owning process)."""
        own = client is None
        client = client or httpx.Client(timeout=10)
        try:
            return {url: metrics.parse(client.get(url).text, self.plan.model_name) for url in self.plan.metrics_urls}
        finally:
            if own:
                client.close()

    def wait_idle(self, timeout: float, polls: int = 3, interval: float = 1.0) -> tuple[bool, float]:
        """Wait until every engine has no running or waiting request for ``polls`` consecutive scrapes.

        Returns (idle, seconds waited); exits as soon as the engines are idle."""
        start = time.monotonic()
        streak = [0]
        with httpx.Client(timeout=10) as client:
            def probe():
                self.check()
                snap = metrics.total(list(self.scrape(client).values()))
                streak[0] = streak[0] + 1 if snap.idle else 0
                return Done(True) if streak[0] >= polls else f"{snap.running:.0f} running, {snap.waiting:.0f} waiting"
            try:
                poll(probe, timeout=timeout, interval=interval, what="idle engines")
            except PollTimeout:
                return False, time.monotonic() - start
        return True, time.monotonic() - start


def start(profile: Profile, plan: ServerPlan, allocation: Allocation, log_dir: Path,
          tokenizer_dir: Path | None = None, before_servers: Callable[[Deployment], None] | None = None) -> Deployment:
    """Launch ``plan`` tier by tier and wait until it serves: the setup steps on every node (to completion),
    etcd/NATS, ``before_servers(dep)`` (preflight; it raises to stop here), then the frontend and the workers."""
    dep = prepare(profile, plan, allocation, log_dir, tokenizer_dir)
    if before_servers is not None:
        before_servers(dep)
    for spec in plan.processes:
        if spec.role not in ("setup", "infra"):
            _launch(dep, spec)
    t0 = time.monotonic()
    wait_ready(dep, profile.recipe.health_check.timeout_seconds, profile.recipe.health_check.interval_seconds)
    dep.ready_seconds = time.monotonic() - t0
    dep.versions = reported_versions(dep)
    check_identity(profile, dep.versions)
    return dep


def prepare(profile: Profile, plan: ServerPlan, allocation: Allocation, log_dir: Path,
            tokenizer_dir: Path | None = None) -> Deployment:
    """The setup steps (each kind on every node in parallel, in plan order) and etcd/NATS."""
    dep = Deployment(profile, plan, allocation, log_dir, tokenizer_dir=tokenizer_dir)
    setup = [p for p in plan.processes if p.role == "setup"]
    for kind in dict.fromkeys(p.name.rstrip("0123456789") for p in setup):
        run_steps(dep, [p for p in setup if p.name.rstrip("0123456789") == kind])
    for spec in plan.processes:
        if spec.role == "infra":
            _launch(dep, spec)
    return dep


def _launch(dep: Deployment, spec) -> NodeProcess:
    proc = dep.allocation.launch(spec.rank, spec.name, list(spec.argv), dict(spec.env),
                                 dep.log_dir / f"{spec.name}.log", role=spec.role, oneshot=spec.oneshot,
                                 image=spec.image)
    dep.processes[spec.name] = proc
    return proc


def run_steps(dep: Deployment, specs: list, timeout: float | None = None) -> None:
    """Run one-shot steps in parallel and wait; a failing one stops the deployment naming the step, its node
    and its log tail (exit 97: the setup script did not run on that node, said why: a note, not a failure)."""
    procs = [_launch(dep, spec) for spec in specs]
    limit = timeout or dep.profile.recipe.health_check.timeout_seconds
    try:
        poll(lambda: Done(True) if all(not p.alive() for p in procs) else "running", timeout=limit,
             interval=0.5, backoff=1.5, max_interval=10, what=f"{dep.profile.id} setup steps")
    except PollTimeout:
        dep.allocation.stop_all(procs)
        raise ServerError(f"{dep.profile.id}: setup steps still running after {limit:.0f} s: "
                          + ", ".join(p.name for p in procs if p.alive())) from None
    failed = []
    for proc in procs:
        code = proc.popen.returncode
        if code == SETUP_SKIPPED:
            said = [ln for ln in proc.tail(20).splitlines() if ln.startswith("servebench:")]
            dep.notes.append(f"{proc.name.rstrip('0123456789')}: {(said or [proc.tail(1)])[-1]}")
        elif code != 0:
            failed.append(f"{proc.name} on node {proc.node} exited with {code} ({' '.join(proc.argv[-3:])}); "
                          f"last lines of {proc.log}:\n{proc.tail(15)}")
    if failed:
        raise ServerError(f"{dep.profile.id}: a setup step failed before any server started:\n" + "\n".join(failed))


def _json(client: httpx.Client, url: str) -> tuple[int, object]:
    try:
        resp = client.get(url)
    except httpx.HTTPError as err:
        return 0, f"{type(err).__name__}: {err}"
    try:
        return resp.status_code, resp.json()
    except ValueError:
        return resp.status_code, resp.text[:200]


def wait_ready(dep: Deployment, timeout: float, interval: float) -> None:
    with httpx.Client(timeout=5) as client:
        def probe():
            dep.check()
            waiting = readiness.interpret(dep.plan, {u: _json(client, u) for u in readiness.urls(dep.plan)})
            if waiting is None:
                return Done(None)
            log.debug("%s: %s", dep.profile.id, waiting)
            return waiting
        try:
            poll(probe, timeout=timeout, interval=min(interval, 2.0), what=f"{dep.profile.id} readiness")
            return
        except PollTimeout as err:
            waiting = err.last
    dep.check()
    tails = "\n".join(f"--- {p.name} on node {p.node}: {p.log}\n{p.tail(15)}" for p in dep.processes.values())
    raise ServerError(f"{dep.profile.id}: not ready after {timeout:.0f} s (health_check: "
                      f"{dep.profile.recipe.health_check.max_attempts} x "
                      f"{dep.profile.recipe.health_check.interval_seconds} s); still waiting for: {waiting}\n{tails}")


def reported_versions(dep: Deployment) -> dict[str, str]:
    """Versions as the running processes report them: vLLM's ``/version`` (plain vLLM) or its engine start-up
    line ("Initializing a V1 LLM engine (vX)"); the Dynamo frontend's OpenAPI document (``info.version``)."""
    out: dict[str, str] = {}
    with httpx.Client(timeout=5) as client:
        if dep.plan.kind == "vllm":
            code, body = _json(client, f"{dep.plan.api_url}/version")
            if code == 200 and isinstance(body, dict) and body.get("version"):
                out["vllm"] = str(body["version"])
        else:
            code, body = _json(client, f"{dep.plan.api_url}/openapi.json")
            info = body.get("info") if isinstance(body, dict) else None
            if code == 200 and isinstance(info, dict) and info.get("version"):
                out["dynamo"] = str(info["version"])
    for proc in dep.processes.values():
        if "vllm" in out:
            break
        try:
            text = proc.log.read_text(errors="replace")
        except OSError:
            continue
        if m := _VLLM_VERSION.search(text):
            out["vllm"] = m.group(1)
    return out


def _same_release(reported: str, pinned: str) -> bool:
    """0.31.0+cpu matches 0.31.0; 1.3.0 does not match 1.3.1."""
    return reported.split("+")[0] == pinned.split("+")[0]


def check_identity(profile: Profile, versions: dict[str, str]) -> None:
    pinned = profile.recipe.identity.frameworks
    bad = [f"{name}: server reports {versions[name]}, recipe identity.frameworks.{name} says {want}"
           for name, want in pinned.items() if name in versions and not _same_release(versions[name], want)]
    if bad:
        raise ServerError(f"{profile.id}: running server does not match the recipe: " + "; ".join(bad)
                          + " (fix: use the pinned image/venv, or update identity.frameworks)")


def dump(dep: Deployment, path: Path) -> None:
    path.write_text(json.dumps({"profile": dep.profile.id, "kind": dep.plan.kind, "api_url": dep.plan.api_url,
                                "ready_seconds": round(dep.ready_seconds, 1), "versions": dep.versions,
                                "engines": [e.__dict__ for e in dep.plan.engines]}, indent=1))
