"""Capacity model: does a profile fit in HBM (at weight load and in steady state) and in host DRAM?

Every number comes from the model description (``recipes/models/<model>.yaml``, each value with its source or
the reasoning of its estimate), the cluster file, the recipe's flags, or one of the named assumptions below.
Nothing is keyed on a particular layout.

Assumptions (each used in exactly one place):
  A1 CUDA_OVERHEAD_GIB   CUDA context + NCCL/communication buffers per GPU, outside every vLLM budget.
  A2 load transient      while MoE expert weights are converted after loading, a share of the rank's expert
                         shard exists twice (model file: load_transient_expert_fraction; MXFP4 experts only).
  A3 FASTSAFETENSORS_STAGING_GIB  fastsafetensors stages a whole checkpoint file on the GPU before sharding it.
  A4 GRAPH_GIB_PER_128   CUDA-graph memory: 10.9 GiB for 128 captured sequences on Kimi K3 (seed, b1f05e9ac),
                         scaled linearly by the largest capture size and by hidden size x layers.
  A5 ACTIVATION_FACTOR   peak activation workspace = max-num-batched-tokens x hidden x 2 B x factor / TP.
  A6 KV layout           MLA latent KV is replicated on every TP rank; GQA KV heads are split over TP ranks
                         (replicated when TP > KV heads). The draft model's KV is ignored (a few layers).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from rackbench.recipe.profile import Profile
from rackbench.recipe.schema.model import ModelSpec, bytes_per_param as _bytes
from rackbench.recipe.schema.cluster import ClusterSpec
from rackbench.recipe.engine_flags import EngineFlags

GB = 1e9
GIB = 2**30
CUDA_OVERHEAD_GIB = 2.0                                   # A1
FASTSAFETENSORS_STAGING_GIB = 5.0                         # A3
GRAPH_GIB_PER_128 = 10.9                                  # A4
GRAPH_REF_HIDDEN_X_LAYERS = 7168 * 64                     # A4: the Kimi K3 shape the 10.9 GiB was seen on
ACTIVATION_FACTOR = 24                                    # A5


@dataclass
class Estimate:
    """Per-GPU and per-node numbers of one profile, in bytes unless named otherwise."""

    profile: str
    layout: str
    hbm: float
    gpu_memory_utilization: float
    weights: float
    weights_detail: dict[str, float]
    load_transient: float
    load_peak: float
    graphs: float
    activations: float
    kv_pool: float
    kv_bytes_per_token: float
    block_size: int
    kv_tokens: int
    context: int
    context_source: str
    dram_pool_per_node: float = 0.0
    dram_budget_per_node: float = 0.0
    problems: list[str] = field(default_factory=list)          # HBM: the weights, the KV pool (rule capacity)
    dram_problems: list[str] = field(default_factory=list)     # host DRAM: the offload pool (rule offload-dram)

    @property
    def fits(self) -> bool:
        return not self.problems and not self.dram_problems

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["fits"] = self.fits
        return d


@dataclass(frozen=True)
class NodePool:
    """The CPU KV-offload pools of the GPU ranks on one node, against the node's DRAM budget."""

    ranks: int
    need: float
    budget: float


def offload_per_node(flags: EngineFlags, cluster: ClusterSpec, workers: int = 1) -> NodePool:
    """Every GPU rank allocates its own pool (vLLM sizes them per rank; see views.OffloadConfig)."""
    kv = flags.offload
    per_rank = kv.bytes_per_rank if kv and kv.bytes_per_rank else 0.0
    ranks = min(flags.gpus * workers, cluster.gpus_per_node)
    return NodePool(ranks, per_rank * ranks, cluster.dram_budget_bytes_per_node)


