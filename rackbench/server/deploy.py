"""Start a :class:`~rackbench.server.plan.ServerPlan` on an allocation and wait until it really serves.

Readiness is the expected number of engines answering, never a bare "healthy" (what counts is
:mod:`rackbench.server.readiness`). The wait is bounded by the recipe's ``health_check`` (attempts x interval);
a process that exits meanwhile fails at once with its log tail. Then the versions the running server reports are
compared with the recipe's ``identity.frameworks``.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING, Callable

from rackbench.cluster import Allocation
from rackbench.cluster.base import NodeProcess
from rackbench.core.files import write_json
from rackbench.core.poll import Done, PollTimeout, poll
from rackbench.core.results_folder import ProfileFolder
from rackbench.recipe.profile import Profile
from rackbench.server import counters as metrics
from rackbench.server import identity, machine, readiness
from rackbench.server.containers import preamble_said, unmet_needs
from rackbench.server.plan import ServerPlan

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

_VLLM_VERSION = re.compile(r"Initializing a V1 LLM engine \(v([0-9][^)\s]*)\)")


def _http():
    """httpx, imported where a deployment is first spoken to, not with this module: every pytest start loads it
    (the plugin's fixtures); with numpy and the Prometheus client it was 0.4 of that start's 0.9 CPU-s."""
    import httpx
    return httpx


def http_client(timeout: float = 10) -> httpx.Client:
    """A client to keep for many requests to a deployment: making one costs ~40 ms of CPU (its TLS context), which a
    scrape every half second would pay beside the server it measures."""
    return _http().Client(timeout=timeout)


class ServerError(RuntimeError):
    """The deployment did not come up, does not match the recipe, or stopped answering; the message says why
    and where."""


@dataclass
class Deployment:
    profile: Profile
    plan: ServerPlan
    allocation: Allocation
    folder: ProfileFolder
    processes: dict[str, NodeProcess] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    ready_seconds: float = 0.0
    tokenizer_dir: Path | None = None    # the model's tokenizer as the load generator's host sees it
    notes: list[str] = field(default_factory=list)   # preamble steps not run, and why
    machine: list[dict] = field(default_factory=list)   # each host's record (rackbench.server.machine)
    machine_extra: dict = field(default_factory=dict)   # a site's pytest_rackbench_machine_info fields
    token: str = ""                      # in every process's environment (rackbench.server.identity)

    @property
    def log_dir(self) -> Path:
        return self.folder.logs

    def check_answering(self) -> None:
        """Where the nodes are this machine: ServerError (one line) unless the process listening on the API port is
        one of this deployment's (rackbench.server.identity)."""
        if not self.allocation.shares_host or not self.token:
            return
        other = identity.answering(self.plan.api_url, self.token)
        if other is not None:
            raise ServerError(f"{self.profile.id}: {other}")

    def kv_events(self) -> dict[str, float] | None:
        """The KV router's applied events so far, by status (rackbench.server.counters.kv_events); None where the
        deployment has no KV-aware router, or its page does not answer or has no such counter (said in the log)."""
        url = self.plan.frontend.router_metrics_url(self.profile, self.plan)
        if url is None:
            return None
        try:
            with _http().Client(timeout=10) as client:
                return metrics.kv_events(client.get(url).text)
        except (_http().HTTPError, ValueError) as err:
            log.warning("%s: no KV-event counters from %s: %s", self.profile.id, url, err)
            return None

    def ready_workers(self) -> tuple[int, int]:
        """(serving instances ready now, instances the deployment started with): asked at each point's start, so a
        worker lost between points is seen (its point fails) and an A/B of arms with unequal workers is no A/B."""
        with _http().Client(timeout=5) as client:
            answers = {u: _json(client, u) for u in readiness.urls(self.plan)}
        return self.plan.frontend.ready_workers(self.plan, answers), self.plan.expected_instances

    def check(self) -> None:
        """Raise ProcessDied (with the node's log tail) if any server process has exited."""
        self.allocation.check()

    def scrape(self, client: httpx.Client | None = None) -> dict[str, metrics.Snapshot]:
        """One metrics snapshot per metrics URL (one per engine-owning process). A server that does not answer:
        ProcessDied if one of its processes has exited (that is the news), else ServerError naming the URL."""
        own = client is None
        client = client or _http().Client(timeout=10)
        out = {}
        try:
            for url in self.plan.metrics_urls:
                try:
                    out[url] = metrics.parse(client.get(url).text, self.plan.model_name)
                except _http().HTTPError as err:
                    self.check()
                    raise ServerError(f"{self.profile.id}: {url} does not answer ({type(err).__name__}: "
                                      f"{err}); the servers' logs are in {self.log_dir}") from None
            return out
        finally:
            if own:
                client.close()

    def counters(self, client: httpx.Client | None = None) -> metrics.Snapshot:
        """Every engine's counters, summed (one scrape of each metrics URL)."""
        return metrics.total(list(self.scrape(client).values()))

    def wait_idle(self, timeout: float, polls: int = 3, interval: float = 1.0) -> tuple[bool, float]:
        """Wait until every engine has no running or waiting request for ``polls`` consecutive scrapes.

        Returns (idle, seconds waited); exits as soon as the engines are idle."""
        start = time.monotonic()
        streak = [0]
        with _http().Client(timeout=10) as client:
            def probe():
                self.check()
                snap = self.counters(client)
                streak[0] = streak[0] + 1 if snap.idle else 0
                return Done(True) if streak[0] >= polls else f"{snap.running:.0f} running, {snap.waiting:.0f} waiting"
            try:
                poll(probe, timeout=timeout, interval=interval, what="idle engines")
            except PollTimeout:
                return False, time.monotonic() - start
        return True, time.monotonic() - start


def start(profile: Profile, plan: ServerPlan, allocation: Allocation, folder: ProfileFolder,
          tokenizer_dir: Path | None = None, before_servers: Callable[[Deployment], None] | None = None) -> Deployment:
    """Launch ``plan`` tier by tier and wait until it serves: etcd/NATS, ``before_servers(dep)`` (preflight; it
    raises to stop here), each host's machine record, then the frontend and the workers, each running its preamble
    (setup script, Dynamo install) in its own step first."""
    dep = prepare(profile, plan, allocation, folder, tokenizer_dir)
    if before_servers is not None:
        before_servers(dep)
    dep.machine = machine.record(plan, allocation, folder)     # before the servers: a GPU process now is a tenant
    for spec in plan.processes:
        if spec.role != "infra":
            _launch(dep, spec)
    t0 = time.monotonic()
    wait_ready(dep, profile.recipe.health_check.timeout_seconds, profile.recipe.health_check.interval_seconds)
    dep.ready_seconds = time.monotonic() - t0
    dep.check_answering()
    dep.notes += preamble_notes(dep)
    dep.versions = reported_versions(dep)
    check_identity(profile, dep.versions)
    return dep


def record(profile: Profile, plan: ServerPlan, allocation: Allocation, folder: ProfileFolder) -> Deployment:
    """A dry allocation's deployment: every process of the plan launched in order, i.e. recorded, none waited for."""
    dep = Deployment(profile, plan, allocation, folder)
    for spec in plan.processes:
        _launch(dep, spec)
    return dep


def prepare(profile: Profile, plan: ServerPlan, allocation: Allocation, folder: ProfileFolder,
            tokenizer_dir: Path | None = None) -> Deployment:
    """What comes before the servers: the plan's check that every process sees what it needs, then etcd/NATS."""
    unmet = unmet_needs(plan)
    if unmet:
        raise ServerError(f"{profile.id}: the plan cannot work as launched:\n" + "\n".join(unmet))
    dep = Deployment(profile, plan, allocation, folder, tokenizer_dir=tokenizer_dir,
                     token=identity.new_token(profile.id))
    for spec in plan.processes:
        if spec.role == "infra":
            _launch(dep, spec)
    return dep


def _launch(dep: Deployment, spec) -> NodeProcess:
    env = {**spec.env, identity.TOKEN_ENV: dep.token} if dep.token else dict(spec.env)
    proc = dep.allocation.launch(spec.rank, spec.name, list(spec.command), env, dep.folder.log(spec.name),
                                 role=spec.role, oneshot=spec.oneshot, image=spec.image)
    dep.processes[spec.name] = proc
    return proc


def preamble_notes(dep: Deployment) -> list[str]:
    """What the preambles said they did not run (a setup script on a node without the model), once each."""
    return list(dict.fromkeys(f"{proc.node}: {line}" for proc in dep.processes.values()
                              for line in preamble_said(proc.log)[0]))


def _json(client: httpx.Client, url: str) -> tuple[int, object]:
    try:
        resp = client.get(url)
    except _http().HTTPError as err:
        return 0, f"{type(err).__name__}: {err}"
    try:
        return resp.status_code, resp.json()
    except ValueError:
        return resp.status_code, resp.text[:200]


def wait_ready(dep: Deployment, timeout: float, interval: float) -> None:
    with _http().Client(timeout=5) as client:
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
    """Versions as the running processes report them: what the frontend's API says (vLLM's ``/version``, the Dynamo
    frontend's OpenAPI ``info.version``), and vLLM's engine start-up line ("Initializing a V1 LLM engine (vX)")
    where the API did not say."""
    with _http().Client(timeout=5) as client:
        out = dict(dep.plan.frontend.reported_versions(dep.plan, lambda url: _json(client, url)))
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


def same_release(reported: str, pinned: str) -> bool:
    """Whether a running component is the pinned release, as PEP 440 versions: 0.31.0+cpu (a local build) is
    0.31.0, 1.3 is 1.3.0, 1.3.0 is not 1.3.1; a pin with a local part (2.11.0+cu130) must match it too."""
    from packaging.version import InvalidVersion, Version
    try:
        have, want = Version(reported), Version(pinned)
    except InvalidVersion:
        return reported.strip() == pinned.strip()
    return Version(have.public) == Version(want.public) and (want.local is None or have.local == want.local)


def check_identity(profile: Profile, versions: dict[str, str]) -> None:
    pinned = profile.recipe.identity.frameworks
    bad = [f"{name}: server reports {versions[name]}, recipe identity.frameworks.{name} says {want}"
           for name, want in pinned.items() if name in versions and not same_release(versions[name], want)]
    if bad:
        raise ServerError(f"{profile.id}: running server does not match the recipe: " + "; ".join(bad)
                          + " (fix: use the pinned image/venv, or update identity.frameworks)")


def dump(dep: Deployment, folder: ProfileFolder) -> Path:
    return write_json(folder.deployment, {"profile": dep.profile.id, "kind": dep.plan.kind, "api_url": dep.plan.api_url,
                                          "token": dep.token, "ready_seconds": round(dep.ready_seconds, 1), "versions": dep.versions,
                                          "engines": [e.__dict__ for e in dep.plan.engines],
                                          "machine": dep.machine, "machine_extra": dep.machine_extra})
