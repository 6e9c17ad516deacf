"""The result of one point: one typed model, the single definition of its shape.

``schemas/result.schema.json`` is generated from :class:`PointResult` (``servebench schema --write``; a test fails
when the checked-in file is stale). Summaries, junit properties, the CSV, the verdict, the baseline and the
report read typed fields of this model; the headline metrics they share are :data:`METRICS`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError

from . import yamlio

SCHEMA_VERSION = 2
SCHEMA_ID = "https://servebench.dev/schemas/result.schema.json"
Share = float | None


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class Dist(_Part):
    avg: float | None
    p50: float | None
    p90: float | None
    p99: float | None


class LayoutInfo(_Part):
    tp: int
    dp: int
    pp: int
    ep: int


class OffloadInfo(_Part):
    enabled: bool
    backend: str | None


class Identity(_Part):
    case_id: str
    run_id: str
    profile: str
    model: str
    model_repo: str | None
    cluster: str
    gpu_type: str
    image: str | None
    concurrency: int
    layout: LayoutInfo
    gpus: int = Field(description="GPUs the deployment uses: TP x DP x PP x workers (the per-GPU divisor)")
    offload: OffloadInfo
    spec_decoding: str
    recipe_fingerprint: str
    versions: dict[str, str | None] = Field(description="as the running processes report them")
    pinned_versions: dict[str, str] = Field(description="the recipe's identity.frameworks")
    dataset: str
    started_at: str
    finished_at: str


class RunInfo(_Part):
    aiperf_exit_code: int | None
    summary_present: bool
    was_cancelled: bool | None
    is_complete: bool | None
    idle_wait_s: float | None
    artifact_dir: str
    server_logs: list[str]


class Requests(_Part):
    completed: float | None
    successful: float | None
    errors: float | None
    error_rate: float | None
    errors_by_cause: dict[str, PositiveInt]
    warmup_dropped: int


class Throughput(_Part):
    duration_s: float | None
    requests_per_s: float | None
    input_tps: float | None
    output_tps: float | None
    total_tps: float | None
    gpus: int
    output_tps_per_gpu: float | None
    total_tps_per_gpu: float | None


class Interactivity(_Part):
    output_tps_per_user: Dist
    intvty_p50: float | None
    intvty_p90: float | None


class Latency(_Part):
    ttft: Dist
    itl: Dist
    e2e: Dist


class Concurrency(_Part):
    target: int
    effective_avg: float | None
    ratio: float | None = Field(description="effective / target")
    trace_allowed: float | None = Field(None, description="what the trace lets the target keep in flight: target "
                                        "x mean e2e / (mean e2e + mean think gap between turns)")
    ratio_of_allowed: float | None = Field(None, description="effective / trace_allowed")
    issue_latency_ms: Dist | None = Field(None, description="AIPerf's credit-to-start latency: how late the client "
                                          "sent each request after the schedule allowed it (the client's own load)")


class PromptShares(_Part):
    """Shares of the window's prompt tokens by where their KV came from (vLLM's prompt_tokens_by_source);
    the same denominator for both arms of an offload A/B."""

    local_cache: Share = Field(ge=0, le=1)
    cpu_tier: Share = Field(ge=0, le=1, description="external KV transfer: the CPU offload tier")
    computed: Share = Field(ge=0, le=1)


class Server(_Part):
    source: str
    prompt_tokens: float
    generation_tokens: float
    prefix_cache_queries: float
    prefix_cache_hits: float
    external_prefix_cache_queries: float
    external_prefix_cache_hits: float
    prompt_tokens_external: float = Field(description="prompt tokens whose KV came from the CPU tier")
    prompt_tokens_local_cache_hit: float
    prompt_tokens_local_compute: float
    preemptions: float
    requests_succeeded: float
    prefix_cache_hit_rate: Share = Field(ge=0, le=1)
    external_prefix_cache_hit_rate: Share = Field(ge=0, le=1)
    prompt_token_shares: PromptShares


class Check(_Part):
    name: str
    ok: bool
    message: str


class Verdict(_Part):
    """Computed once, by the pytest case (baseline gate included), and stored with the point."""

    passed: bool
    checks: list[Check]
    baseline: str | None = Field(description="the --baseline file the point was judged against")
    judged_at: str

    @property
    def failures(self) -> list[str]:
        return [c.message for c in self.checks if not c.ok]

    def summary(self) -> str:
        return "passed" if self.passed else "failed: " + (self.failures or ["?"])[0].split("\n")[0][:120]


class PointResult(_Part):
    """One (profile, concurrency) point: identity, request accounting, throughput (per GPU = divided by the GPUs
    the layout uses: TP x DP x PP), latency, server counter deltas and the verdict. Numbers are null when the run
    produced no measurement."""

    model_config = ConfigDict(title="servebench point result")

    schema_version: Literal[2]
    identity: Identity
    run: RunInfo
    requests: Requests
    throughput: Throughput
    interactivity: Interactivity
    latency_ms: Latency
    concurrency: Concurrency
    server: Server | None
    output_token_ratio: float | None
    verdict: Verdict | None = None
    extra: dict[str, Any] = Field(default_factory=dict, description="fields added by a site's "
                                  "pytest_servebench_result_fields hook")

    def dump(self) -> dict:
        return self.model_dump(mode="json")


@dataclass(frozen=True)
class Metric:
    """A headline number: junit property, summary and CSV column."""

    label: str
    get: Callable[[PointResult], float | int | None]
    kind: str = "num"                # num | pct | ms


def _server(fn: Callable[[Server], Any]) -> Callable[[PointResult], Any]:
    return lambda r: fn(r.server) if r.server is not None else None


METRICS: dict[str, Metric] = {
    "output_tps": Metric("output tok/s", lambda r: r.throughput.output_tps),
    "output_tps_per_gpu": Metric("per GPU", lambda r: r.throughput.output_tps_per_gpu),
    "total_tps_per_gpu": Metric("total tok/s per GPU", lambda r: r.throughput.total_tps_per_gpu),
    "gpus": Metric("GPUs", lambda r: r.throughput.gpus),
    "tps_per_user_p50": Metric("tok/s/user p50", lambda r: r.interactivity.output_tps_per_user.p50),
    "ttft_p50_ms": Metric("TTFT p50 ms", lambda r: r.latency_ms.ttft.p50, "ms"),
    "ttft_p99_ms": Metric("TTFT p99 ms", lambda r: r.latency_ms.ttft.p99, "ms"),
    "itl_p50_ms": Metric("ITL p50 ms", lambda r: r.latency_ms.itl.p50, "ms"),
    "e2e_p50_ms": Metric("E2E p50 ms", lambda r: r.latency_ms.e2e.p50, "ms"),
    "error_rate": Metric("error rate", lambda r: r.requests.error_rate, "pct"),
    "successful_requests": Metric("successful", lambda r: r.requests.successful),
    "effective_concurrency": Metric("eff. conc", lambda r: r.concurrency.effective_avg),
    "prefix_cache_hit_rate": Metric("prefix hit rate", _server(lambda s: s.prefix_cache_hit_rate), "pct"),
    "cpu_tier_hit_share": Metric("CPU-tier share", _server(lambda s: s.prompt_token_shares.cpu_tier), "pct"),
    "prompt_tokens_from_cpu_tier": Metric("prompt tok from CPU tier", _server(lambda s: s.prompt_tokens_external)),
    "output_token_ratio": Metric("AIPerf/server tokens", lambda r: r.output_token_ratio),
}
# Identity columns of the CSV, before the metrics.
IDENTITY: dict[str, Callable[[PointResult], Any]] = {
    "case_id": lambda r: r.identity.case_id, "profile": lambda r: r.identity.profile,
    "model": lambda r: r.identity.model, "cluster": lambda r: r.identity.cluster,
    "concurrency": lambda r: r.identity.concurrency, "tp": lambda r: r.identity.layout.tp,
    "dp": lambda r: r.identity.layout.dp, "ep": lambda r: r.identity.layout.ep,
    "offload": lambda r: r.identity.offload.enabled, "recipe_fingerprint": lambda r: r.identity.recipe_fingerprint,
    "run_id": lambda r: r.identity.run_id,
}


def metrics(result: PointResult) -> dict[str, Any]:
    return {name: m.get(result) for name, m in METRICS.items()}


def json_schema() -> dict:
    """The JSON Schema of a result file, generated from :class:`PointResult`."""
    body = PointResult.model_json_schema(mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **body}


def schema_text() -> str:
    return json.dumps(json_schema(), indent=1, sort_keys=False) + "\n"


def checked_in_schema() -> str:
    return resources.files("servebench").joinpath("schemas/result.schema.json").read_text()


def file_problems(path: Path) -> list[str]:
    """How a written result file breaks the checked-in JSON Schema (the contract its consumers read)."""
    import jsonschema

    data = json.loads(Path(path).read_text())
    validator = jsonschema.Draft202012Validator(json.loads(checked_in_schema()))
    return [f"{'/'.join(str(p) for p in err.absolute_path) or '<root>'}: {err.message}"
            for err in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))]


def upgrade(data: Any) -> Any:
    """Results written by schema version 1 (before the verdict and prompt-token shares) read as version 2."""
    if not isinstance(data, dict) or data.get("schema_version") != 1:
        return data
    out = {**data, "schema_version": 2}
    server = out.get("server")
    if isinstance(server, dict):
        out["server"] = {"prompt_tokens_local_cache_hit": 0.0, "prompt_tokens_local_compute": 0.0, **server,
                         "prompt_token_shares": {"local_cache": None, "cpu_tier": None, "computed": None}}
    return out


def problems(data: Any) -> list[str]:
    """Every way ``data`` is not a valid result, as 'path: message'; empty when valid."""
    try:
        PointResult.model_validate(upgrade(data))
    except ValidationError as err:
        return [f"{'/'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in err.errors()]
    return []


def parse(data: Any) -> PointResult:
    """A result from its JSON form (version 1 files are upgraded); ValidationError if it is not one."""
    return PointResult.model_validate(upgrade(data))


def _no_constants(name: str):
    raise ValueError(f"{name} is not a JSON number (servebench writes null for a value it could not measure)")


def load_json(path: Path) -> Any:
    """Strict JSON from a file (NaN/Infinity refused); ValueError naming the file and what is wrong."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise ValueError(f"{path}: a dangling symlink or a symlink loop")
    if path.is_dir():
        raise ValueError(f"{path}: a folder, not a file")
    try:
        return json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constants)
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: cannot read it ({err})") from None
    except ValueError as err:
        raise ValueError(f"{path}: not JSON ({err})") from None


def read(path: Path) -> PointResult:
    """A result file; ValueError (one line: the file and what is wrong) if it is not a valid result."""
    data = load_json(path)
    found = problems(data)
    if found:
        raise ValueError(f"{path}: not a servebench result ({'; '.join(found[:3])})")
    return parse(data)


def write(path: Path, result: PointResult) -> None:
    """Atomically (a reader sees the old file or the new one); NaN or infinity never reach the file."""
    yamlio.write_atomic(Path(path), json.dumps(result.dump(), indent=1, allow_nan=False) + "\n")
