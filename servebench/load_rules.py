"""Offline checks of how a profile loads the servers (profile.load), against the seed harness's settings and
the one-server-per-profile design. Part of :data:`servebench.rules.RULES`."""

from __future__ import annotations

from typing import Iterator

from .errors import Problem
from .profile import Profile

AIPERF_DEFAULT_ENTRIES = 100      # AIPerf 0.13.0 --num-dataset-entries default

# The seed harness (InferenceX agentic_srt.sh) reads these from the recipe's benchmark.env; servebench drives AIPerf
# itself from profile keys, so a recipe's value must be carried over, not silently replaced by a default.
BENCHMARK_ENV = {
    "AIPERF_LIVE_FAILED_REQUEST_THRESHOLD": (("gates", "live_error_rate"), float),
    "AIPERF_FAILED_REQUEST_THRESHOLD": (("gates", "error_rate"), float),
    "AGENTIC_WARMUP_GRACE_PERIOD": (("load", "warmup_grace_s"), float),
    "AIPERF_TRACE_IDLE_GAP_CAP_SECONDS": (("load", "idle_gap_cap_s"), float),
    "WEKA_LOADER_OVERRIDE": (("load", "dataset"), str),
}


def dataset_load(p: Profile) -> Iterator[Problem]:
    """A named corpus (dataset mode): every point of a profile replays it against the same server, so each needs a
    cache-bust marker of its own, and enough distinct trajectories for its largest concurrency."""
    load = p.spec.load
    if load.dataset == "generated" or not p.spec.concurrency:
        return
    if load.cache_bust == "none" and len(p.spec.concurrency) > 1:
        yield p.profile_problem(
            ["load", "cache_bust"], "cache_bust none: the points of this profile share one server and replay "
            "the same trajectories, so each later point rides on the prefix cache the earlier ones built",
            "use cache_bust: first-turn-prefix (a marker unique per point and trajectory; the seed's setting)")
    entries = load.dataset_entries or AIPERF_DEFAULT_ENTRIES
    top = max(p.spec.concurrency)
    if top > entries:
        yield p.profile_problem(
            ["load", "dataset_entries"], f"concurrency {top} needs {top} distinct trajectories, but AIPerf "
            f"reads {entries} of the corpus" + ("" if load.dataset_entries else " (its default)"),
            "set load.dataset_entries to the corpus size (393 for semianalysis_cc_traces_weka_062126)")


def benchmark_env(p: Profile) -> Iterator[Problem]:
    """A recipe written for the seed harness carries its AIPerf settings in benchmark.env; they must agree with the
    profile keys servebench uses instead, or the run would silently use servebench's values."""
    env = p.recipe.benchmark.env or {}
    for key, ((section, field), kind) in BENCHMARK_ENV.items():
        if key not in env or env[key] is None:
            continue
        want = env[key]
        have = getattr(getattr(p.spec, section), field)
        have = p.spec.gates.live if (section, field) == ("gates", "live_error_rate") else have
        try:
            same = kind(want) == kind(have)
        except (TypeError, ValueError):
            same = False
        if not same:
            yield p.layers.recipe_origins.problem(
                ["benchmark", "env", key], f"the recipe's benchmark.env.{key} = {want!r} (the seed harness's setting) "
                f"but servebench would use profile.{section}.{field} = {have!r}",
                f"set profile.{section}.{field}: {want}")
