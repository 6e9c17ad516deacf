"""A loaded profile: the effective srt-slurm recipe, the sweep section, the cluster and the model description,
with the typed views every consumer reads (flags, offload pool, capture sizes, topology), parsed once.

This is the layer rules, capacity, planning and results sit on; it imports none of them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from . import yamlio
from .errors import Problem
from .layering import Layered, canonical_json
from .spec.model import ModelSpec
from .spec.srt import SrtRecipe
from .spec.sweep import ClusterSpec, ProfileSection
from .topology import Topology, topology
from .views import EngineFlags

ENGINE_FLAGS = ("backend", "vllm_config", "aggregated")    # where a recipe keeps the engine flags


@dataclass(frozen=True)
class Profile:
    """One sweep profile, parsed and with its derived views; validation is :mod:`servebench.rules`."""

    file: str
    spec: ProfileSection
    recipe: SrtRecipe
    cluster: ClusterSpec
    layers: Layered
    model: ModelSpec | None = None          # recipes/models/<spec.model>.yaml, if described
    flags: EngineFlags = field(init=False)
    topology: Topology = field(init=False)

    def __post_init__(self) -> None:
        flags = EngineFlags.parse(self.recipe.aggregated_flags)
        res = self.recipe.resources
        object.__setattr__(self, "flags", flags)
        object.__setattr__(self, "topology", topology(
            tp=flags.tp, dp=flags.dp, pp=flags.pp, nodes=res.total_nodes, gpus_per_node=res.gpus_per_node,
            workers=res.agg_workers or 1, dp_given=flags.dp_given, dp_launch_mode=self.recipe.backend.dp_launch_mode))

    def recipe_problem(self, path, message: str, fix: str = "") -> Problem:
        """A problem at ``path`` of the recipe, located in the file (and line) that set it."""
        return self.layers.recipe_origins.problem(path, message, fix)

    def profile_problem(self, path, message: str, fix: str = "") -> Problem:
        """A problem at ``path`` of the profile section, located in the file (and line) that set it."""
        return self.layers.profile_origins.problem(path, message, fix)

    def flag_path(self, name: str) -> list[str]:
        """The recipe path of an engine flag, as the recipe spells it (``backend.vllm_config.aggregated.<flag>``)."""
        return [*ENGINE_FLAGS, self.flags.key(name)]

    @property
    def id(self) -> str:
        return f"{self.spec.model}-{self.cluster.gpu_type}-{self.spec.name}"

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def offload(self) -> bool:
        return self.spec.labels.kv_offloading != "none"

    @property
    def served_model_name(self) -> str:
        return str(self.flags.value("served-model-name") or self.recipe.model.path)

    @property
    def fingerprint(self) -> str:
        """sha256 over everything that defines the deployment and the load, except the concurrency.
        Computed on the parsed models, so spelling out a default does not change it."""
        prof = self.spec.model_dump(mode="json", by_alias=True, exclude={"concurrency", "description", "waive"})
        body = canonical_json({"profile": prof, "recipe": self.recipe.model_dump(mode="json"),
                               "cluster": self.cluster.model_dump(mode="json")})
        return hashlib.sha256(body.encode()).hexdigest()

    def case_id(self, concurrency: int) -> str:
        return f"{self.id}-c{concurrency}"

    def effective(self) -> dict:
        """What ``servebench recipe`` prints: the sweep section and the srt-slurm recipe."""
        return {"profile": self.spec.model_dump(mode="json", by_alias=True),
                "recipe": yamlio.plain(self.layers.recipe)}
