"""Offline checks of a profile: every failure class that used to cost GPU hours.

Each rule takes a loaded :class:`~rackbench.recipe.profile.Profile` and yields problems that name the file and key
the bad value came from. Rules read the profile's typed views (``p.flags``, ``p.topology``); none re-parses a
flag. ``RULES`` lists them; tests break each one on purpose.
"""

from __future__ import annotations

import math
from typing import Callable, Iterator

from rackbench.catalog import capacity as capacity_model
from rackbench.core.errors import Problem
from rackbench.catalog.flag_rules import (entrypoint_flags, frontend, headless_entrypoint,
                                          object_flags)
from rackbench.catalog.container_rules import unmounted_caches
from rackbench.catalog.flag_type_rules import flag_types
from rackbench.catalog.engine_rules import scheduler_limits
from rackbench.catalog.launch_rules import credential_flags, launch_values, literal_placeholders
from rackbench.catalog.load_rules import benchmark_env, dataset_load, load_generator, time_budget
from rackbench.catalog.offload_rules import connector_conflict, offload_dram_budget, offload_labels
from rackbench.recipe.profile import ENGINE_FLAGS as FLAGS, Profile


Rule = Callable[[Profile], Iterator[Problem]]
MAX_CONCURRENCY = 65536


def concurrency_list(p: Profile) -> Iterator[Problem]:
    """Catches empty, ≤ 0, duplicate or not ascending."""
    conc = p.spec.concurrency
    if not conc:
        yield p.profile_problem(["concurrency"], "empty concurrency list", "list at least one concurrency")
    bad = [c for c in conc if c <= 0]
    if bad:
        yield p.profile_problem(["concurrency"], f"concurrencies must be > 0, got {bad}", "remove them")
    huge = [c for c in conc if c > MAX_CONCURRENCY]
    if huge:
        yield p.profile_problem(
            ["concurrency"], f"concurrencies above {MAX_CONCURRENCY} ({huge}) are not a serving point",
            f"use at most {MAX_CONCURRENCY}")
    if len(set(conc)) != len(conc):
        dups = sorted({c for c in conc if conc.count(c) > 1})
        yield p.profile_problem(["concurrency"], f"duplicate concurrencies {dups}", "list each concurrency once")
    elif conc != sorted(conc):
        yield p.profile_problem(["concurrency"], f"concurrencies must ascend, got {conc}", f"write {sorted(conc)}")


def layout_matches_flags(p: Profile) -> Iterator[Problem]:
    """Catches `profile.layout` TP/DP/PP differ from `--tensor/data/pipeline-parallel-size`."""
    f, lay = p.flags, p.spec.layout
    for dim, flag in (("tp", "tensor-parallel-size"), ("dp", "data-parallel-size"), ("pp", "pipeline-parallel-size")):
        have = getattr(f, dim)
        if have != getattr(lay, dim):
            yield p.recipe_problem(
                p.flag_path(flag),
                f"vLLM gets --{flag} {have} but profile.layout.{dim} is {getattr(lay, dim)}",
                "make them agree (the layout is what results report)")


def expert_parallel(p: Profile) -> Iterator[Problem]:
    """Catches EP ≠ TP × DP with `enable-expert-parallel`, or EP > 1 without it."""
    f, lay = p.flags, p.spec.layout
    if f.expert_parallel:
        want = f.ep
        if lay.ep != want:
            yield p.profile_problem(
                ["layout", "ep"], f"expert parallelism is on, so vLLM's EP = TP x DP = {want}, "
                f"but the layout says EP{lay.ep}", f"set layout.ep: {want}")
    elif lay.ep != 1:
        yield p.profile_problem(
            ["layout", "ep"], f"EP{lay.ep} without --enable-expert-parallel: vLLM runs EP1",
            "set layout.ep: 1 or add enable-expert-parallel: true")


