"""One profile's run, assembled once: allocate -> place -> plan -> deploy. The benchmark session's fixtures,
``rackbench preflight`` and ``rackbench render`` all go through :class:`Assembly`; ``render`` is the same path
with ``dry=True`` (placeholder nodes, every launch recorded with the exact command that would run, nothing
started or submitted).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rackbench.catalog.budget import budget, clock, seconds
from rackbench.cluster import Allocation, AllocationRequest, Backend, backend_for
from rackbench.cluster.request import configs_dir, request_for
from rackbench.core.results_folder import ProfileFolder, ResultsFolder
from rackbench.recipe.profile import Profile
from rackbench.server import deploy
from rackbench.server.containers import unmet_needs
from rackbench.server.generated import GENERATED, cached_path, ensure_model
from rackbench.server.placement import Placement, placement_for
from rackbench.server.plan import ServerPlan, plan
from rackbench.server.ports import PortLease, offset_for


@dataclass
class Assembly:
    profile: Profile
    results: ResultsFolder
    run_id: str
    root: Path = Path(".")                 # relative interpreter paths of the cluster file are taken from here
    dry: bool = False
    xdist_worker: str | None = None
    adjust: Callable[[AllocationRequest], AllocationRequest] | None = None   # a site's allocation hook
    part: int | None = None                # which allocation of a profile whose points are split (1, 2, ...)
    backend: Backend = field(init=False)

    def __post_init__(self) -> None:
        self.backend = backend_for(self.profile.cluster)

    @property
    def folder(self) -> ProfileFolder:
        return self.results.profile(self.profile.id, self.part)

    def request(self) -> AllocationRequest:
        wanted = request_for(self.profile, self.backend, self.run_id, self.folder, self.part, str(self.root))
        return (self.adjust(wanted) or wanted) if self.adjust is not None else wanted

    def limit_problem(self, req: AllocationRequest) -> str | None:
        """Why the allocation ``req`` would end before its points do, where the recipe names no time limit and the
        partition's default applies (read from the scheduler; the recipe's own limit is the time-budget rule's)."""
        if req.time_limit or self.dry:
            return None
        limit = self.backend.default_time_limit(req.scheduler.partition)
        b = budget(self.profile)
        if limit is None or seconds(limit) is None or seconds(limit) >= b.held_s():
            return None
        where = f"partition {req.scheduler.partition}" if req.scheduler.partition else "the default partition"
        return (f"the recipe names no time limit, so {where}'s default {limit} applies, and the allocation holds "
                f"{b.describe()}: set slurm.time_limit to at least {clock(b.held_s())}")

    def allocate(self, req: AllocationRequest | None = None) -> Allocation:
        """The nodes for ``req`` (the request, once a caller has looked at it; else made here)."""
        req = req or self.request()
        return self.backend.dry_run(req) if self.dry else self.backend.allocate(req)

    def model_dir(self) -> Path | None:
        """The model as this host sees it: generated for the embedded default (only its cache path when dry),
        else the cluster's path for the recipe's alias."""
        alias = self.profile.recipe.model.path
        if alias in GENERATED:
            if self.dry:
                return cached_path(alias)
            python = str(self.root / self.profile.cluster.runtime.python)
            return ensure_model(alias, python, self.folder.model_generation_log)
        path = self.profile.cluster.runtime.model_paths.get(alias)
        return Path(path) if path else None

    def placement(self, alloc: Allocation, model_dir: Path | None = None) -> Placement:
        workdir = str(self.folder.root if self.dry else Path(self.folder.root).resolve())
        return placement_for(self.profile, alloc.nodes, alloc.addresses(), workdir, backend=self.backend,
                             root=str(self.root), model_dir=str(model_dir) if model_dir else None,
                             job_id=alloc.job_id or self.run_id, configs=str(configs_dir(self.profile)),
                             port_offset=offset_for(alloc.shares_host, self.xdist_worker, alloc.job_id),
                             shares_host=alloc.shares_host, probe_ports=alloc.shares_host and not self.dry)

    def plan(self, alloc: Allocation, model_dir: Path | None = None) -> tuple[Placement, ServerPlan]:
        """The placement and plan; on this machine every port of the plan is held until ``alloc`` is released."""
        where = self.placement(alloc, model_dir)
        lease = alloc.hold(PortLease(f"pid {os.getpid()}: rackbench run {self.run_id}, profile {self.profile.id}"))\
            if where.probe_ports else None
        return where, plan(self.profile, where, lease)

    def start(self, alloc: Allocation, model_dir: Path | None, sp: ServerPlan,
              before_servers: Callable[[deploy.Deployment], None] | None = None) -> deploy.Deployment:
        """The servers of the plan, up and serving (infra first, each process after its preamble); a dry run records
        the launches."""
        if self.dry:
            return deploy.record(self.profile, sp, alloc, self.folder)
        dep = deploy.start(self.profile, sp, alloc, self.folder, tokenizer_dir=model_dir,
                           before_servers=before_servers)
        deploy.dump(dep, self.folder)
        return dep

    def prepare(self, alloc: Allocation, sp: ServerPlan) -> deploy.Deployment:
        """Only what comes before the servers: the plan's visibility check and etcd/NATS (preflight)."""
        return deploy.prepare(self.profile, sp, alloc, self.folder)

    def render(self) -> tuple[AllocationRequest, Allocation, ServerPlan]:
        """The whole launch, dry: the request, the allocation with every recorded launch, the plan."""
        assert self.dry, "render is the dry run of the assembly"
        alloc = self.allocate()
        _, sp = self.plan(alloc, self.model_dir())
        self.start(alloc, None, sp)
        return alloc.request, alloc, sp


def dry_plan(profile: Profile, results: ResultsFolder | None = None) -> tuple[Placement, ServerPlan]:
    """The placement and plan of ``profile`` on placeholder nodes (what ``rackbench render`` shows)."""
    assembly = Assembly(profile, results or ResultsFolder.at("results"), "RUN", dry=True)
    return assembly.plan(assembly.allocate(), assembly.model_dir())


def launch_problems(profile: Profile) -> list[str]:
    """What would stop the profile's launch as planned, found without a node: a process that needs what it cannot
    see (another step's container), a host path named inside a container (rackbench.server.containers)."""
    return [f"{profile.id}: {line}" for line in unmet_needs(dry_plan(profile)[1])]


def dry_placement(profile: Profile, results: ResultsFolder | None = None) -> Placement:
    return dry_plan(profile, results)[0]
