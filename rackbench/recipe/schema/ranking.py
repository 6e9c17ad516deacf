"""A ranking (``recipes/rankings/<name>.yaml``): the search profiles whose answers are compared for one SLO tier, and
the arm whose first probe sets a relative tier's limits for every arm (rackbench.catalog.rankings checks it against
the catalog; rackbench.report.rank ranks the answers)."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, StrictStr

from rackbench.recipe.schema.sweep import OneLine, _Strict

Factor = Literal["deployment", "image"]     # what may differ between a ranking's arms besides the deployment
FACTORS: tuple[str, ...] = get_args(Factor)


class RankingSpec(_Strict):
    """Which deployments serve one SLO tier best per GPU, each found by its own search in its own allocation."""

    name: StrictStr = Field(description="the ranking's name (its file's name)")
    description: OneLine = Field("", description="the question it answers, in a line")
    tier: StrictStr = Field(description="the profile.slo tier every arm searches (each arm's search.tier)")
    arms: list[StrictStr] = Field(min_length=2, max_length=32, description="the search profiles' ids (the "
                                  "reference's search runs first)")
    factor: Factor = Field("deployment", description="what may differ between arms: the "
                                                   "deployment alone, or also the image")
    reference: StrictStr | None = Field(None, description="the arm whose first probe sets the tier's limits for "
                                        "every arm, where the arms' tier is relative (search.relative): arms "
                                        "judged by limits of their own would not rank")
