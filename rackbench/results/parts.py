"""Parts of a point's result that describe how it ran rather than what the load generator counted: the machine
(each host's record), GPU telemetry, the steady-state analysis of its throughput, its series over time, and the
evidence of its percentiles. :class:`rackbench.results.model.PointResult` is the one model; these are its parts.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rackbench.recipe.schema.sweep import Bound


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class Dist(_Part):
    avg: float | None
    p50: float | None
    p90: float | None
    p99: float | None


class FromIntended(_Part):
    """Latency as a user of the schedule feels it (coordinated omission: rackbench.results.omission): each request's
    TTFT and end-to-end latency counted from when its schedule let it go (the generator's credit), not from when the
    client sent it; the difference is the client's own delay."""
    requests: int = Field(description="successful profiled requests with both a credit and a send time")
    delay_ms: Dist = Field(description="how late the client sent each request after its credit")
    ttft: Dist = Field(description="TTFT from the credit: the measured TTFT plus the send delay")
    e2e: Dist = Field(description="end-to-end latency from the credit")
    differs: bool = Field(description="the p99 TTFT or end-to-end latency from the credit is more than "
                          "rackbench.results.omission.DIFFERS above the measured one: the client's delay is part of "
                          "what users of the schedule wait for")


class GpuRecord(_Part):
    index: int
    name: str
    uuid: str
    driver: str | None
    cuda: str | None
    power_limit_w: float | None
    power_max_limit_w: float | None
    max_sm_clock_mhz: float | None
    max_mem_clock_mhz: float | None
    memory_mib: float | None
    pci_bus_id: str | None
    persistence_mode: str | None
    compute_mode: str | None


class GpuProcess(_Part):
    gpu_uuid: str
    pid: int | None
    name: str
    memory_mib: float | None


class NodeRecord(_Part):
    """One host as rackbench/tools/machine_info.py saw it before the points (GPUs: what nvidia-smi lists)."""

    node: str
    rank: int
    host: str | None = None
    kernel: str | None = None
    cpu: str | None = None
    cores: int | None = None
    cores_usable: int | None = None
    memory_gib: float | None = None
    loadavg: list[float] = Field(default_factory=list)
    python: str | None = None
    gpus: list[GpuRecord] = Field(default_factory=list)
    gpu_processes: list[GpuProcess] = Field(default_factory=list, description="compute processes on the GPUs "
                                            "when the deployment was recorded (the servers' own, or another tenant)")
    problems: list[str] = Field(default_factory=list)


class Machine(_Part):
    nodes: list[NodeRecord]
    extra: dict[str, Any] = Field(default_factory=dict, description="a site's pytest_rackbench_machine_info fields")


class Stat(_Part):
    mean: float
    min: float
    max: float


class GpuTelemetry(_Part):
    node: str
    index: int | None
    uuid: str
    samples: int
    sm_clock_mhz: Stat | None
    mem_clock_mhz: Stat | None
    power_w: Stat | None
    temperature_c: Stat | None
    utilization_pct: Stat | None
    memory_used_mib: Stat | None


class Telemetry(_Part):
    """GPU samples of the point: ``gpus`` over the measured window (what the point's throughput, power per token and
    bound are of), ``span_gpus`` over the whole sampling span (the load generator's start-up, warm-up and grace
    too). Results written before the window was known hold the span in ``gpus`` (``over`` says which)."""

    source: str
    interval_s: float
    gpus: list[GpuTelemetry]
    over: Literal["window", "span"] = Field("span", description="what ``gpus`` covers: the measured window, or the "
                                            "whole sampling span (results made before the window was known)")
    span_gpus: list[GpuTelemetry] = Field(default_factory=list, description="the same figures over the whole "
                                          "sampling span, where ``gpus`` is the window's")


class SteadyInfo(_Part):
    """Steady state of the output-token rate (rackbench.load.steady;
    docs/load.md#run-length-steady-state-precision-adaptive-stopping-profileloadstop---run-length)."""

    method: str
    source: str = Field(description="what the rate series is: the engines' generation tokens per slice")
    slice_s: float
    batch_size: int
    batches: int
    truncated_s: float = Field(description="the warm-up MSER-5 cut from the start of the run")
    mean_output_tps: float | None
    mean_output_tps_per_gpu: float | None
    half_width_rel: float | None = Field(description="95% interval of the mean, relative (batch means, t)")
    statistic: float | None = Field(description="Heidelberger-Welch's Cramér-von Mises statistic")
    p_value: float | None
    stationary: bool | None = Field(description="p >= 0.05; None: too few batch means to say")
    drift_per_min_rel: float | None = Field(description="slope of the batch means after the warm-up, per minute, "
                                            "relative to their mean")
    lag1: float | None = Field(description="lag-1 autocorrelation of the batch means")


class Series(_Part):
    """The point over time, one value per slice of ``slice_s`` (t: its end, seconds since the generator started)."""

    slice_s: float
    t: list[float]
    output_tps: list[float]
    prompt_tps: list[float]
    requests: list[float]
    running: list[float]
    waiting: list[float]
    kv_usage: list[float]
    prefix_hit_share: list[float | None]
    cpu_tier_share: list[float | None]
    completed: list[int] = Field(description="the generator's requests completed in the slice")
    ttft_p50_ms: list[float | None]
    client_open: list[int | None] = Field(default_factory=list, description=(
        "the generator's requests open for the whole slice, by its own records; null outside the measured window "
        "(before its first request, after its last answer)"))


class Quantile(_Part):
    """A p99 with its evidence: the order-statistic upper bound at 99% confidence (MLPerf LoadGen's early stopping)."""

    estimate: float | None
    upper_bound: float | None = Field(description="None: fewer (effective) requests than a bound needs")
    confidence: float
    requests: int
    needed: int
    enough: bool
    independent: bool = Field(True, description="true: the bound counts the requests as independent (no send times "
                              "to correct by); false: it rests on their effective size in time (Woodruff's method "
                              "with batch means in time: rackbench.load.steady.quantile_upper)")


class Evidence(_Part):
    ttft_p99_ms: Quantile
    e2e_p99_ms: Quantile
    itl_p99_ms: Quantile




class SloTierResult(_Part):
    """One service-level tier at this point (rackbench.results.slo): how many requests met every limit, the share
    with its interval, and the goodput."""

    tier: str
    gated: bool = Field(description="profile.gates.slo names this tier: the point passes only if it is met")
    limits: dict[str, float] = Field(description="ttft_ms, tpot_ms, e2e_ms: each request's value must be at most this")
    target: float = Field(description="the share of requests that must be good")
    requests: int = Field(description="the profiled requests, failed and unfinished ones included (not good)")
    good: int
    attainment: float | None = Field(description="good / requests")
    low: float | None = Field(description="Wilson interval of the attainment at `confidence`, on the effective size")
    high: float | None
    effective_n: float | None = Field(description="the size the interval rests on: the smaller of the AR(1) one "
                                      "(requests / the variance inflation of their good/not-good sequence in the "
                                      "order sent) and the one its batch means imply")
    lag1: float | None = Field(description="lag-1 autocorrelation of that sequence")
    batches: int | None = Field(None, description="batch means of that sequence (up to 10 batches of equal duration "
                                "by send time); with them the interval's quantile is Student's t with batches - 1 "
                                "degrees of freedom; None: too few requests (under 50), the normal quantile")
    confidence: float = Field(0.95, description="the interval's two-sided confidence: 0.95, or for a point that "
                              "`--run-length decide` stopped or ran to its cap, 1 - 0.05 / the looks it planned (the "
                              "cap counted as one): the error budget spread over every look")
    verdict: Literal["met", "missed", "unresolved"] | None = Field(
        description="met: the interval wholly at or above the target; missed: wholly below; unresolved: across it")
    goodput_rps: float | None = Field(description="good requests per second of the measured window")
    good_output_tps_per_gpu: float | None = Field(description="output tokens of good requests per second per GPU")


class Economics(_Part):
    """Energy and cost of the point's tokens (rackbench.results.energy)."""

    window_s: float | None = Field(description="the measured window: first profiled request sent to last answered")
    gpus_sampled: int = Field(description="GPUs with power samples inside the window")
    energy_j: float | None = Field(description="their board energy over the window")
    mean_power_w: float | None = Field(description="energy / window: all sampled GPUs together")
    joules_per_output_token: float | None
    output_tokens_per_joule: float | None
    energy_basis: str = Field(description="what the energy covers and how it was summed")
    gpu_hour_price: float | None = Field(description="the cluster file's cost.gpu_hour (none: no cost is reported)")
    currency: str | None
    cost_per_m_output_tokens: float | None = Field(description="price x GPUs x 1e6 / (3600 x output tok/s)")
    cost_per_m_total_tokens: float | None = Field(description="price x GPUs x 1e6 / (3600 x total tok/s)")


class ProcessLoad(_Part):
    """One process of the point on one host: its CPU time per second of the run."""

    node: str
    name: str = Field(description="what it is: its title (VLLM::EngineCore) or its program and module")
    pid: int
    role: str = Field(description="server: carries the deployment's token; client: the load generator's")
    cores_mean: float = Field(description="CPU seconds per second over the run (1.0: one core all the time)")
    cores_max: float = Field(description="the most in one sample interval")


class HostLoad(_Part):
    """The hosts during the point (rackbench/tools/host_sampler.py, a step per host beside the GPU sampler)."""

    source: str
    interval_s: float
    nodes: list[dict[str, Any]] = Field(description="per host: samples, load average (mean, max), CPU MHz (mean)")
    processes: list[ProcessLoad] = Field(description="every process of the deployment and the load generator, "
                                         "busiest first")
    hottest: dict[str, Any] | None = Field(description="the busiest server process: its name and cores_mean")


class BoundVerdict(_Part):
    """What bound the point (rackbench.results.bound): client, kv, gpu, host, load or unknown, why, and every
    signal's evidence."""

    bound: Bound
    reason: str
    evidence: dict[str, float | int | str | bool | None]


class TraceReuse(_Part):
    """The prefix reuse the replayed trace allows against what the server reused (rackbench.results.reuse; #33)."""

    source: str
    block_size: int | None = Field(description="the block size the shares are for: the server's own, else 16")
    allowed_share: float | None = Field(ge=0, le=1, description="share of the trace's prompt tokens an unbounded prefix "
                                 "cache could serve (rackbench/tools/trace_reuse.py)")
    measured_share: float | None = Field(ge=0, le=1, description="prompt tokens the server served from its GPU prefix cache "
                                  "or its CPU tier, over the window")
    gap: float | None = Field(description="allowed - measured")
    prompt_tokens_mean: float | None = Field(description="the trace's mean prompt tokens per request")
    trace_requests: int | None = Field(None, description="requests the trace holds: a window that sent more replayed "
                                       "it, and its second pass hits what the first cached")
    working_set_tokens: float | None = Field(description="the live sessions' prefixes: concurrency x mean prompt")
    cache_tokens: float | None = Field(description="tokens the GPU KV cache holds (the server's report, else the "
                                       "capacity model), plus the CPU tier's on an offload arm")
    should_hold: bool | None = Field(description="the cache holds the working set: a large gap then is the client "
                                     "changing its bytes between turns, or prefix caching off")
    warm: bool | None = Field(None, description="the server served more than the trace allows (by over 5 points): "
                              "hits on prefixes cached before the window; the point and its A/B pair are void")
    error: str | None = Field(None, description="why the trace's reuse was not measured")
