"""Whether the point was bound by what its profile says it measures (``gates.bound``: the GPU, the load, the
client; rackbench.results.bound judges it)."""

from __future__ import annotations

from rackbench.results.checks.base import Judged
from rackbench.results.model import Check


def bound(p: Judged) -> Check | None:
    """``gates.bound``: the point was bound by what the profile says it measures (rackbench.results.bound)."""
    wanted = p.gates.wanted_bound(p.result.identity.concurrency)
    if wanted is None:
        return None
    got = p.result.bound
    if got is None:
        return Check(name="bound", ok=False, message=f"no bound judged (a result without a series): profile.gates."
                     f"bound wants {wanted}")
    if got.bound == wanted:
        return Check(name="bound", ok=True, message=f"{wanted}-bound as profile.gates.bound wants: {got.reason}")
    return Check(name="bound", ok=False, message=f"{got.bound}-bound, not {wanted}-bound (profile.gates.bound): "
                 f"{got.reason}")
