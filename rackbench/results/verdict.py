"""Judge one point's result against its profile's gates (and a baseline): every check of the registry
(rackbench.results.checks.CHECKS) that applies, in order; each failed check has its own message.

The pytest case judges once and stores the :class:`~rackbench.results.model.Verdict` with the point; reports show
that stored verdict and never re-judge.
"""

from __future__ import annotations

from datetime import datetime, timezone

from rackbench.recipe.profile import Profile
from rackbench.results import checks
from rackbench.results.checks.base import Judged
from rackbench.results.model import PointResult, Verdict


def judge(result: PointResult, profile: Profile, baseline: dict | None = None,
          baseline_file: str | None = None, schema_errors: list[str] = (), against: tuple[str, object] | None = None
          ) -> Verdict:
    """All checks in order. ``schema_errors``: how the written file breaks the checked-in JSON Schema (what
    consumers of the file rely on). With a baseline (rackbench.results.baseline), the point must also keep its
    throughput within the profile's tolerance; with ``against`` (run ids, a rackbench.history.compare.Change), not
    be worse with confidence."""
    found = checks.run(Judged(result, profile, baseline, tuple(schema_errors), against))
    return Verdict(passed=all(c.ok for c in found), checks=found, baseline=baseline_file,
                   judged_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
