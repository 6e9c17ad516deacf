"""Which srt-slurm recipes rackbench runs, and which srt-slurm release (or fork) a catalog follows.

rackbench runs aggregated vLLM workers behind Dynamo's frontend or `vllm serve`. An srt-slurm recipe of another
kind (SGLang or TensorRT-LLM workers, disaggregated prefill/decode) is set aside with one line saying so, rather
than failing on keys rackbench does not know. The recipe schema (spec/srt.py) is srt-slurm's at one release;
fields a fork adds are accepted only when the catalog says it follows that fork (``recipes/catalog.yaml``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SRT_SLURM_RELEASE = "v1.0.68"
# Recipe fields srtctl v1.0.68 refuses, by the fork that adds them.
EXTENSIONS = {
    "benchmark.aiperf_server_metrics": "InferenceX's srt-slurm (SemiAnalysisAI): export engines' /metrics URLs to AIPerf",
}
OTHER_BACKENDS = ("sglang", "trtllm")     # srt-slurm's other worker kinds (a typo is a schema error instead)
OTHER_FRONTENDS = ("sglang",)
RUNS = "rackbench runs aggregated vLLM workers (behind Dynamo's frontend or vllm serve)"


class CatalogSpec(BaseModel):
    """``recipes/catalog.yaml``: what the catalog's srt-slurm recipes follow."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    srt_slurm: Literal["v1.0.68"] = Field(SRT_SLURM_RELEASE, description="the srtctl release whose schema recipes "
                                          "follow; `rackbench recipe --srt` writes files it accepts")
    extensions: list[Literal[tuple(EXTENSIONS)]] = Field(  # type: ignore[valid-type]
        default_factory=list, description="fields of a fork the catalog also uses (srtctl of the release refuses them)")


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def out_of_scope(recipe: Any) -> tuple[list[str], str] | None:
    """(key path to blame, why rackbench does not run it) for a recipe of another kind; None if it runs."""
    if not isinstance(recipe, dict):
        return None
    backend = _get(recipe, "backend", "type")
    if backend in OTHER_BACKENDS:
        return ["backend", "type"], f"a {backend} recipe: {RUNS}; {backend} workers are not run"
    for key in ("sglang_config", "trtllm_config"):
        if _get(recipe, "backend", key) is not None:
            return ["backend", key], f"a {key.split('_')[0]} recipe: {RUNS}; its workers are not run"
    frontend = _get(recipe, "frontend", "type")
    if frontend in OTHER_FRONTENDS:
        return ["frontend", "type"], f"a {frontend} frontend: {RUNS}; that frontend is not run"
    for key in ("prefill_nodes", "decode_nodes", "prefill_workers", "decode_workers"):
        if _get(recipe, "resources", key) is not None:
            return ["resources", key], (f"disaggregated prefill/decode (resources.{key}): {RUNS}; disaggregated "
                                        "serving is not run yet")
    return None


def extension_fields(recipe: Any) -> list[str]:
    """The fork fields a recipe sets."""
    return [dotted for dotted in EXTENSIONS if _get(recipe, *dotted.split(".")) is not None]


def unsupported_features(recipe: Any) -> list[str]:
    """Features of a runnable recipe that rackbench does not run (yet), by name: notes, not errors."""
    out = []
    btype = _get(recipe, "benchmark", "type")
    if btype not in (None, "manual"):
        out.append(f"benchmark.type {btype!r}: rackbench drives AIPerf from profile.load; the recipe's own "
                   "benchmark is not run")
    path = _get(recipe, "model", "path")
    if isinstance(path, str) and path.startswith("hf:"):
        out.append(f"model.path {path!r}: the engine gets the repo id {path[3:]!r}, as srtctl passes it (vLLM downloads "
                   "it on each node, or reads the node's HF cache); map it in the cluster's runtime.model_paths to "
                   "use a staged copy")
    for section in ("profiling", "observability", "telemetry", "reporting"):
        if _get(recipe, section):
            out.append(f"{section}: not run by rackbench")
    return out
