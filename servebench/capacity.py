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
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from . import yamlio
from .errors import ConfigError, Problem
from .flags import Flags

GB = 1e9
GIB = 2**30
CUDA_OVERHEAD_GIB = 2.0                                   # A1
FASTSAFETENSORS_STAGING_GIB = 5.0                         # A3
GRAPH_GIB_PER_128 = 10.9                                  # A4
GRAPH_REF_HIDDEN_X_LAYERS = 7168 * 64                     # A4: the Kimi K3 shape the 10.9 GiB was seen on
ACTIVATION_FACTOR = 24                                    # A5
BYTES_PER_PARAM = {"mxfp4": 0.53125, "fp4": 0.53125, "nvfp4": 0.5625, "fp8": 1.0, "int8": 1.0,
                   "bf16": 2.0, "fp16": 2.0, "fp32": 4.0, "float32": 4.0, "auto": None}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Number(_Strict):
    value: float
    source: str | None = None
    estimate: str | None = None

    @model_validator(mode="after")
    def _cited(self) -> "Number":
        if not (self.source or self.estimate):
            raise ValueError("every number needs a source, or an estimate with its reasoning")
        return self


class Derived(_Strict):
    derived: str


class Precision(_Strict):
    experts: str
    non_expert: str


class Attention(_Strict):
    type: Literal["mla", "gqa"]
    kv_layers: Number
    kv_lora_rank: Number | None = None
    qk_rope_head_dim: Number | None = None
    kv_heads: Number | None = None
    head_dim: Number | None = None


class Draft(_Strict):
    name: str
    params: Number
    precision: str = "bf16"


class ModelSpec(_Strict):
    name: str
    repo: str | None = None
    checkpoint_bytes: Number | None = None
    total_params: Number | None = None
    non_expert_params: Number
    expert_params: Number | Derived
    precision: Precision
    layers: Number
    hidden_size: Number
    attention: Attention
    native_max_context: Number
    load_transient_expert_fraction: Number | None = None
    draft_model: Draft | None = None

    @property
    def expert_params_value(self) -> float:
        if isinstance(self.expert_params, Number):
            return self.expert_params.value
        if self.checkpoint_bytes is not None:
            rest = self.checkpoint_bytes.value - self.non_expert_params.value * _bytes(self.precision.non_expert)
            return rest / _bytes(self.precision.experts)
        if self.total_params is not None:
            return self.total_params.value - self.non_expert_params.value
        raise ValueError("expert_params is derived but neither checkpoint_bytes nor total_params is given")

    def kv_bytes_per_token(self, kv_dtype_bytes: float, tp: int = 1, pp: int = 1) -> float:
        """KV-cache bytes one token occupies on one GPU (A6)."""
        a = self.attention
        layers = math.ceil(a.kv_layers.value / pp)
        if a.type == "mla":
            return layers * (a.kv_lora_rank.value + a.qk_rope_head_dim.value) * kv_dtype_bytes
        heads_per_gpu = math.ceil(a.kv_heads.value / min(tp, a.kv_heads.value))
        return layers * 2 * heads_per_gpu * a.head_dim.value * kv_dtype_bytes


def _bytes(precision: str) -> float:
    value = BYTES_PER_PARAM.get(precision.lower())
    if value is None:
        raise ValueError(f"unknown precision {precision!r} (known: {sorted(k for k, v in BYTES_PER_PARAM.items() if v)})")
    return value


def load_model(path: Path) -> ModelSpec:
    from .recipe import Layer, Origins, parse_model
    doc = yamlio.load(path)
    return parse_model(ModelSpec, doc, Origins([Layer(str(path), doc)], str(path)), "model description")


def load_models(root: Path) -> dict[str, ModelSpec]:
    """Every model description in ``<root>/models``; ConfigError with all problems."""
    from .recipe import load_named
    problems: list[Problem] = []
    out = load_named(Path(root) / "models", load_model, problems)
    if problems:
        raise ConfigError(problems)
    return out


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
    problems: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["fits"] = self.fits
        return d


