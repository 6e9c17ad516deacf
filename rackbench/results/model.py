"""The result of one point: one typed model, the single definition of its shape.

``schemas/result.schema.json`` is generated from :class:`PointResult` (rackbench.results.schema; a test fails when
the checked-in file is stale). Everything that reads a result reads typed fields of this model; the numbers they
show are defined once, in rackbench.results.metrics. Files written by older versions are upgraded on reading
(:func:`upgrade`), so no stored result stops being readable.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, PositiveInt, ValidationError

from rackbench.core.names import NAME_MAX, SAFE_NAME
from rackbench.recipe.schema.sweep import RunLength
from rackbench.results.parts import (BoundVerdict, Dist, Economics, Evidence, FromIntended, HostLoad, Machine, Series,
                                      SloTierResult, SteadyInfo, Telemetry, TraceReuse, _Part)

SCHEMA_VERSION = 4
SCHEMA_ID = "https://rackbench.dev/schemas/result.schema.json"
Share = float | None


class LayoutInfo(_Part):
    tp: int
    dp: int
    pp: int
    ep: int


class OffloadInfo(_Part):
    enabled: bool
    backend: str | None


class Identity(_Part):
    case_id: str = Field(pattern=SAFE_NAME, max_length=NAME_MAX, description="names the point's files: letters, "
                         "digits, '.', '_', '+', '-', no '..'")
    run_id: str = Field(pattern=SAFE_NAME, max_length=NAME_MAX)
    profile: str = Field(pattern=SAFE_NAME, max_length=NAME_MAX)
    model: str = Field(pattern=SAFE_NAME, max_length=NAME_MAX)
    model_repo: str | None
    cluster: str = Field(pattern=SAFE_NAME, max_length=NAME_MAX)
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
    frontend: str | None = Field(None, description="what serves the API: dynamo (Dynamo's frontend) or vllm")
    load_fingerprint: str | None = Field(None, description="sha256 of the profile's load section: points with "
                                         "the same one were driven alike")
    card: str | None = Field(None, description="the GPU the point ran on, as nvidia-smi names it (None: no GPU)")
    card_differs: list[str] = Field(default_factory=list, description="how the machine record contradicts the "
                                    "cluster file (GPU model, count per node, memory per GPU): reports label the "
                                    "point with the card it ran on (rackbench.results.card)")


class Look(_Part):
    at_s: float = Field(description="seconds into the run")
    found: str


class Window(_Part):
    """The measured phase on the run's clock (seconds since the load generator started, as the series' ``t``)."""
    start_s: float = Field(description="the measured (profiling) phase's start")
    end_s: float = Field(description="its end: the end of the grace for the requests in flight, answered or not")
    last_answer_s: float | None = Field(None, description="when the phase's last answered request ended")


class RunInfo(_Part):
    generator: str = Field(description="the load generator that drove the point (profile.load.generator)")
    exit_code: int | None = Field(description="the load generator's exit code (None: it did not run to an end)")
    summary_present: bool = Field(description="the generator wrote its own summary of the measured window")
    was_cancelled: bool | None
    is_complete: bool | None
    idle_wait_s: float | None
    artifact_dir: str = Field(description="the generator's own output folder")
    server_logs: list[str]
    stopped_by: str | None = Field(None, description="what ended the run early (one line), if anything did")
    interrupted: bool = Field(False, description="the session was interrupted (Ctrl-C, SIGTERM, a pytest --timeout) "
                              "during the point: what it measured is kept, but it is no measurement to compare (the "
                              "history keeps it out)")
    server_died: str | None = Field(None, description="a server process no longer running after the point (one "
                                   "line: which, where, how it ended); the point then fails, saying so first")
    problems: list[str] = Field(default_factory=list, description="files the result was built without, and why")
    mode: RunLength = Field("fixed", description="the run-length rule (profile.load.stop)")
    stop_reason: str | None = Field(None, description="why the run ended when it did")
    stopped_at_s: float | None = Field(None, description="when rackbench ended an adaptive run (None: it ran out)")
    planned_s: float | None = Field(None, description="the profile's duration_s: what the fixed plan measures")
    checkpoints: list[Look] = Field(default_factory=list, description="each look of the adaptive rule")
    ready_workers: int | None = Field(None, description="serving instances ready at the point's start (Dynamo: the "
                                      "generate instances its frontend lists; vLLM: API servers answering /health)")
    expected_workers: int | None = Field(None, description="the serving instances the deployment started with")
    window: Window | None = Field(None, description="the measured phase as the load generator held it (None: it "
                                  "does not say)")
    kv_events: dict[str, float] | None = Field(None, description="KV events the KV-aware router applied over the run, "
                                               "by status (ok, block_not_found, ...); None: no such router")


class Requests(_Part):
    completed: float | None
    successful: float | None
    errors: float | None
    error_rate: float | None
    errors_by_cause: dict[str, PositiveInt]
    warmup_dropped: int
    recorded: int | None = Field(None, description="the profiled requests in the generator's per-request export: "
                                 "fewer than completed is an export cut short (a full disk), not a measurement")
    unanswered: int | None = Field(None, description="requests sent in the measured window and never answered: the "
                                   "generator gave up on them at its grace's end. Counted in completed and errors "
                                   "(cause unanswered); None where the generator does not say")

    @property
    def cut_short(self) -> bool:
        """The generator's per-request export holds fewer requests than its summary counts (a disk that filled)."""
        return self.recorded is not None and bool(self.completed) and self.recorded < self.completed


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
    from_intended: FromIntended | None = Field(None, description="latency from when the schedule let each request go "
                                               "(rackbench.results.omission); None where the generator gave no such time")


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
    block_size: float | None = Field(None, description="the engines' KV block size (vllm:cache_config_info)")
    cache_tokens: float | None = Field(None, description="tokens the engines' GPU KV caches hold, as they report it")
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

    model_config = ConfigDict(title="rackbench point result")

    schema_version: Literal[4]
    identity: Identity
    run: RunInfo
    requests: Requests
    throughput: Throughput
    interactivity: Interactivity
    latency_ms: Latency
    concurrency: Concurrency
    server: Server | None
    output_token_ratio: float | None
    steady: SteadyInfo | None = Field(None, description="warm-up, stationarity and precision of the throughput")
    series: Series | None = Field(None, description="the point over time")
    evidence: Evidence | None = Field(None, description="p99s with their early-stopping upper bounds")
    slo: list[SloTierResult] = Field(default_factory=list, description="each service-level tier of the profile "
                                     "(profile.slo): attainment with its interval, goodput")
    economics: Economics | None = Field(None, description="GPU energy per token over the measured window, and the "
                                        "cost per million tokens where the cluster names a price")
    machine: Machine | None = Field(None, description="on what it ran: each host's record")
    telemetry: Telemetry | None = Field(None, description="GPU clocks, power, temperature, utilisation sampled "
                                        "during the run")
    host: HostLoad | None = Field(None, description="CPU time per second of each process of the point, per host, "
                                  "and the hosts' load and clock")
    bound: BoundVerdict | None = Field(None, description="what bound the point: the GPU, the KV cache, the host, "
                                       "the load generator or the offered load")
    reuse: TraceReuse | None = Field(None, description="the prefix reuse the trace allows against what the server "
                                     "reused, and whether its cache should have held the sessions")
    verdict: Verdict | None = None
    extra: dict[str, Any] = Field(default_factory=dict, description="fields added by a site's "
                                  "pytest_rackbench_result_fields hook")

    def dump(self) -> dict:
        return self.model_dump(mode="json")


def upgrade(data: Any) -> Any:
    """A result of any earlier schema version as the current one: version 1 (before the verdict and prompt-token
    shares), version 2 (AIPerf the only load generator: ``run.aiperf_exit_code``), version 3 (no machine record,
    no telemetry)."""
    if not isinstance(data, dict):
        return data
    out = data
    if out.get("schema_version") == 1:
        out = {**out, "schema_version": 2}
        server = out.get("server")
        if isinstance(server, dict):
            out["server"] = {"prompt_tokens_local_cache_hit": 0.0, "prompt_tokens_local_compute": 0.0, **server,
                             "prompt_token_shares": {"local_cache": None, "cpu_tier": None, "computed": None}}
    if out.get("schema_version") == 2:
        out = {**out, "schema_version": 3}
        run = out.get("run")
        if isinstance(run, dict) and "aiperf_exit_code" in run:
            run = dict(run)
            out["run"] = {"generator": "aiperf", "exit_code": run.pop("aiperf_exit_code"), **run}
    if out.get("schema_version") == 3:
        out = {**out, "schema_version": 4}
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
