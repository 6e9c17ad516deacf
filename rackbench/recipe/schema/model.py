"""Model descriptions (``recipes/models/<model>.yaml``): the numbers the capacity model needs, each with its source
or the reasoning of its estimate."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

BYTES_PER_PARAM = {"mxfp4": 0.53125, "fp4": 0.53125, "nvfp4": 0.5625, "fp8": 1.0, "int8": 1.0,
                   "bf16": 2.0, "fp16": 2.0, "fp32": 4.0, "float32": 4.0, "auto": None}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Number(_Strict):
    value: float = Field(ge=0, allow_inf_nan=False)
    source: str | None = None
    estimate: str | None = None

    @model_validator(mode="after")
    def _cited(self) -> "Number":
        if not (self.source or self.estimate):
            raise ValueError("every number needs a source, or an estimate with its reasoning")
        return self


class Derived(_Strict):
    derived: str


def _known_precision(value: str) -> str:
    if not isinstance(value, str) or BYTES_PER_PARAM.get(value.lower()) is None:
        raise ValueError(f"unknown precision {value!r} (known: {', '.join(sorted(k for k, v in BYTES_PER_PARAM.items() if v))})")
    return value


KnownPrecision = Annotated[str, AfterValidator(_known_precision)]


class Precision(_Strict):
    experts: KnownPrecision
    non_expert: KnownPrecision


class Attention(_Strict):
    type: Literal["mla", "gqa"]
    kv_layers: Number
    kv_lora_rank: Number | None = None
    qk_rope_head_dim: Number | None = None
    kv_heads: Number | None = None
    head_dim: Number | None = None

    @model_validator(mode="after")
    def _complete(self) -> "Attention":
        need = ("kv_lora_rank", "qk_rope_head_dim") if self.type == "mla" else ("kv_heads", "head_dim")
        missing = [n for n in need if getattr(self, n) is None]
        if missing:
            raise ValueError(f"{self.type} attention needs {' and '.join(missing)}")
        if self.type == "gqa" and self.kv_heads.value < 1:
            raise ValueError("kv_heads must be >= 1")
        return self


class Draft(_Strict):
    name: str
    params: Number
    precision: KnownPrecision = "bf16"


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

    @model_validator(mode="after")
    def _experts_known(self) -> "ModelSpec":
        if isinstance(self.expert_params, Derived) and self.checkpoint_bytes is None and self.total_params is None:
            raise ValueError("expert_params is derived but neither checkpoint_bytes nor total_params is given")
        return self

    @property
    def expert_params_value(self) -> float:
        if isinstance(self.expert_params, Number):
            return self.expert_params.value
        if self.checkpoint_bytes is not None:
            rest = self.checkpoint_bytes.value - self.non_expert_params.value * bytes_per_param(self.precision.non_expert)
            return rest / bytes_per_param(self.precision.experts)
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


def bytes_per_param(precision: str) -> float:
    value = BYTES_PER_PARAM.get(precision.lower())
    if value is None:
        raise ValueError(f"unknown precision {precision!r} (known: {sorted(k for k, v in BYTES_PER_PARAM.items() if v)})")
    return value
