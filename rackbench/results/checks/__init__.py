"""The checks of a point's verdict, as a registry (as the recipe rules are, rackbench.catalog.rules.RULES): one
module per family (integrity, window, server, load, gates, bound), each check a named function
``(judged) -> Check | None`` whose docstring's first paragraph says what it checks (docs/results.md shows them,
generated). :data:`CHECKS` lists them in the verdict's order; a new check is one function in its family's file and one
line here.
"""

from __future__ import annotations

from typing import Callable

from rackbench.results.checks import bound, gates, integrity, load, server, window
from rackbench.results.checks.base import Judged
from rackbench.results.model import Check

CheckFn = Callable[[Judged], "Check | None"]

# check name (the name its Check carries) -> the function; in the order a verdict lists them
CHECKS: dict[str, CheckFn] = {
    "schema": integrity.schema,
    "servers": integrity.servers,
    "successful": integrity.successful,
    "own_server": server.own_server,
    "records": integrity.records,
    "generator": window.generator,
    "answered": window.answered,
    "stall": window.stall,
    "trace": window.trace,
    "reuse": load.reuse,
    "counters": integrity.counters,
    "kv-events": server.kv_events,
    "error_rate": load.error_rate,
    "live_error_rate": load.live_error_rate,
    "steady": load.steady,
    "throughput": gates.throughput,
    "slo": gates.slo,
    "baseline": gates.baseline,
    "concurrency": load.concurrency,
    "workers": server.workers,
    "bound": bound.bound,
    "regression": gates.regression,
}


def run(judged: Judged) -> list[Check]:
    """Every check that applies to the point, in the registry's order."""
    out = []
    for check in CHECKS.values():
        found = check(judged)
        if found is not None:
            out.append(found)
    return out