def gpu_count(p: Profile) -> Iterator[Problem]:
    """Catches TP × DP × PP ≠ GPUs of a worker; workers × GPUs ≠ nodes × GPUs per node; recipe vs cluster GPUs per
    node."""
    res, lay, cl = p.recipe.resources, p.spec.layout, p.cluster
    if res.gpus_per_node > cl.gpus_per_node:   # srt-slurm: what the job requests per node (a part is fine)
        yield p.recipe_problem(
            ["resources", "gpus_per_node"],
            f"{res.gpus_per_node} GPUs per node, but cluster {cl.name} has {cl.gpus_per_node}",
            f"set gpus_per_node: {cl.gpus_per_node} or fewer")
    if not res.aggregated:
        yield p.recipe_problem(
            ["resources", "prefill_nodes"], "disaggregated layouts are not supported yet",
            "use agg_nodes/agg_workers")
        return
    if res.total_nodes > cl.nodes:
        yield p.recipe_problem(
            ["resources", "agg_nodes"], f"{res.total_nodes} nodes, cluster {cl.name} has {cl.nodes}",
            f"use at most {cl.nodes} nodes")
    allocated = res.total_nodes * res.gpus_per_node
    per_worker = res.agg_gpus_per_worker
    if per_worker * (res.agg_workers or 1) > allocated:    # fewer is a partial job: GPUs counted as used
        yield p.recipe_problem(
            ["resources", "gpus_per_agg"],
            f"{res.agg_workers or 1} workers x {per_worker} GPUs != {res.total_nodes} nodes x "
            f"{res.gpus_per_node} GPUs = {allocated}: more GPUs than the job requests",
            "use fewer workers or GPUs per worker, or more nodes")
    if (res.agg_workers or 1) > 1 and not frontend(p).many_workers:
        yield p.recipe_problem(
            ["resources", "agg_workers"], f"{res.agg_workers} independent workers behind the "
            f"{p.recipe.frontend.type} frontend: nothing routes between them",
            "use frontend.type: dynamo (its router spreads the load)")
    if lay.gpus != per_worker:
        yield p.profile_problem(
            ["layout"], f"{lay} uses TP x DP x PP = {lay.gpus} GPUs, but a worker has {per_worker} "
            f"({res.total_nodes} nodes x {res.gpus_per_node} GPUs / {res.agg_workers or 1} workers)",
            "change the layout or resources.agg_nodes")


def batch_capacity(p: Profile) -> Iterator[Problem]:
    """Catches `max-num-seqs` × DP < the largest concurrency."""
    lay = p.spec.layout
    seqs = p.flags.max_num_seqs
    if seqs is None or not p.spec.concurrency:
        return
    top = max(p.spec.concurrency)
    if seqs * lay.dp < top:
        yield p.recipe_problem(
            p.flag_path("max-num-seqs"),
            f"max-num-seqs {seqs} x DP {lay.dp} = {seqs * lay.dp} < largest concurrency {top}",
            f"raise max-num-seqs to >= {math.ceil(top / lay.dp)} or drop concurrencies above {seqs * lay.dp} "
            "(or, to measure the queue on purpose, profile.waive: {batch-capacity: <why>})")


def cuda_graph_coverage(p: Profile) -> Iterator[Problem]:
    """Catches largest capture size < `max-num-seqs` × (1 + speculative tokens)."""
    f = p.flags
    if f.capture is None or f.enforce_eager or f.max_num_seqs is None:
        return
    k = f.speculative_tokens
    need = f.max_num_seqs * (1 + k)
    if f.capture.largest < need:
        why = f"max-num-seqs {f.max_num_seqs}" + (f" x (1 + {k} speculative tokens)" if k else "")
        yield p.recipe_problem(
            [*FLAGS, f.capture.key], f"largest CUDA-graph capture size {f.capture.largest} does not cover "
            f"the per-engine batch of {need} tokens ({why}); larger batches run eager",
            f"capture sizes up to {need}")


def flag_values(p: Profile) -> Iterator[Problem]:
    """Catches a JSON-valued flag (`speculative-config`, `kv-transfer-config`, `compilation-config`, ...) that does not
    parse or has the wrong shape (`cudagraph_capture_sizes: 64`); a number flag that is not a number or below 1
    (`max-num-seqs: lots`, `tensor-parallel-size: 0`). The flags are read once per profile; every other rule
    still runs on vLLM's defaults."""
    for key, message in p.flags.errors.items():
        fix = ("quote the whole object in single quotes and use double quotes inside" if "JSON" in message
               else "give a value of the type the flag takes")
        yield p.recipe_problem([*FLAGS, key], message, fix)


