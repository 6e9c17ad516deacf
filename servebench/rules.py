"""Offline checks of a profile: every failure class that used to cost GPU hours.

Each rule takes a parsed :class:`~servebench.recipe.Profile` and yields problems that name the
file and key the bad value came from. ``RULES`` lists them; tests break each one on purpose.
"""

from __future__ import annotations

import json
import math
from typing import Callable, Iterator

from .errors import Problem
from .flags import JSON_FLAGS, SUITE_PLACEHOLDERS, Flags, canonical, placeholders
from . import flag_tables
from .recipe import Profile

FLAGS = ("backend", "vllm_config", "aggregated")
OFFLOAD_CONNECTORS = frozenset({"SimpleCPUOffloadConnector", "OffloadingConnector", "LMCacheConnectorV1",
                                "LMCacheMPConnector", "FlexKVConnectorV1"})

Rule = Callable[[Profile], Iterator[Problem]]


def _flags(p: Profile) -> Flags:
    return Flags(p.recipe.aggregated_flags)


def _flag_path(p: Profile, name: str) -> list[str]:
    return [*FLAGS, _flags(p).key(name) or name]


def _rp(p: Profile, path, message: str, fix: str = "") -> Problem:
    return p.layers.recipe_origins.problem(path, message, fix)


def _pp(p: Profile, path, message: str, fix: str = "") -> Problem:
    return p.layers.profile_origins.problem(path, message, fix)


def concurrency_list(p: Profile) -> Iterator[Problem]:
    conc = p.spec.concurrency
    if not conc:
        yield _pp(p, ["concurrency"], "empty concurrency list", "list at least one concurrency")
    bad = [c for c in conc if c <= 0]
    if bad:
        yield _pp(p, ["concurrency"], f"concurrencies must be > 0, got {bad}", "remove them")
    if len(set(conc)) != len(conc):
        dups = sorted({c for c in conc if conc.count(c) > 1})
        yield _pp(p, ["concurrency"], f"duplicate concurrencies {dups}", "list each concurrency once")
    elif conc != sorted(conc):
        yield _pp(p, ["concurrency"], f"concurrencies must ascend, got {conc}", f"write {sorted(conc)}")


def layout_matches_flags(p: Profile) -> Iterator[Problem]:
    f, lay = _flags(p), p.spec.layout
    for dim, flag in (("tp", "tensor-parallel-size"), ("dp", "data-parallel-size"), ("pp", "pipeline-parallel-size")):
        have = f.int(flag, 1)
        if have != getattr(lay, dim):
            yield _rp(p, _flag_path(p, flag),
                      f"vLLM gets --{flag} {have} but profile.layout.{dim} is {getattr(lay, dim)}",
                      "make them agree (the layout is what results report)")


def expert_parallel(p: Profile) -> Iterator[Problem]:
    f, lay = _flags(p), p.spec.layout
    if f.on("enable-expert-parallel"):
        want = f.int("tensor-parallel-size", 1) * f.int("data-parallel-size", 1)
        if lay.ep != want:
            yield _pp(p, ["layout", "ep"], f"expert parallelism is on, so vLLM's EP = TP x DP = {want}, "
                      f"but the layout says EP{lay.ep}", f"set layout.ep: {want}")
    elif lay.ep != 1:
        yield _pp(p, ["layout", "ep"], f"EP{lay.ep} without --enable-expert-parallel: vLLM runs EP1",
                  "set layout.ep: 1 or add enable-expert-parallel: true")


def gpu_count(p: Profile) -> Iterator[Problem]:
    res, lay, cl = p.recipe.resources, p.spec.layout, p.cluster
    if res.gpus_per_node != cl.gpus_per_node:
        yield _rp(p, ["resources", "gpus_per_node"],
                  f"{res.gpus_per_node} GPUs per node, but cluster {cl.name} has {cl.gpus_per_node}",
                  f"set gpus_per_node: {cl.gpus_per_node}")
    if not res.aggregated:
        yield _rp(p, ["resources", "prefill_nodes"], "disaggregated layouts are not supported yet",
                  "use agg_nodes/agg_workers")
        return
    if res.total_nodes > cl.nodes:
        yield _rp(p, ["resources", "agg_nodes"], f"{res.total_nodes} nodes, cluster {cl.name} has {cl.nodes}",
                  f"use at most {cl.nodes} nodes")
    allocated = res.total_nodes * res.gpus_per_node
    per_worker = res.agg_gpus_per_worker
    if per_worker * (res.agg_workers or 1) != allocated:
        yield _rp(p, ["resources", "gpus_per_agg"],
                  f"{res.agg_workers or 1} workers x {per_worker} GPUs != {res.total_nodes} nodes x "
                  f"{res.gpus_per_node} GPUs = {allocated}", "make workers x GPUs per worker use every GPU")
    if lay.gpus != per_worker:
        yield _pp(p, ["layout"], f"{lay} uses TP x DP x PP = {lay.gpus} GPUs, but a worker has {per_worker} "
                  f"({res.total_nodes} nodes x {res.gpus_per_node} GPUs / {res.agg_workers or 1} workers)",
                  "change the layout or resources.agg_nodes")


