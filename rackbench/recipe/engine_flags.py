"""Typed views of a worker's vLLM flags, parsed once per profile.

A recipe writes flags as ``vllm_config.aggregated`` (flag -> value, ``-``/``_`` spelling both accepted, JSON
flags as a YAML mapping or a JSON string). :func:`EngineFlags.parse` reads them once into the values every
consumer needs (parallel sizes, batch, CUDA-graph capture sizes, speculative tokens, the CPU offload pool);
a value that does not parse is recorded in ``errors`` (the validation rules report it, with file and line)
and the view falls back to vLLM's default, so no consumer ever re-parses or raises on a malformed flag.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from rackbench.recipe.flags import JSON_FLAGS, Flags, canonical

# Connectors that move KV blocks to host memory (what ``labels.kv-offloading: dram`` means).
OFFLOAD_CONNECTORS = frozenset({"SimpleCPUOffloadConnector", "OffloadingConnector", "LMCacheConnectorV1",
                                "LMCacheMPConnector", "FlexKVConnectorV1"})
# vLLM's SimpleCPUOffloadConnector when the recipe gives no size (vllm/distributed/kv_transfer/kv_connector/v1/
# simple_cpu_offload_connector.py: DEFAULT_CPU_CAPACITY_BYTES).
SIMPLE_OFFLOAD_DEFAULT_BYTES = 8 * 2**30


@dataclass(frozen=True)
class OffloadConfig:
    """The CPU KV-offload pool as vLLM sizes it.

    vLLM's SimpleCPUOffloadConnector reads ``cpu_bytes_to_use`` as the pool of one engine (server-wide) and
    divides it by the engine's ``parallel_config.world_size`` = TP x PP (data-parallel ranks are separate
    engines, each with its own pool); ``cpu_bytes_to_use_per_rank``, when given, overrides the quotient.
    """

    connector: str
    config: dict
    bytes_per_rank: float | None
    source: str                  # how bytes_per_rank was derived, for messages
    lazy: bool

    @classmethod
    def parse(cls, cfg: dict, world_size: int) -> "OffloadConfig":
        extra = cfg.get("kv_connector_extra_config") or {}
        extra = extra if isinstance(extra, dict) else {}
        per_rank: float | None = None
        source = "unknown for this connector"
        try:
            if extra.get("cpu_bytes_to_use_per_rank") is not None:
                per_rank, source = float(extra["cpu_bytes_to_use_per_rank"]), "cpu_bytes_to_use_per_rank"
            elif extra.get("cpu_bytes_to_use") is not None:
                per_rank = float(int(extra["cpu_bytes_to_use"]) // world_size)
                source = f"cpu_bytes_to_use / world size (TP x PP = {world_size})"
            elif cfg.get("kv_connector") == "SimpleCPUOffloadConnector":
                per_rank = float(SIMPLE_OFFLOAD_DEFAULT_BYTES // world_size)
                source = f"vLLM's default {SIMPLE_OFFLOAD_DEFAULT_BYTES / 2**30:.0f} GiB / world size ({world_size})"
        except (TypeError, ValueError, OverflowError):
            per_rank, source = None, "cpu_bytes_to_use(_per_rank) is not a number"
        if per_rank is not None and not (math.isfinite(per_rank) and per_rank >= 0):
            per_rank, source = None, f"cpu_bytes_to_use(_per_rank) is not a size in bytes ({per_rank})"
        return cls(str(cfg.get("kv_connector")), cfg, per_rank, source, bool(extra.get("lazy_offload", False)))


@dataclass(frozen=True)
class CaptureSizes:
    """CUDA-graph capture sizes and the recipe key that set them."""

    key: str                     # the flag as the recipe spells it (for error locations)
    sizes: tuple[int, ...]

    @property
    def largest(self) -> int:
        return max(self.sizes) if self.sizes else 0


@dataclass(frozen=True)
class EngineFlags:
    """One worker's vLLM flags, read once. ``errors`` maps a recipe key to why its value was not understood."""

    flags: Flags
    tp: int = 1
    dp: int = 1
    pp: int = 1
    expert_parallel: bool = False
    dp_given: bool = False                 # --data-parallel-size appears (even as 1): vLLM's DP code path
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    enforce_eager: bool = False
    speculative_tokens: int = 0
    capture: CaptureSizes | None = None
    kv_transfer: dict | None = None
    offload: OffloadConfig | None = None
    json: dict[str, dict] = field(default_factory=dict)     # canonical name -> parsed JSON object
    errors: dict[str, str] = field(default_factory=dict)    # recipe key -> message

    @property
    def raw(self) -> dict[str, Any]:
        return self.flags.raw

    @property
    def ep(self) -> int:
        """vLLM's expert-parallel size: TP x DP with --enable-expert-parallel, else experts are split over TP."""
        return self.tp * self.dp if self.expert_parallel else 1

    @property
    def gpus(self) -> int:
        return self.tp * self.dp * self.pp

    def key(self, name: str) -> str:
        """The recipe's spelling of a flag (for error locations), or the canonical name when absent."""
        return self.flags.key(name) or name

    def value(self, name: str, default: Any = None) -> Any:
        return self.flags.get(name, default)

    def has(self, name: str) -> bool:
        return self.flags.has(name)

    def on(self, name: str) -> bool:
        return self.flags.on(name)

    def with_overrides(self, overrides: dict[str, Any]) -> "EngineFlags":
        """The same flags with some replaced (capacity what-if questions)."""
        merged = {k: v for k, v in self.raw.items() if canonical(k) not in {canonical(o) for o in overrides}}
        return EngineFlags.parse({**merged, **overrides})

    @classmethod
    def parse(cls, raw: dict[str, Any] | None) -> "EngineFlags":
        flags = Flags(raw)
        errors: dict[str, str] = {}

        def integer(name: str, default: int | None, minimum: int = 1) -> int | None:
            value = flags.get(name)
            if value is None:
                return default
            try:
                number = int(value) if not isinstance(value, bool) and str(value).strip().lstrip("-").isdigit() \
                    else None
            except ValueError:
                number = None
            if number is None:
                errors[flags.key(name)] = f"--{name} takes a whole number, got {value!r}"
                return default
            if number < minimum:
                errors[flags.key(name)] = f"--{name} must be >= {minimum}, got {number}"
                return default
            return number

        def size(name: str) -> int | None:
            """vLLM's human-readable integers: 32k = 32000, 32K = 32768 (also m/M, g/G); auto or -1 = derived."""
            value = flags.get(name)
            if value is None or str(value).strip() in ("auto", "-1"):
                return None
            m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgKMG]?)", str(value).strip()) if not isinstance(value, bool) else None
            if m is None:
                errors[flags.key(name)] = f"--{name} takes a whole number or a size like 32k, got {value!r}"
                return None
            scale = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)]
            return int(float(m.group(1)) * scale)

        parsed: dict[str, dict] = {}
        for key, value in flags.raw.items():
            name = canonical(key)
            if value is None:                 # null: the flag is not passed (rackbench.server.plan.cli_args)
                continue
            if name not in JSON_FLAGS and not (isinstance(value, str) and value.lstrip().startswith("{")):
                continue
            if isinstance(value, dict):
                parsed[name] = value
                continue
            try:
                obj = json.loads(value) if isinstance(value, str) else value
            except json.JSONDecodeError as err:
                errors[key] = f"not valid JSON: {err.msg} at column {err.colno}"
                continue
            if not isinstance(obj, dict):
                errors[key] = f"expected a JSON object, got {value!r}"
                continue
            parsed[name] = obj

        tp = integer("tensor-parallel-size", 1)
        pp = integer("pipeline-parallel-size", 1)
        dp = integer("data-parallel-size", 1)
        spec = parsed.get("speculative-config", {})
        k = spec.get("num_speculative_tokens", 0)
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            errors[flags.key("speculative-config")] = f"num_speculative_tokens must be a whole number >= 0, got {k!r}"
            k = 0
        kv = parsed.get("kv-transfer-config")
        offload = None
        if kv and kv.get("kv_connector") in OFFLOAD_CONNECTORS:
            offload = OffloadConfig.parse(kv, tp * pp)
            if offload.bytes_per_rank is None and "not" in offload.source:
                errors[flags.key("kv-transfer-config")] = f"{offload.source}: give a whole number of bytes"
        return cls(
            flags=flags, tp=tp, dp=dp, pp=pp, expert_parallel=flags.on("enable-expert-parallel"),
            dp_given=flags.has("data-parallel-size"),
            max_num_seqs=integer("max-num-seqs", None), max_num_batched_tokens=integer("max-num-batched-tokens", None),
            max_model_len=size("max-model-len"), enforce_eager=flags.on("enforce-eager"),
            speculative_tokens=k, capture=_capture_sizes(flags, parsed, errors), kv_transfer=kv, offload=offload,
            json=parsed, errors=errors)


