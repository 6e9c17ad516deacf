"""`rackbench render TARGET`: the allocation a profile or case gets (its job script, every process's command and
environment, the load generator's command), or each arm's of a ranking, submitting nothing."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from rackbench.core.results_folder import ResultsFolder
from rackbench.core.secrets import masked, masked_argv
from rackbench.cli.base import RESULTS_DIR, Command
from rackbench.cli.recipes import catalog, one

if TYPE_CHECKING:
    from rackbench.recipe.profile import Profile


class RenderCommand(Command):
    name = "render"
    help = "print the allocation a profile or case gets (job script, every process's command), submitting nothing"
    options = (RESULTS_DIR,)

    def add_arguments(self, parser) -> None:
        parser.add_argument("target", help="case id (kimi-k3-gb200-dep-c64), profile, or ranking (each arm's)")

    def run(self, args) -> int:
        cat = catalog(args)
        ranking = cat.ranking(args.target)
        if ranking is None:
            return self.render(one(cat, args.target), args)
        print(f"# ranking {ranking.name}: {ranking.spec.description}; tier {ranking.spec.tier}; "
              f"{len(ranking.arms)} searches, one allocation each, in this order (`rackbench plan {ranking.name}` "
              "prices them)")
        for prof in ranking.arms:
            print()
            self.render(prof, args)
        return 0

    def render(self, prof, args) -> int:
        from rackbench.server.assembly import Assembly
        assembly = Assembly(prof, ResultsFolder.at(Path(args.results_dir).absolute()), "RUN", dry=True,
                            root=Path.cwd())
        req, alloc, sp = assembly.render()
        cl = prof.cluster
        print(f"# {prof.id}: cluster {cl.name}, backend {cl.backend}, {req.nodes} nodes x {req.gpus_per_node} GPUs")
        print(f"# time budget: {budget_line(prof)}")
        script = assembly.backend.job_script(req)
        if script is not None:
            print(f"# job script ({assembly.folder.job_script(req.name)}):")
            print(script)
            print("# each process below is started in that job as shown (JOB = the job id the scheduler returns):")
        else:
            print(f"# {cl.backend} backend: the processes below run as shown, no scheduler")
        print(f"# {sp.kind}: {len(sp.processes)} processes, {len(sp.engines)} engine(s), "
              f"{len(sp.metrics_urls)} metrics URL(s), {sp.expected_instances} registering worker(s); "
              f"API {sp.api_url}")
        procs = alloc.processes
        shared = {k: v for k, v in procs[0].env.items() if all(p.env.get(k, object()) == v for p in procs)} \
            if procs else {}
        if shared:
            print("\n# environment of every process")
            _print_env(shared)
        specs = {spec.name: spec for spec in sp.processes}
        for proc in procs:
            print(f"\n## {proc.name} ({proc.role}) on node {proc.rank} ({proc.node})")
            spec = specs.get(proc.name)
            if spec is not None:
                print(f"# runs {spec.container.describe()}")
                if spec.preamble:
                    print("# preamble, in this step before the process: " + "; ".join(
                        f"{st['name']}: {shlex.join(st['argv'])}" + (f" (only if {st['unless_missing']} exists)"
                                                                     if st.get("unless_missing") else "")
                        for st in spec.preamble))
            _print_env({k: v for k, v in proc.env.items() if k not in shared})
            print(shlex.join(masked_argv(proc.command)))
        print("\n# engines (DP rank -> metrics URL)")
        for eng in sp.engines:
            print(f"engine {eng.dp_rank} on node {eng.rank}: {eng.metrics_url}")
        _print_load(prof, sp, args.target, assembly, alloc)
        return 0


def budget_line(prof: Profile) -> str:
    """What one allocation of the profile holds against the job's time limit (rackbench.catalog.budget)."""
    from rackbench.catalog.budget import budget, human
    b = budget(prof)
    bound = f"; {b.describe_bound()}"
    if b.limit_s is None:
        return f"{b.describe()}; no job time limit in the recipe (the partition's default applies){bound}"
    if b.fits:
        over = b.bound_s() > b.limit_s
        return (f"{b.describe()} within the {prof.recipe.slurm.time_limit} limit ({human(b.limit_s - b.held_s())} "
                f"spare){bound}" + (": past the limit, so a slow readiness or a stuck point ends the job before the "
                                    "suite's own timeouts do" if over else ""))
    parts = b.allocations()
    return (f"{b.describe()} > the {prof.recipe.slurm.time_limit} limit: the points are split over {len(parts)} "
            f"allocations of {', '.join(map(str, parts))} (profile.allocations: fit), each up to "
            f"{human(b.held_s(max(parts)))}{bound}")


def _print_load(prof: Profile, sp, target: str, assembly, alloc) -> None:
    """Where the load generator runs and its step's command, for the case named (or the profile's first point)."""
    from rackbench.catalog.points import Point
    from rackbench.load import client
    from rackbench.load.generator import generator_for
    from rackbench.load.measure import invocation, job_for

    conc = next((c for c in prof.spec.concurrency if prof.case_id(c) == target), prof.spec.concurrency[0])
    point = Point(prof, conc)
    job = job_for(point, sp, assembly.results.case(prof.id, point.id), "RUN", write=False)
    gen = generator_for(prof.spec.load.generator)
    inv = invocation(gen, job)
    where = sp.client
    print(f"\n## client: {gen.name} for {point.id} on {where.describe()}")
    if where.preamble or inv.steps:
        print("# preamble, in this step before the load generator: " + "; ".join(
            f"{st['name']}: {shlex.join(st['argv'])}" if st.get("argv") else f"{st['name']}: mkdir {' '.join(st['mkdir'])}"
            for st in (*where.preamble, *inv.steps)))
    env = client.environment(where, inv.env)
    _print_env(env)
    argv = client.command(where, inv)
    if where.on == "head":
        argv = alloc.launch(where.rank, "client", argv, env, inv.log, role="client", oneshot=True,
                            image=where.image).command
    print(shlex.join(masked_argv(argv)))
    print(f"# {gen.name} for {point.id}, as the step above runs it (each option: docs/load.md#aiperf-options)")
    print(shlex.join(masked_argv(inv.argv)))


def _print_env(env: dict) -> None:
    for key, value in masked(env).items():
        print(f"unset {key}" if value is None else f"export {key}={shlex.quote(value)}")


COMMANDS = (RenderCommand,)
