"""One pytest case per ranking (recipes/rankings/, rackbench.catalog.rankings): after its arms' searches ran in this
session, each a case of its own in its own allocation (the reference arm first, so every arm is judged by the limits
it measured: rackbench.plugin.search.shared_limits), rank their answers (rackbench.report.rank) and store the ranking
with what the plan said it would cost (rackbench.report.plan) in ``rankings/<name>.json`` of the run's folder.

The case passes when every arm's search stored an answer in this session; "within noise" or "cannot rank" with its
reasons is what a ranking is for, not a failure. Selected by ``-m rank`` or ``-k rank`` (with its arms' searches,
which carry the ``rank`` mark too), never by selecting a profile's points.
"""

from __future__ import annotations

import json
import logging

import pytest

from rackbench.core.errors import ConfigError
from rackbench.core.files import write_atomic
from rackbench.plugin.fixtures import unavailable
from rackbench.plugin.session import of

log = logging.getLogger(__name__)


def rank_cases(metafunc: pytest.Metafunc) -> None:
    """One case per ranking, marked with every arm's markers (``-m gb200 -k rank`` selects the GB200 one)."""
    try:
        rankings = of(metafunc.config).catalog().rankings
    except ConfigError as err:
        pytest.fail(f"invalid recipe(s):\n{err}", pytrace=False)
    params = [pytest.param(r.name, id=f"{r.name}-rank",
                           marks=[*(getattr(pytest.mark, m) for m in r.markers), pytest.mark.rank])
              for r in rankings]
    metafunc.parametrize("sb_ranking", params, indirect=True)


def arm_marks(rankings: list, profile_id: str) -> list:
    """What a search case carries when it is an arm of a ranking: the ``rank`` mark."""
    return [pytest.mark.rank] if any(profile_id in r.spec.arms for r in rankings) else []


def reference_first(rankings: list, profiles: list) -> list:
    """The search profiles in the order they run: an arm judged by another's limits after that arm."""
    from rackbench.catalog.rankings import referenced
    return sorted(profiles, key=lambda p: referenced(rankings, p.id) is not None)


@pytest.fixture
def sb_ranking(request: pytest.FixtureRequest, record_property) -> dict:
    """Rank this session's searches of the ranking's arms; returns the ranking as stored."""
    from rackbench.report import rank                    # numpy and the result models: not at every pytest start
    from rackbench.report.plan import estimate, ranking_estimate
    session = of(request.config)
    ranking = session.catalog().ranking(request.param)
    for p in ranking.arms:              # a GB200 ranking without its cluster is skipped, as its arms are
        reason = unavailable(p, request.config)
        if reason:
            pytest.skip(f"{ranking.name}: its arm {p.id}: {reason}")
    missing = [p.id for p in ranking.arms if not session.results.search(p.id).is_file()]
    if missing:
        pytest.fail(f"{ranking.name}-rank: no search of {', '.join(missing)} in {session.results.root}: select the "
                    f"ranking's arms with it (-m rank, or -k '{ranking.name} or rank'); see their cases",
                    pytrace=False)
    ids = {p.id for p in ranking.arms}
    arms = rank.load([session.results.root], ranking.spec.factor, only=ids)
    tiers = [t for t in rank.ranking(arms) if t["tier"] == ranking.spec.tier]
    stored = {"ranking": ranking.name, "description": ranking.spec.description, "tier": ranking.spec.tier,
              "factor": ranking.spec.factor, "reference": ranking.spec.reference, "arms": [p.id for p in ranking.arms],
              "order": tiers[0]["order"] if tiers else [], "pairs": tiers[0]["pairs"] if tiers else [],
              "text": rank.text(arms, tiers),
              "plan": ranking_estimate([estimate(p) for p in ranking.arms])}
    path = session.results.ranking(ranking.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(stored, indent=1) + "\n")
    for line in stored["text"]:
        log.info("%s: %s", ranking.name, line)
    record_property("ranking", json.dumps({p["a"] + " / " + p["b"]: p["verdict"] for p in stored["pairs"]}))
    return {**stored, "path": str(path)}