def batch_capacity(p: Profile) -> Iterator[Problem]:
    f, lay = _flags(p), p.spec.layout
    if not f.has("max-num-seqs") or not p.spec.concurrency:
        return
    seqs = f.int("max-num-seqs", 0)
    top = max(p.spec.concurrency)
    if seqs * lay.dp < top:
        yield _rp(p, _flag_path(p, "max-num-seqs"),
                  f"max-num-seqs {seqs} x DP {lay.dp} = {seqs * lay.dp} < largest concurrency {top}",
                  f"raise max-num-seqs to >= {math.ceil(top / lay.dp)} or drop concurrencies above {seqs * lay.dp}")


def _capture_sizes(p: Profile) -> tuple[list[str], list[int]] | None:
    f = _flags(p)
    for flag in ("cudagraph-capture-sizes", "cuda-graph-sizes"):
        if f.has(flag):
            value = f.get(flag)
            sizes = value if isinstance(value, list) else [int(x) for x in str(value).replace(",", " ").split()]
            return _flag_path(p, flag), [int(s) for s in sizes]
    try:
        cfg = f.json("compilation-config") or {}
    except ValueError:
        return None
    if "cudagraph_capture_sizes" in cfg:
        return _flag_path(p, "compilation-config"), [int(s) for s in cfg["cudagraph_capture_sizes"]]
    if "max_cudagraph_capture_size" in cfg:
        return _flag_path(p, "compilation-config"), [int(cfg["max_cudagraph_capture_size"])]
    return None


def cuda_graph_coverage(p: Profile) -> Iterator[Problem]:
    f = _flags(p)
    found = _capture_sizes(p)
    if found is None or f.on("enforce-eager") or not f.has("max-num-seqs"):
        return
    path, sizes = found
    try:
        spec = f.json("speculative-config") or {}
    except ValueError:
        spec = {}
    k = int(spec.get("num_speculative_tokens", 0) or 0)
    need = f.int("max-num-seqs", 0) * (1 + k)
    if not sizes or max(sizes) < need:
        why = f"max-num-seqs {f.int('max-num-seqs', 0)}" + (f" x (1 + {k} speculative tokens)" if k else "")
        yield _rp(p, path, f"largest CUDA-graph capture size {max(sizes) if sizes else 0} does not cover the "
                  f"per-engine batch of {need} tokens ({why}); larger batches run eager",
                  f"capture sizes up to {need}")


def json_flags(p: Profile) -> Iterator[Problem]:
    for key, value in p.recipe.aggregated_flags.items():
        is_json = canonical(key) in JSON_FLAGS or (isinstance(value, str) and value.lstrip().startswith("{"))
        if not is_json or isinstance(value, dict):
            continue
        try:
            parsed = json.loads(value) if isinstance(value, str) else None
        except json.JSONDecodeError as err:
            yield _rp(p, [*FLAGS, key], f"not valid JSON: {err.msg} at column {err.colno}",
                      "quote the whole object in single quotes and use double quotes inside")
            continue
        if not isinstance(parsed, dict):
            yield _rp(p, [*FLAGS, key], f"expected a JSON object, got {value!r}", "give a {...} object")


def _env_blocks(p: Profile):
    for path, env in p.recipe.environments().items():
        for key, value in env.items():
            yield [*path.split("."), key], value


