"""Offline checks of how a profile loads the servers (profile.load), against the seed harness's settings and
the one-server-per-profile design. Part of :data:`rackbench.catalog.rules.RULES`."""

from __future__ import annotations

from typing import Iterator

from rackbench.catalog.budget import budget, clock, human
from rackbench.core import entry_points
from rackbench.core.errors import Problem
from rackbench.recipe.profile import Profile
from rackbench.recipe.schema.sweep import COMMON_LOAD_KEYS

AIPERF_DEFAULT_ENTRIES = 100      # AIPerf 0.13.0 --num-dataset-entries default

# The seed harness (InferenceX agentic_srt.sh) reads these from the recipe's benchmark.env; rackbench drives AIPerf
# itself from profile keys, so a recipe's value must be carried over, not silently replaced by a default.
BENCHMARK_ENV = {
    "AIPERF_LIVE_FAILED_REQUEST_THRESHOLD": (("gates", "live_error_rate"), float),
    "AIPERF_FAILED_REQUEST_THRESHOLD": (("gates", "error_rate"), float),
    "AGENTIC_WARMUP_GRACE_PERIOD": (("load", "warmup_grace_s"), float),
    "AIPERF_TRACE_IDLE_GAP_CAP_SECONDS": (("load", "idle_gap_cap_s"), float),
    "WEKA_LOADER_OVERRIDE": (("load", "dataset"), str),
}


TRACE_BYTES_LIMIT = 1 << 30       # a generated trace this large takes minutes and gigabytes to build, per point
WORD_BYTES = 6.5                  # bytes per word of rackbench.load.traces' JSON lines (measured: 6.52)


def trace_bytes(shape, sessions: int) -> float:
    """About how large the generated trace of ``sessions`` sessions is: every turn's line repeats the session's
    history so far (system prompt, then per earlier turn an assistant reply, a tool result and a user message);
    subagent sessions, half as long, add their share."""
    t = shape.turns
    words = t * shape.system_words + shape.user_words * t * (t + 1) / 2 + \
        (shape.assistant_words + shape.tool_words) * t * (t - 1) / 2
    return sessions * words * WORD_BYTES * (1 + shape.subagent_rate / 2)


def dataset_load(p: Profile) -> Iterator[Problem]:
    """Catches a named corpus replayed without a per-point cache-bust marker (later points would ride on the prefix
    cache earlier ones built), a concurrency above the trajectories AIPerf reads (see AIPerf options), or a
    generated trace too large to build (over 1 GiB at the highest concurrency)."""
    load = p.spec.load
    if not p.spec.concurrency:
        return
    if load.dataset == "generated":
        top = max(p.spec.concurrency)
        size = trace_bytes(load.trace, top * load.trace.sessions_per_concurrency)
        if size > TRACE_BYTES_LIMIT:
            yield p.profile_problem(
                ["concurrency"], f"concurrency {top}: the generated trace would hold {top} x "
                f"{load.trace.sessions_per_concurrency} sessions, about {size / 2**30:.1f} GiB, built before the point "
                "starts", "lower the concurrency or load.trace.sessions_per_concurrency (or shorter load.trace "
                "turns and words)")
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
    """Catches a seed-harness setting in the recipe's `benchmark.env` that differs from the profile key rackbench uses
    instead.

    Otherwise the run would silently use rackbench's values, not the ones the recipe's harness section says."""
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
                f"but rackbench would use profile.{section}.{field} = {have!r}",
                f"set profile.{section}.{field}: {want}")


def load_generator(p: Profile) -> Iterator[Problem]:
    """Catches a `profile.load.generator` that no installed package registers, or a `profile.load` key the generator
    does not apply (a setting the run would silently not have).

    The generator is asked through the registry (rackbench.core.entry_points), as the run will find it."""
    load = p.spec.load
    try:
        generator = entry_points.load(entry_points.LOAD_GENERATORS, load.generator)
    except LookupError as err:
        yield p.profile_problem(["load", "generator"], str(err), "name a registered load generator")
        return
    honoured = COMMON_LOAD_KEYS | generator.honours
    for key in sorted(set(load.model_fields_set) - honoured):
        yield p.profile_problem(["load", key], f"load generator {load.generator!r} does not apply load.{key}",
                                "remove it, or use a generator that applies it (aiperf applies every load key)")
    for why in generator().option_problems(dict(load.options)):
        yield p.profile_problem(["load", "options"], why, f"see the {load.generator} generator's options")


# What the seed's harness (agentic_srt.sh with InferenceX's AIPerf fork) passed that AIPerf 0.13.0 cannot take.
FORK_ONLY = {"--warmup-requests-per-lane 10": "AIPerf 0.13.0 has no such option (load.agentic_cache_warmup_s is the "
                                              "nearest; the seed's warmup grace is load.warmup_grace_s)"}


def harness_notes(p: Profile) -> list[str]:
    """What a profile's load cannot give that the seed's harness gave, and a corpus read in part without a word."""
    out = []
    bench = p.recipe.benchmark
    if bench.type == "custom" or (bench.command and "agentic" in bench.command) or bench.aiperf_server_metrics:
        out += [f"the seed harness passed {opt}: {why}" for opt, why in FORK_ONLY.items()]
    load = p.spec.load
    if load.dataset != "generated" and load.dataset_entries is None:
        out.append(f"load.dataset_entries unset: AIPerf reads {AIPERF_DEFAULT_ENTRIES} trajectories of {load.dataset} "
                   "(the seed read the whole corpus: 393); set it, or compose presets/seed-harness.yaml")
    return out


def time_budget(p: Profile) -> Iterator[Problem]:
    """Catches a profile whose model load and points' worst case outlast the job's time limit (with
    `profile.allocations: fit`, each allocation its points are split into).

    The worst case of a point is rackbench.catalog.budget's."""
    try:
        b = budget(p)
    except ValueError as err:
        yield p.recipe_problem(["slurm", "time_limit"], str(err), "write it as Slurm does, e.g. 12:00:00")
        return
    if b.limit_s is None or b.fits:
        return
    limit = p.recipe.slurm.time_limit
    one = b.held_s(1)
    if one > b.limit_s:
        yield p.recipe_problem(["slurm", "time_limit"], f"the job's time limit {limit} is shorter than one point's "
                               f"allocation: {b.describe().rsplit(' = ', 1)[0].replace(f'{b.points} point(s)', '1 point')}"
                               f" = {human(one)}", f"raise slurm.time_limit to at least {clock(one)}")
    elif p.spec.search is not None:           # a search runs in one allocation: its probes cannot be split
        yield p.recipe_problem(["slurm", "time_limit"], f"the job's time limit {limit} ({human(b.limit_s)}) is shorter "
                               f"than the search's worst case: {b.describe().replace('point(s)', 'probe(s)')}",
                               f"raise slurm.time_limit to {clock(b.held_s())}, or lower profile.search.max_probes "
                               "or the load's duration_s")
    elif p.spec.allocations == "one":
        parts = b.allocations()
        yield p.recipe_problem(["slurm", "time_limit"], f"the job's time limit {limit} ({human(b.limit_s)}) is shorter "
                               f"than one allocation of every point holds: {b.describe()}",
                               f"raise slurm.time_limit to {clock(b.held_s())}, or set profile.allocations: fit "
                               f"({len(parts)} allocations of {', '.join(map(str, parts))} point(s))")