def _capture_sizes(flags: Flags, parsed: dict[str, dict], errors: dict[str, str]) -> CaptureSizes | None:
    """Capture sizes from ``--cudagraph-capture-sizes`` / ``--cuda-graph-sizes`` (a list or a spaced string),
    else ``compilation-config``'s ``cudagraph_capture_sizes``, else its ``max_cudagraph_capture_size``."""
    for name in ("cudagraph-capture-sizes", "cuda-graph-sizes"):
        if flags.has(name):
            value = flags.get(name)
            items = value if isinstance(value, list) else str(value).replace(",", " ").split()
            sizes = _ints(items)
            if sizes is None:
                errors[flags.key(name)] = f"--{name} takes whole numbers, got {value!r}"
                return None
            return CaptureSizes(flags.key(name), sizes)
    cfg = parsed.get("compilation-config")
    if not cfg:
        return None
    key = flags.key("compilation-config")
    if "cudagraph_capture_sizes" in cfg:
        value = cfg["cudagraph_capture_sizes"]
        sizes = _ints(value) if isinstance(value, list) else None
        if sizes is None:
            errors[key] = f"cudagraph_capture_sizes must be a list of whole numbers, got {value!r}"
            return None
        return CaptureSizes(key, sizes)
    if "max_cudagraph_capture_size" in cfg:
        sizes = _ints([cfg["max_cudagraph_capture_size"]])
        if sizes is None:
            errors[key] = f"max_cudagraph_capture_size must be a whole number, got {cfg['max_cudagraph_capture_size']!r}"
            return None
        return CaptureSizes(key, sizes)
    return None


def _ints(items: Any) -> tuple[int, ...] | None:
    """Whole numbers (ints, integral finite floats, digit strings), else None."""
    out = []
    for item in items:
        if isinstance(item, bool) or (isinstance(item, float) and not (math.isfinite(item) and item.is_integer())):
            return None
        try:
            out.append(int(item))
        except (TypeError, ValueError, OverflowError):
            return None
    return tuple(out)