def estimate(profile: Profile, gpu_memory_utilization: float | None = None, overrides: dict | None = None,
             model: ModelSpec | None = None) -> Estimate:
    """Per-GPU memory of ``profile`` on its cluster. ``overrides`` replaces recipe flags (e.g.
    {"tensor-parallel-size": 8}) for what-if questions; ``model`` defaults to the profile's description."""
    model = model or profile.model
    if model is None:
        raise ValueError(f"{profile.id}: no model description for {profile.spec.model!r}")
    flags = profile.flags.with_overrides(overrides) if overrides else profile.flags
    tp, dp, pp = flags.tp, flags.dp, flags.pp
    ep = flags.ep if flags.expert_parallel else tp      # experts split over EP ranks, else over TP
    gmu = gpu_memory_utilization if gpu_memory_utilization is not None else \
        _float(flags.value("gpu-memory-utilization"), 0.9)
    cl = profile.cluster
    hbm = cl.hbm_gib_per_gpu * GIB

    non_expert = model.non_expert_params.value * _bytes(model.precision.non_expert) / (tp * pp)
    experts = model.expert_params_value * _bytes(model.precision.experts) / (ep * pp)
    draft = (model.draft_model.params.value * _bytes(model.draft_model.precision) / tp
             if model.draft_model and flags.has("speculative-config") else 0.0)
    weights = non_expert + experts + draft

    # A2: conversion of quantized experts; A3: fastsafetensors staging; A1: CUDA context. The draft model loads
    # after the target's conversion has freed its transient, so it does not add to the target's load peak.
    frac = model.load_transient_expert_fraction.value if model.load_transient_expert_fraction else 0.0
    transient = experts * frac if model.precision.experts.lower() in ("mxfp4", "fp4", "nvfp4") else 0.0
    if str(flags.value("load-format", "")).lower() == "fastsafetensors":
        transient += FASTSAFETENSORS_STAGING_GIB * GIB
    load_peak = non_expert + experts + transient + CUDA_OVERHEAD_GIB * GIB

    graphs = 0.0
    if not flags.enforce_eager and cl.kind == "gpu":
        biggest = flags.capture.largest if flags.capture else min(512, 2 * (flags.max_num_seqs or 256))  # vLLM's cap
        scale = model.hidden_size.value * model.layers.value / GRAPH_REF_HIDDEN_X_LAYERS
        graphs = GRAPH_GIB_PER_128 * GIB * biggest / 128 * scale                           # A4
    activations = ((flags.max_num_batched_tokens or 8192) * model.hidden_size.value * 2
                   * ACTIVATION_FACTOR / tp)                                               # A5

    if flags.has("kv-cache-memory-bytes"):
        kv_pool = _float(flags.value("kv-cache-memory-bytes"), 0.0)
    else:
        kv_pool = hbm * gmu - weights - graphs - activations - CUDA_OVERHEAD_GIB * GIB
    kv_dtype = str(flags.value("kv-cache-dtype", "auto")).lower()
    kv_bytes = 1.0 if kv_dtype.startswith("fp8") else _bytes(model.precision.non_expert)
    per_token = model.kv_bytes_per_token(kv_bytes, tp, pp)
    block = max(1, int(_float(flags.value("block-size"), 16)))
    tokens = max(0, int(kv_pool // per_token)) // block * block
    ctx_flag = flags.max_model_len
    context = ctx_flag if ctx_flag else int(model.native_max_context.value)
    context_source = "max-model-len" if ctx_flag else "native max context"

    layout = f"TP{tp} x DP{dp}" + (f" x PP{pp}" if pp > 1 else "") + (f" (EP{ep})" if ep > tp else "")
    est = Estimate(profile.id, layout, hbm, gmu, weights,
                   {"non_expert": non_expert, "experts": experts, "draft": draft}, transient, load_peak, graphs,
                   activations, kv_pool, per_token, block, tokens, context, context_source)
    if load_peak > hbm:
        est.problems.append(
            f"weight loading needs {load_peak / GIB:.1f} GiB per GPU (weights {(non_expert + experts) / GIB:.1f} "
            f"+ loading transient {transient / GIB:.1f} + CUDA {CUDA_OVERHEAD_GIB:.0f}) > {cl.hbm_gib_per_gpu:g} GiB HBM")
    if kv_pool <= 0:
        est.problems.append(
            f"no room for KV cache: {gmu:g} x {cl.hbm_gib_per_gpu:g} GiB - weights {weights / GIB:.1f} - graphs "
            f"{graphs / GIB:.1f} - activations {activations / GIB:.1f} - CUDA {CUDA_OVERHEAD_GIB:.0f} GiB "
            f"= {kv_pool / GIB:.1f} GiB")
    elif tokens < math.ceil(context / block) * block:
        est.problems.append(
            f"one {context_source} request ({context:,} tokens x {per_token / 1024:.1f} KiB) needs "
            f"{context * per_token / GIB:.1f} GiB of KV per GPU, the pool holds {kv_pool / GIB:.1f} GiB "
            f"({tokens:,} tokens)")
    if flags.offload is not None and flags.offload.bytes_per_rank:
        node = offload_per_node(flags, cl, profile.topology.workers)
        est.dram_pool_per_node, est.dram_budget_per_node = node.need, node.budget
        if node.need > node.budget:
            est.dram_problems.append(f"CPU KV pool {node.ranks} ranks x {flags.offload.bytes_per_rank / GIB:.0f} GiB = "
                                f"{node.need / GIB:.0f} GiB per node > {cl.host_dram_mib_per_node} MiB x "
                                f"{cl.dram_utilization} = {node.budget / GIB:.0f} GiB")
    return est


def _float(value, default: float) -> float:
    """A finite number, else the default (rule flag-types reports the bad value)."""
    try:
        number = float(value) if value is not None and not isinstance(value, bool) else default
    except (TypeError, ValueError, OverflowError):
        return default
    return number if math.isfinite(number) else default


def table(estimates: list[Estimate]) -> str:
    g = lambda b: f"{b / GIB:8.1f}"  # noqa: E731
    head = (f"{'profile':32} {'layout':24} {'HBM':>8} {'weights':>8} {'load pk':>8} {'graphs':>8} {'act':>8} "
            f"{'KV pool':>8} {'KV/tok':>8} {'tokens':>11} {'context':>9} {'headroom':>9}  verdict")
    lines = ["per GPU, GiB (KV/tok in KiB; headroom = load headroom, the tighter of load and steady state)", head]
    for e in estimates:
        headroom = min(e.hbm - e.load_peak, e.kv_pool - e.context * e.kv_bytes_per_token)
        lines.append(f"{e.profile:32} {e.layout:24} {g(e.hbm)} {g(e.weights)} {g(e.load_peak)} {g(e.graphs)} "
                     f"{g(e.activations)} {g(e.kv_pool)} {e.kv_bytes_per_token / 1024:8.1f} {e.kv_tokens:11,} "
                     f"{e.context:9,} {headroom / GIB:9.1f}  {'fits' if e.fits else 'DOES NOT FIT'}")
        if e.dram_pool_per_node:
            lines.append(f"{'':32} host DRAM per node: offload pool {e.dram_pool_per_node / GIB:.0f} GiB of "
                         f"{e.dram_budget_per_node / GIB:.0f} GiB budget")
        for prob in [*e.problems, *e.dram_problems]:
            lines.append(f"{'':32} - {prob}")
    return "\n".join(lines)


def as_json(estimates: list[Estimate]) -> str:
    return json.dumps([e.as_dict() for e in estimates], indent=1)