def literal_placeholders(p: Profile) -> Iterator[Problem]:
    templates = set(p.spec.templates)
    items = list(_env_blocks(p))
    items += [([*FLAGS, k], v) for k, v in p.recipe.aggregated_flags.items() if isinstance(v, str)]
    for path, value in items:
        found = placeholders(value)
        if not found:
            continue
        dotted = ".".join(path)
        if dotted in templates:
            unknown = [ph for ph in found if ph.strip("{}") not in SUITE_PLACEHOLDERS]
            if unknown:
                yield _rp(p, path, f"template uses {unknown}, which servebench does not fill",
                          f"use only {{{'}, {'.join(sorted(SUITE_PLACEHOLDERS))}}}")
            continue
        yield _rp(p, path, f"literal placeholder {', '.join(found)} in {value!r}: nothing expands it, "
                  "the process would see it verbatim",
                  f"write the value itself, or list '{dotted}' in profile.templates and use "
                  f"{{{'}, {'.join(sorted(SUITE_PLACEHOLDERS))}}}")
    for t in sorted(templates - {".".join(path) for path, _ in items}):
        yield _pp(p, ["templates"], f"{t!r} is not an environment key or flag of this recipe",
                  "list keys as e.g. environment.MY_VAR")


def connector_conflict(p: Profile) -> Iterator[Problem]:
    f = _flags(p)
    if p.recipe.backend.connector is not None and f.has("kv-transfer-config"):
        yield _rp(p, ["backend", "connector"], f"connector {p.recipe.backend.connector!r} also renders "
                  "--kv-transfer-config, which vllm_config already sets (one would silently win)",
                  "set backend.connector: null")


def _offload_config(p: Profile) -> dict | None:
    try:
        kv = _flags(p).json("kv-transfer-config")
    except ValueError:
        return None
    if kv and kv.get("kv_connector") in OFFLOAD_CONNECTORS:
        return kv
    return None


def offload_labels(p: Profile) -> Iterator[Problem]:
    kv = _offload_config(p)
    labels = p.spec.labels
    if labels.kv_offloading == "dram" and kv is None:
        yield _pp(p, ["labels", "kv-offloading"], "labelled dram offload, but no offload connector in "
                  "--kv-transfer-config", "add the connector or label kv-offloading: none")
    if labels.kv_offloading == "none" and kv is not None:
        yield _pp(p, ["labels", "kv-offloading"], f"{kv['kv_connector']} is configured but the profile is "
                  "labelled kv-offloading: none", "label it kv-offloading: dram")
    if labels.kv_offloading == "dram" and not labels.kv_offload_backend:
        yield _pp(p, ["labels", "kv-offload-backend"], "dram offload needs a backend label",
                  "e.g. kv-offload-backend: vllm-simple")
    spec_on = _flags(p).has("speculative-config")
    if (labels.spec_decoding != "none") != spec_on:
        yield _pp(p, ["labels", "spec-decoding"], f"labelled {labels.spec_decoding!r} but speculative-config "
                  f"is {'set' if spec_on else 'absent'}", "make the label match the flags")


def offload_dram_budget(p: Profile) -> Iterator[Problem]:
    kv = _offload_config(p)
    if kv is None:
        return
    extra = kv.get("kv_connector_extra_config") or {}
    gpus = p.spec.layout.gpus
    per_rank = extra.get("cpu_bytes_to_use_per_rank")
    if per_rank is None and extra.get("cpu_bytes_to_use") is not None:
        per_rank = extra["cpu_bytes_to_use"] / gpus
    if per_rank is None:
        return
    ranks = min(gpus, p.cluster.gpus_per_node)
    need = per_rank * ranks
    budget = p.cluster.dram_budget_bytes_per_node
    if need > budget:
        gib = 2**30
        yield _rp(p, _flag_path(p, "kv-transfer-config"),
                  f"offload pool {per_rank / gib:.1f} GiB per rank x {ranks} ranks per node = {need / gib:.1f} GiB "
                  f"> {p.cluster.name} DRAM {p.cluster.host_dram_mib_per_node} MiB x "
                  f"{p.cluster.dram_utilization} = {budget / gib:.1f} GiB",
                  f"use at most {math.floor(budget / ranks / gib)} GiB per rank")


def gates(p: Profile) -> Iterator[Problem]:
    g = p.spec.gates
    if g.live < g.error_rate:
        yield _pp(p, ["gates", "live_error_rate"], f"live gate {g.live} is stricter than the final gate "
                  f"{g.error_rate}: runs would abort before they could fail properly", "make it >= error_rate")
    stray = sorted(set(g.min_output_tps_per_gpu) - set(p.spec.concurrency))
    if stray:
        yield _pp(p, ["gates", "min_output_tps_per_gpu"], f"floors for concurrencies {stray} not in the sweep",
                  "key floors by concurrencies of this profile")