def gates(p: Profile) -> Iterator[Problem]:
    """Catches a live gate stricter than the final gate; floors and bounds for concurrencies not in the sweep."""
    g = p.spec.gates
    if g.live < g.error_rate:
        yield p.profile_problem(
            ["gates", "live_error_rate"], f"live gate {g.live} is stricter than the final gate "
            f"{g.error_rate}: runs would abort before they could fail properly", "make it >= error_rate")
    conc = p.spec.concurrency

    def strays(keys):    # a search probes anywhere in its range: a gate there applies to a probe that lands on it
        return sorted(c for c in keys if (not min(conc) <= c <= max(conc) if p.spec.search is not None
                                           else c not in conc))
    if stray := strays(g.min_output_tps_per_gpu):
        yield p.profile_problem(
            ["gates", "min_output_tps_per_gpu"], f"floors for concurrencies {stray} not in the sweep",
            "key floors by concurrencies of this profile")
    if isinstance(g.bound, dict) and (stray := strays(g.bound)):
        yield p.profile_problem(
            ["gates", "bound"], f"bounds for concurrencies {stray} not in the sweep",
            "key bounds by concurrencies of this profile, or give one name for every point")


def identity(p: Profile) -> Iterator[Problem]:
    """Catches identity image ≠ model.container."""
    image = p.recipe.identity.container.image
    if image and image != p.recipe.model.container:
        yield p.recipe_problem(
            ["identity", "container", "image"], f"identity says {image!r} but model.container runs "
            f"{p.recipe.model.container!r}", "make them the same image")


def model_context(p: Profile) -> Iterator[Problem]:
    """Catches `max-model-len` above the model's native context (vLLM refuses to start); sizes like `32k` read as vLLM
    reads them.

    vLLM accepts it only when an environment switch forces it; the rule refuses it all the same."""
    ctx = p.flags.max_model_len
    if p.model is None or ctx is None:
        return
    native = int(p.model.native_max_context.value)
    if ctx > native:
        yield p.recipe_problem(
            p.flag_path("max-model-len"), f"max-model-len {ctx} exceeds {p.model.name}'s native context "
            f"{native}; vLLM refuses to start", f"use at most {native}")
    elif ctx < 1:
        yield p.recipe_problem(p.flag_path("max-model-len"), f"max-model-len {ctx} must be >= 1", f"e.g. {native}")


def capacity(p: Profile) -> Iterator[Problem]:
    """Catches weights that cannot load, or no room for one full-context request, per `rackbench capacity`.

    HBM problems only: an offload pool beyond the node's DRAM is rule offload-dram's, whose fix is the pool's size."""
    if p.model is None:
        return
    for prob in capacity_model.estimate(p).problems:
        yield p.recipe_problem(
            p.flag_path("tensor-parallel-size"), f"does not fit on {p.cluster.name}: {prob}",
            f"see `rackbench capacity {p.id}`; use more GPUs per replica (TP/EP), a lower max-model-len "
            "or a smaller offload pool")


RULES: dict[str, Rule] = {
    "concurrency": concurrency_list,
    "layout": layout_matches_flags,
    "expert-parallel": expert_parallel,
    "gpu-count": gpu_count,
    "batch-capacity": batch_capacity,
    "engine-limits": scheduler_limits,
    "cuda-graphs": cuda_graph_coverage,
    "flag-values": flag_values,
    "placeholders": literal_placeholders,
    "cache-mounts": unmounted_caches,
    "connector": connector_conflict,
    "offload-labels": offload_labels,
    "offload-dram": offload_dram_budget,
    "gates": gates,
    "identity": identity,
    "credentials": credential_flags,
    "entrypoint-flags": entrypoint_flags,
    "flag-types": flag_types,
    "object-flags": object_flags,
    "headless-entrypoint": headless_entrypoint,
    "launch-values": launch_values,
    "model-context": model_context,
    "dataset-load": dataset_load,
    "benchmark-env": benchmark_env,
    "load-generator": load_generator,
    "time-budget": time_budget,
    "capacity": capacity,
}


def check_profile(p: Profile, skip=()) -> Iterator[Problem]:
    """Every rule's problems, but for the rules in ``skip`` and those the profile waives (profile.waive)."""
    for name, rule in RULES.items():
        if name not in skip and name not in p.spec.waive:
            yield from rule(p)