def estimate(profile, model: ModelSpec, gpu_memory_utilization: float | None = None,
             overrides: dict | None = None) -> Estimate:
    """``overrides`` replaces recipe flags (e.g. {"tensor-parallel-size": 8}) for what-if questions."""
    flags = Flags({**profile.recipe.aggregated_flags, **(overrides or {})})
    tp = flags.int("tensor-parallel-size", 1)
    dp = flags.int("data-parallel-size", 1)
    pp = flags.int("pipeline-parallel-size", 1)
    ep = tp * dp if flags.on("enable-expert-parallel") else tp
    gmu = gpu_memory_utilization if gpu_memory_utilization is not None else \
        float(flags.get("gpu-memory-utilization", 0.9))
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
    if str(flags.get("load-format", "")).lower() == "fastsafetensors":
        transient += FASTSAFETENSORS_STAGING_GIB * GIB
    load_peak = non_expert + experts + transient + CUDA_OVERHEAD_GIB * GIB

    graphs = 0.0
    if not flags.on("enforce-eager") and cl.kind == "gpu":
        sizes = _capture_sizes(flags)
        biggest = max(sizes) if sizes else min(512, 2 * flags.int("max-num-seqs", 256))   # vLLM's default cap
        scale = model.hidden_size.value * model.layers.value / GRAPH_REF_HIDDEN_X_LAYERS
        graphs = GRAPH_GIB_PER_128 * GIB * biggest / 128 * scale                           # A4
    activations = (flags.int("max-num-batched-tokens", 8192) * model.hidden_size.value * 2
                   * ACTIVATION_FACTOR / tp)                                               # A5

    if flags.has("kv-cache-memory-bytes"):
        kv_pool = float(flags.int("kv-cache-memory-bytes", 0))
    else:
        kv_pool = hbm * gmu - weights - graphs - activations - CUDA_OVERHEAD_GIB * GIB
    kv_dtype = str(flags.get("kv-cache-dtype", "auto")).lower()
    kv_bytes = 1.0 if kv_dtype.startswith("fp8") else _bytes(model.precision.non_expert)
    per_token = model.kv_bytes_per_token(kv_bytes, tp, pp)
    block = flags.int("block-size", 16)
    tokens = max(0, int(kv_pool // per_token)) // block * block
    ctx_flag = flags.get("max-model-len")
    context = int(ctx_flag) if ctx_flag else int(model.native_max_context.value)
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
    pool = _offload_bytes_per_rank(flags)
    if pool:
        ranks = min(tp * dp * pp, cl.gpus_per_node)
        est.dram_pool_per_node = pool * ranks
        est.dram_budget_per_node = cl.dram_budget_bytes_per_node
        if est.dram_pool_per_node > est.dram_budget_per_node:
            est.problems.append(f"CPU KV pool {ranks} ranks x {pool / GIB:.0f} GiB = {est.dram_pool_per_node / GIB:.0f}"
                                f" GiB per node > {cl.host_dram_mib_per_node} MiB x {cl.dram_utilization} = "
                                f"{est.dram_budget_per_node / GIB:.0f} GiB")
    return est


def _capture_sizes(flags: Flags) -> list[int]:
    cfg = flags.json("compilation-config") or {}
    sizes = cfg.get("cudagraph_capture_sizes") or flags.get("cudagraph-capture-sizes") or []
    return [int(s) for s in sizes]


def _offload_bytes_per_rank(flags: Flags) -> float:
    cfg = flags.json("kv-transfer-config") or {}
    extra = cfg.get("kv_connector_extra_config") or {}
    if "cpu_bytes_to_use_per_rank" in extra:
        return float(extra["cpu_bytes_to_use_per_rank"])
    return float(extra.get("cpu_bytes_to_use", 0))


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
        for prob in e.problems:
            lines.append(f"{'':32} - {prob}")
    return "\n".join(lines)


def as_json(estimates: list[Estimate]) -> str:
    return json.dumps([e.as_dict() for e in estimates], indent=1)
