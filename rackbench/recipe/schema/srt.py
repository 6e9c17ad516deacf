"""The srt-slurm recipe format (srtctl's ``SrtConfig``), as strict pydantic models.

A user's existing srt-slurm recipe loads unchanged; unknown keys are errors, as in srtctl.
Field names and defaults follow srt-slurm v1.0.68 (``src/srtctl/core/schema.py`` and
``src/srtctl/backends/vllm.py``). Sections rackbench never reads (profiling, observability,
telemetry, reporting) are accepted as opaque mappings.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, field_validator, model_validator

Env = dict[str, str]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ModelSection(_Strict):
    path: str
    container: str
    precision: str
    stage_dir: str | None = None


class IdentityModel(_Strict):
    repo: str | None = None
    revision: str | None = None


class IdentityContainer(_Strict):
    image: str | None = None


class IdentitySection(_Strict):
    model: IdentityModel = IdentityModel()
    container: IdentityContainer = IdentityContainer()
    frameworks: dict[str, str] = {}


class ResourcesSection(_Strict):
    gpu_type: str
    gpus_per_node: StrictInt = Field(4, ge=1, le=64)
    prefill_nodes: StrictInt | None = Field(None, ge=1, le=4096)
    decode_nodes: StrictInt | None = Field(None, ge=1, le=4096)
    prefill_workers: StrictInt | None = Field(None, ge=1, le=4096)
    decode_workers: StrictInt | None = Field(None, ge=1, le=4096)
    agg_nodes: StrictInt | None = Field(None, ge=1, le=4096)
    agg_workers: StrictInt | None = Field(None, ge=1, le=4096)
    spread_workers: StrictBool = False
    het_jobs: StrictBool | None = None
    gpus_per_prefill: StrictInt | None = Field(None, ge=1, le=262144)
    gpus_per_decode: StrictInt | None = Field(None, ge=1, le=262144)
    gpus_per_agg: StrictInt | None = Field(None, ge=1, le=262144)

    @property
    def aggregated(self) -> bool:
        return self.prefill_nodes is None and self.decode_nodes is None

    @property
    def total_nodes(self) -> int:
        if self.aggregated:
            return self.agg_nodes or 0
        return (self.prefill_nodes or 0) + (self.decode_nodes or 0)

    @property
    def agg_gpus_per_worker(self) -> int:
        """GPUs of one aggregated worker: explicit, else nodes x GPUs per node / workers (srtctl)."""
        if self.gpus_per_agg is not None:
            return self.gpus_per_agg
        workers = self.agg_workers or 1
        return (self.agg_nodes or 0) * self.gpus_per_node // workers


class SlurmSection(_Strict):
    account: str | None = None
    partition: str | None = None
    time_limit: str | None = None


class HealthCheckSection(_Strict):
    max_attempts: StrictInt = Field(180, ge=1, le=100_000)
    interval_seconds: StrictInt = Field(10, ge=1, le=3600)

    @property
    def timeout_seconds(self) -> int:
        return self.max_attempts * self.interval_seconds


class InfraSection(_Strict):
    etcd_nats_dedicated_node: StrictBool = False
    nats_max_payload_mb: StrictInt | None = Field(None, ge=1, le=64)


class DynamoSection(_Strict):
    install: StrictBool = True
    version: str | None = "0.8.0"
    hash: str | None = None
    top_of_tree: StrictBool = False
    wheel: str | None = None
    request_plane: Literal["nats", "tcp", "http"] = "tcp"
    event_plane: Literal["nats", "zmq"] | None = None
    cargo_patches: list[str] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> "DynamoSection":
        explicit = [name for name in ("hash", "wheel") if getattr(self, name)]
        if self.top_of_tree:
            explicit.append("top_of_tree")
        if len(explicit) > 1:
            raise ValueError(f"give exactly one Dynamo source, not {' and '.join(explicit)}")
        return self

    @property
    def source(self) -> str:
        if self.hash:
            return f"commit {self.hash}"
        if self.wheel:
            return f"wheel {self.wheel}"
        if self.top_of_tree:
            return "top of tree"
        return f"version {self.version}"


class FrontendSection(_Strict):
    type: str = "dynamo"     # a registered frontend (rackbench.frontends: dynamo, vllm, a site's; not sglang)
    enable_multiple_frontends: StrictBool = True
    num_additional_frontends: StrictInt = 9
    nginx_container: str = "nginx:1.27.4"
    nginx_raise_ulimit: StrictBool = False
    nginx_session_affinity: StrictBool = False
    nginx_session_affinity_header: str = "X-Dynamo-Session-ID"
    nginx_keepalive_timeout: str = "600s"
    args: dict[str, Any] | None = None
    env: Env | None = None
    ctx_router: dict[str, Any] | None = None
    gen_router: dict[str, Any] | None = None
    server_config_extra: dict[str, Any] | None = None
    orchestrator_placement: str = "head"
    dedicated_node: StrictBool = False

    @field_validator("type")
    @classmethod
    def _registered(cls, value: str) -> str:
        from rackbench.core import entry_points
        known = entry_points.names(entry_points.FRONTENDS)
        if value not in known:
            raise ValueError(f"no frontend {value!r} is registered (known: {', '.join(known)}; a site adds one with "
                             f"an entry point in the {entry_points.FRONTENDS!r} group)")
        return value


class VllmConfigSection(_Strict):
    prefill: dict[str, Any] | None = None
    decode: dict[str, Any] | None = None
    aggregated: dict[str, Any] | None = None


class VllmBackend(_Strict):
    type: Literal["vllm"] = "vllm"
    prefill_environment: Env = {}
    decode_environment: Env = {}
    aggregated_environment: Env = {}
    vllm_config: VllmConfigSection | None = None
    set_cuda_visible_devices: StrictBool = False
    connector: str | None = "nixl"
    mooncake_kv_store: dict[str, Any] | None = None
    kv_events_config: StrictBool | dict[str, Any] | None = None
    allow_prefill_decode_colocation: StrictBool = False
    allow_prefill_decode_colocation_across_nodes: StrictBool = False
    dp_launch_mode: Literal["per_node", "per_rank"] = "per_node"


class BenchmarkSection(_Strict):
    type: str = "manual"
    isl: StrictInt | None = None
    osl: StrictInt | None = None
    concurrencies: list[int] | str | None = None
    req_rate: str | int | None = "inf"
    client_placement: str = "head"
    client_dedicated_node: StrictBool = False
    colocate_with_frontend: StrictBool = True
    sweep: dict[str, Any] | None = None
    num_examples: int | None = None
    max_tokens: int | None = None
    repeat: int | None = None
    num_threads: int | None = None
    max_context_length: int | None = None
    categories: list[str] | None = None
    num_shots: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    num_requests: int | None = None
    concurrency: int | None = None
    prefix_ratios: list[float] | str | None = None
    mooncake_workload: str | None = None
    ttft_threshold_ms: int | None = None
    itl_threshold_ms: int | None = None
    random_range_ratio: float | None = None
    num_prompts_mult: int | None = None
    num_warmup_mult: int | None = None
    dataset_name: str | None = None
    dataset_path: str | None = None
    trace_file: str | None = None
    custom_tokenizer: str | None = None
    use_chat_template: StrictBool = True
    reuse_http_connections: StrictBool = False
    command: str | None = None
    container_image: str | None = None
    env: Env = {}
    aiperf_package: str | None = None
    aiperf_args: dict[str, Any] = {}
    aiperf_server_metrics: StrictBool = False
    export_node_metrics: StrictBool = False
    slow_down_sleep_time: float | None = None
    slow_down_wait_time: float | None = None

    @model_validator(mode="after")
    def _custom_needs_command(self) -> "BenchmarkSection":
        if self.type == "custom" and not self.command:
            raise ValueError("benchmark.type 'custom' requires benchmark.command")
        return self


class OutputSection(_Strict):
    log_dir: str = "./outputs/{job_id}/logs"


class SrtRecipe(_Strict):
    """One srt-slurm recipe (srtctl ``SrtConfig``)."""

    name: str
    model: ModelSection
    resources: ResourcesSection
    slurm: SlurmSection = SlurmSection()
    backend: VllmBackend = Field(default_factory=VllmBackend)
    frontend: FrontendSection = FrontendSection()
    dynamo: DynamoSection = DynamoSection()
    benchmark: BenchmarkSection = BenchmarkSection()
    profiling: dict[str, Any] = {}
    output: OutputSection = OutputSection()
    health_check: HealthCheckSection = HealthCheckSection()
    infra: InfraSection = InfraSection()
    observability: dict[str, Any] = {}
    telemetry: dict[str, Any] = {}
    environment: Env = {}
    container_mounts: dict[str, str] = {}
    extra_mount: list[str] | None = None
    srun_options: dict[str, str] = {}
    sbatch_directives: dict[str, str] = {}
    enable_config_dump: StrictBool = True
    setup_script: str | None = None
    identity: IdentitySection = IdentitySection()
    reporting: dict[str, Any] | None = None

    @property
    def aggregated_flags(self) -> dict[str, Any]:
        cfg = self.backend.vllm_config
        return dict(cfg.aggregated or {}) if cfg else {}

    def environments(self) -> dict[str, Env]:
        """Every environment block of the recipe, by its key path."""
        blocks = {
            "environment": self.environment,
            "backend.aggregated_environment": self.backend.aggregated_environment,
            "backend.prefill_environment": self.backend.prefill_environment,
            "backend.decode_environment": self.backend.decode_environment,
            "benchmark.env": self.benchmark.env,
        }
        if self.frontend.env:
            blocks["frontend.env"] = self.frontend.env
        return blocks
