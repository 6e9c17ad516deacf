"""Preflight's check of the load generator's client where it runs (rackbench.server.preflight runs it beside the
node checks): the profile's first point as its client would start it, then the generator's own check."""

from __future__ import annotations

from typing import Callable

from rackbench.catalog.points import Point
from rackbench.core.results_folder import ResultsFolder
from rackbench.load.client import environment
from rackbench.load.generator import generator_for
from rackbench.load.measure import job_for
from rackbench.recipe.profile import Profile
from rackbench.server.plan import ServerPlan
from rackbench.server.preflight import CheckStep
from rackbench.tools import preamble_command


def check_steps(profile: Profile, results: ResultsFolder) -> Callable[[ServerPlan], list[CheckStep]]:
    """Preflight's check of the client where it runs: the profile's first point as its client would start it (its
    install, the tokenizer copy, the environment), then the generator's own check instead of the generator."""
    def steps(sp: ServerPlan) -> list[CheckStep]:
        gen = generator_for(profile.spec.load.generator)
        point = Point(profile, profile.spec.concurrency[0])
        job = job_for(point, sp, results.profile(profile.id).case(f"{profile.id}-preflight"), "preflight", write=False)
        check = gen.client_check(job)
        if check is None or sp.client is None:
            return []
        inv = gen.invocation(job)
        c = sp.client
        # a missing model is the node checks' finding: the tokenizer copy is then skipped (said), the rest checked
        prep = tuple({**st, "unless_missing": c.model} if c.model and st.get("argv") else st for st in inv.steps)
        argv = preamble_command(c.python, c.tools, (*c.preamble, *prep), check)
        rank = c.rank if c.on == "head" else None
        if rank is None:           # on this host: not a step of the allocation; preflight checks what it can reach
            return []
        return [CheckStep("client-check", rank, argv, environment(c, inv.env), c.image)]
    return steps
