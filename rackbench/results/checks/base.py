"""What every check of a point's verdict sees (:class:`Judged`) and how it words its outcome.

A check is a named function ``(judged) -> Check | None`` (None: it does not apply to this point), with a docstring
whose first paragraph says what it checks; its family's module holds it, and :data:`rackbench.results.checks.CHECKS`
lists it in the verdict's order.
"""

from __future__ import annotations

from dataclasses import dataclass

from rackbench.core.format import number
from rackbench.recipe.profile import Profile
from rackbench.results.model import Check, PointResult


@dataclass(frozen=True)
class Judged:
    """One point's result as its checks see it: its profile (the gates), the baseline it is held to, how its file
    breaks the checked-in schema, and the run it is compared against (run ids, rackbench.history.compare.Change
    of output tok/s per GPU)."""

    result: PointResult
    profile: Profile
    baseline: dict | None = None
    schema_errors: tuple[str, ...] = ()
    against: tuple[str, object] | None = None

    @property
    def gates(self):
        return self.profile.spec.gates


def made(name: str, ok: bool, passed: str, failed: str) -> Check:
    """A check with the message of its outcome: what passed, or what failed and the fix."""
    return Check(name=name, ok=ok, message=passed if ok else failed)


def pct(x: float | None) -> str:
    return number(x, "share", missing="n/a")


def tps(x: float | None) -> str:
    return number(x, "tok/s", missing="n/a")


def count(x: float | None) -> str:
    return number(x, "count", missing="n/a")