def identity(p: Profile) -> Iterator[Problem]:
    image = p.recipe.identity.container.image
    if image and image != p.recipe.model.container:
        yield _rp(p, ["identity", "container", "image"], f"identity says {image!r} but model.container runs "
                  f"{p.recipe.model.container!r}", "make them the same image")


# Flags the launcher derives from the layout (servebench.server.plan); a recipe value would be replaced.
DERIVED_FLAGS = frozenset({"headless", "master-addr", "nnodes", "node-rank", "data-parallel-size-local",
                           "data-parallel-start-rank", "data-parallel-address", "data-parallel-hybrid-lb",
                           "data-parallel-rank", "host", "port", "model"})
# The same option under the other entrypoint, for the fix text.
_COUNTERPARTS = {"tool-call-parser": "dyn-tool-call-parser", "reasoning-parser": "dyn-reasoning-parser",
                 "enable-auto-tool-choice": None, "chat-template": "custom-jinja-template"}


def entrypoint_flags(p: Profile) -> Iterator[Problem]:
    """Every flag must be one the receiving entrypoint's real parser accepts (pinned table, scripts/flag-table)."""
    table = flag_tables.load(p.cluster.runtime.flag_table)
    worker = "vllm serve" if p.recipe.frontend.type == "vllm" else "dynamo.vllm"
    accepted = set(table.entrypoints[worker])
    for key, value in p.recipe.aggregated_flags.items():
        name = canonical(key)
        if name in DERIVED_FLAGS:
            yield _rp(p, [*FLAGS, key], f"--{name} is derived from the layout by servebench (per node)",
                      "remove it; set tensor/data-parallel sizes and resources instead")
            continue
        if f"--{name}" in accepted or (value is False and f"--no-{name}" in accepted):
            continue
        other = "dynamo.vllm" if worker == "vllm serve" else "vllm serve"
        hint = ""
        if f"--{name}" in set(table.entrypoints.get(other, [])):
            alt = _COUNTERPARTS.get(name)
            hint = f"; it is a `{other}` flag" + (f": use {alt}" if alt else ": drop it")
        near = [f for f in accepted if f.startswith(f"--{name}")]
        if near and not hint:
            hint = f"; abbreviations are not allowed, did you mean {', '.join(sorted(near)[:3])}?"
        yield _rp(p, [*FLAGS, key], f"--{name} is not accepted by {ENTRYPOINT_NAMES[worker]} "
                  f"(flag table {table.name}){hint}", "remove or rename the flag")
    frontend = set(table.entrypoints.get("dynamo.frontend", []))
    if worker == "dynamo.vllm" and frontend:
        for key in (p.recipe.frontend.args or {}):
            if f"--{canonical(key)}" not in frontend:
                yield _rp(p, ["frontend", "args", key], f"--{canonical(key)} is not accepted by the Dynamo "
                          f"frontend (python -m dynamo.frontend; flag table {table.name})", "remove or rename it")


def capacity(p: Profile) -> Iterator[Problem]:
    """The profile must hold its weights while loading, and one full-context request (servebench capacity)."""
    if p.model_spec is None:
        return
    from .capacity import estimate
    for prob in estimate(p, p.model_spec).problems:
        yield _rp(p, _flag_path(p, "tensor-parallel-size"), f"does not fit on {p.cluster.name}: {prob}",
                  f"see `servebench capacity {p.id}`; use more GPUs per replica (TP/EP), a lower max-model-len "
                  "or a smaller offload pool")


ENTRYPOINT_NAMES = {"dynamo.vllm": "Dynamo's vLLM worker (python -m dynamo.vllm)",
                    "vllm serve": "vLLM's OpenAI server (vllm serve)"}


RULES: dict[str, Rule] = {
    "concurrency": concurrency_list,
    "layout": layout_matches_flags,
    "expert-parallel": expert_parallel,
    "gpu-count": gpu_count,
    "batch-capacity": batch_capacity,
    "cuda-graphs": cuda_graph_coverage,
    "json-flags": json_flags,
    "placeholders": literal_placeholders,
    "connector": connector_conflict,
    "offload-labels": offload_labels,
    "offload-dram": offload_dram_budget,
    "gates": gates,
    "identity": identity,
    "entrypoint-flags": entrypoint_flags,
    "capacity": capacity,
}


def check_profile(p: Profile, skip=()) -> Iterator[Problem]:
    for name, rule in RULES.items():
        if name not in skip:
            yield from rule(p)
