"""A loaded profile: the effective srt-slurm recipe, the sweep section, the cluster and the model description,
with the typed views every consumer reads (flags, offload pool, capture sizes, topology), parsed once.

This is the layer rules, capacity, planning and results sit on; it imports none of them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from rackbench.core import yamlio
from rackbench.core.errors import Problem
from rackbench.core.former_name import as_named_before
from rackbench.recipe.layering import Layered, canonical_json
from rackbench.recipe.schema.model import ModelSpec
from rackbench.recipe.schema.srt import SrtRecipe
from rackbench.recipe.schema.cluster import ClusterSpec
from rackbench.recipe.schema.sweep import ProfileSection
from rackbench.recipe.topology import Topology, topology
from rackbench.recipe.engine_flags import EngineFlags

ENGINE_FLAGS = ("backend", "vllm_config", "aggregated")    # where a recipe keeps the engine flags
# Keys added to the profile section after runs were recorded: left out of the fingerprint while at these defaults,
# so an unchanged recipe keeps the fingerprint its earlier runs carry (and the history still pairs them).
LATER_KEYS = {("profile", "load", "generator"): "aiperf", ("profile", "load", "options"): {},
              ("profile", "load", "dataset_timeout_s"): None,
              ("cluster", "backend_options"): {}, ("cluster", "runtime", "model_load_gib_per_s"): None,
              ("cluster", "runtime", "startup_s"): 600, ("cluster", "runtime", "container_mounts"): {},
              ("cluster", "slurm", "node_local"): {}, ("profile", "gates", "require_steady"): False,
              ("profile", "gates", "max_stall_s"): 30.0, ("profile", "gates", "slo"): None,
              ("profile", "search"): None, ("cluster", "slurm", "release_wait_s"): 30}


@dataclass(frozen=True)
class Profile:
    """One sweep profile, parsed and with its derived views; validation is :mod:`rackbench.catalog.rules`."""

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
    def markers(self) -> list[str]:
        """The pytest markers of this profile's cases: its cluster's, and ``offload`` for an offload arm."""
        return self.cluster.markers + (["offload"] if self.offload else [])

    @property
    def served_model_name(self) -> str:
        return str(self.flags.value("served-model-name") or self.recipe.model.path)

    @property
    def fingerprint(self) -> str:
        """sha256 over everything that defines the deployment and the load, except the concurrency, where the
        client's own files come from (runtime.client: its interpreter, install and cache, not what it sends), the
        run-length rule (load.stop: the result says which ran), the service-level tiers (profile.slo: how the
        requests are judged, not what they are; likewise search.relative and search.at_least) and the bound a point must show (gates.bound: how it is judged).
        Computed on the parsed models, so spelling out a default does not change it."""
        prof = self.spec.model_dump(mode="json", by_alias=True, exclude={"concurrency", "description", "waive",
                                                                        "allocations", "slo"})
        cluster = self.cluster.model_dump(mode="json")
        cluster["runtime"].pop("client", None)
        cluster.pop("cost", None)                     # what the GPU time costs, not what is measured
        if cluster["runtime"].get("model_load_gib_per_s") is None:
            cluster["runtime"]["startup_s"] = 600     # a start-up time alone prices the plan only: hashed as before
        cluster["slurm"].pop("login_sees", None)      # what the login node checks before sbatch, not what runs
        prof.get("load", {}).pop("stop", None)        # how long a point runs, not what it measures (result.run.mode)
        prof.get("gates", {}).pop("bound", None)      # what must have bound a point: how it is judged, like slo
        for key in ("relative", "at_least"):           # a search tier's limits and the least answer: judging too
            (prof.get("search") or {}).pop(key, None)
        whole = {"profile": prof, "recipe": self.recipe.model_dump(mode="json"), "cluster": cluster}
        for path, default in LATER_KEYS.items():
            *parents, key = path
            node = whole
            for part in parents:
                node = node.get(part, {})
            if node.get(key, default) == default:
                node.pop(key, None)
        body = as_named_before(canonical_json(whole))   # the rename left every fingerprint as it was
        return hashlib.sha256(body.encode()).hexdigest()

    @property
    def load_fingerprint(self) -> str:
        """sha256 of the load section alone: two profiles with the same one drive their servers alike."""
        body = canonical_json(self.spec.load.model_dump(mode="json", by_alias=True, exclude={"stop"}))
        return hashlib.sha256(body.encode()).hexdigest()

    def case_id(self, concurrency: int) -> str:
        return f"{self.id}-c{concurrency}"

    def effective(self) -> dict:
        """What ``rackbench recipe`` prints: the sweep section and the srt-slurm recipe."""
        return {"profile": self.spec.model_dump(mode="json", by_alias=True),
                "recipe": yamlio.plain(self.layers.recipe)}
