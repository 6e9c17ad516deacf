"""rackbench's own sections: the sweep profile and the cluster description.

A *profile file* has three top-level keys::

    extends: base.yaml        # an srt-slurm recipe, or another profile file
    profile: {...}            # rackbench's sweep section (this module)
    recipe: {...}             # an srt-slurm overlay, deep-merged onto the base's recipe

The srt-slurm part stays pure srt-slurm, so the effective recipe can be handed to srtctl.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StringConstraints, model_validator


_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
EnvName = Annotated[str, StringConstraints(pattern=_ENV_NAME)]
OneLine = Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f\x7f]*$")]   # no newline, CR, NUL, ...
# Rules a profile may waive (`waive: {rule: reason}`): they flag a setting that measures something other than
# what the sweep is for, not one that breaks the launch or the result.
WAIVABLE = Literal["batch-capacity", "cuda-graphs"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Layout(_Strict):
    """How the GPUs of one serving deployment are split (result metadata and checks)."""

    tp: StrictInt = Field(1, ge=1, description="tensor parallel size (must match the recipe's flags)")
    dp: StrictInt = Field(1, ge=1, description="data parallel size")
    pp: StrictInt = Field(1, ge=1, description="pipeline parallel size")
    ep: StrictInt = Field(1, ge=1, description="expert parallel size (TP x DP with expert parallelism on)")

    @property
    def gpus(self) -> int:
        return self.tp * self.dp * self.pp

    def __str__(self) -> str:
        parts = [f"TP{self.tp}"] + [f"{k.upper()}{v}" for k, v in (("dp", self.dp), ("pp", self.pp)) if v > 1]
        text = " x ".join(parts)
        return f"{text} (EP{self.ep})" if self.ep > 1 else text


class Labels(_Strict):
    """Sweep labels, as in InferenceX's master config."""

    spec_decoding: Literal["mtp", "draft_model", "none"] = Field("none", alias="spec-decoding", description=(
        "the speculative decoding the recipe configures (checked against its speculative-config)"))
    kv_offloading: Literal["none", "dram"] = Field("none", alias="kv-offloading", description=(
        "dram: the recipe offloads KV to host memory (checked against its connector)"))
    kv_offload_backend: str | None = Field(None, alias="kv-offload-backend", description=(
        "the offload connector's name as the seed labels it"))


# What can bind a point, in the order rackbench.results.bound judges it (its docstring says how).
Bound = Literal["client", "kv", "gpu", "host", "load", "unknown"]
Wanted = Literal["gpu", "kv", "host", "load"]      # what a profile may require (gates.bound)


class Gates(_Strict):
    """What a point must meet to pass."""

    error_rate: float = Field(0.10, ge=0, le=1, description="final gate: errors / completed requests")
    live_error_rate: float | None = Field(None, ge=0, le=1, description="abort the run early above this")
    min_output_tps_per_gpu: dict[StrictInt, float] = Field(
        default_factory=dict, description="throughput floor per concurrency, output tok/s per GPU")
    min_concurrency_ratio: float = Field(0.9, gt=0, le=1, description="without the client's issue latency: "
                                         "effective concurrency must reach this share of what the trace allows")
    max_issue_latency_ms: float = Field(50.0, gt=0, le=60_000, description="client-bound when AIPerf's p99 "
                                        "credit-to-start latency (request sent after its schedule) exceeds this")
    allow_client_bound: StrictBool = Field(False, description="report a client-bound point without failing it")
    require_steady: StrictBool = Field(False, description="fail a point whose throughput never became stationary "
                                       "(Heidelberger-Welch) within its run; the verdict gives the drift")
    token_ratio_tolerance: float = Field(
        0.1, gt=0, lt=1, description="the client's output tokens over the server's counters during the point must be "
        "1 within this (else the point measured another server, or shared its server with another client)")
    max_stall_s: float = Field(30.0, gt=0, le=86_400, description="fail a point in which the engines' token "
                               "counters stood still this long inside the measured window (a stopped engine or load "
                               "generator); longer than the trace's longest think time and slowest prefill")
    slo: str | None = Field(None, description="a tier of profile.slo each point must meet: its attainment's 95% "
                            "interval wholly at or above the tier's target (wholly below fails; across it: "
                            "unresolved, which fails too)")
    bound: Wanted | dict[StrictInt, Wanted] | None = Field(
        None, description="what must bind each point (rackbench.results.bound), or the points named by concurrency "
        "({32: gpu}: a low point may be load-bound): a GPU benchmark that measured a starved batch, a busy host or an "
        "idle server instead fails, with the evidence")

    def wanted_bound(self, concurrency: int) -> str | None:
        """What ``bound`` asks of the point at ``concurrency`` (None: nothing)."""
        return self.bound.get(concurrency) if isinstance(self.bound, dict) else self.bound
    baseline_tolerance: float = Field(
        0.45, ge=0, lt=1, description="with --baseline: allowed drop of output tok/s per GPU "
        "(docs/results.md#reports-baseline-reuse-progress)")

    @property
    def live(self) -> float:
        return self.error_rate if self.live_error_rate is None else self.live_error_rate


class SloTier(_Strict):
    """One service-level tier: per-request limits and the share of requests that must meet all of them
    (DistServe's goodput: a request is good when every limit holds; one that failed or never finished is not)."""

    ttft_ms: float | None = Field(None, gt=0, le=3_600_000, description="time to first token at most this")
    tpot_ms: float | None = Field(None, gt=0, le=3_600_000, description="time per output token after the first at "
                                  "most this: the request's mean inter-token latency, (E2E - TTFT) / (tokens - 1)")
    e2e_ms: float | None = Field(None, gt=0, le=86_400_000, description="end-to-end latency at most this")
    attainment: float = Field(0.95, gt=0, lt=1, description="the share of requests that must be good (below 1: no "
                              "finite run shows a share of 1 with confidence)")

    @model_validator(mode="after")
    def _some_limit(self) -> "SloTier":
        if self.ttft_ms is None and self.tpot_ms is None and self.e2e_ms is None:
            raise ValueError("a tier needs at least one limit: ttft_ms, tpot_ms or e2e_ms")
        return self

    @property
    def limits(self) -> dict[str, float]:
        return {k: v for k, v in (("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms), ("e2e_ms", self.e2e_ms))
                if v is not None}


class RelativeLimits(_Strict):
    """A search tier's limits as multiples of what the same deployment measures first: the median TTFT and TPOT of
    the search's first probe (its lowest concurrency). A machine twice as slow gets limits twice as loose, so the
    search answers on any machine; the answer records the limits it used and the probe they came from."""

    ttft: float | None = Field(None, ge=1, le=1000, description="TTFT limit = this x the first probe's median TTFT")
    tpot: float | None = Field(None, ge=1, le=1000, description="TPOT limit = this x the first probe's median TPOT")

    @model_validator(mode="after")
    def _some_multiple(self) -> "RelativeLimits":
        if self.ttft is None and self.tpot is None:
            raise ValueError("relative limits need ttft, tpot or both")
        return self


class SearchSpec(_Strict):
    """Find the highest concurrency that meets an SLO tier, inside the profile's one allocation (rackbench.results
    .search): probes from the lowest of profile.concurrency, doubling, then bisecting between the last met and the
    first not met, each a point of its own; the profile's concurrency list gives the range [lowest, highest]."""

    tier: str = Field(description="the profile.slo tier to meet")
    tolerance: float = Field(0.25, gt=0, le=1, description="stop bisecting when the first failing concurrency is "
                             "within this share above the last passing one (or 1 above it)")
    max_probes: StrictInt = Field(12, ge=2, le=64, description="at most this many probes")
    relative: RelativeLimits | None = Field(None, description="the tier's limits as multiples of the first probe's "
                                            "median TTFT and TPOT (its attainment target kept; its own limits "
                                            "unused by the search)")
    at_least: StrictInt | None = Field(None, ge=1, description="fail the case unless the answer is at least this "
                                       "concurrency; without it, no concurrency in the range meeting the tier is an "
                                       "answer, not a failure")


class TraceShape(_Strict):
    """Shape of the generated agentic sessions (``dataset: generated``); see rackbench.load.traces."""

    sessions_per_concurrency: StrictInt = Field(20, gt=0, le=10_000, description="sessions in the file per live session")
    turns: StrictInt = Field(4, ge=2, le=1000, description="turns per session (mean)")
    system_words: StrictInt = Field(300, ge=0, le=1_000_000, description="words of the system prompt every turn "
                                    "of a session repeats")
    user_words: StrictInt = Field(40, gt=0, le=1_000_000, description="words a user adds per turn (mean)")
    tool_words: StrictInt = Field(60, ge=0, le=1_000_000, description="words of tool output per turn (mean)")
    assistant_words: StrictInt = Field(30, ge=0, le=1_000_000, description="words of the assistant's earlier "
                                       "answers kept in the history per turn (mean)")
    output_tokens: StrictInt = Field(32, gt=0, le=1_000_000, description="tokens each request asks for")
    think_ms: StrictInt = Field(500, ge=0, le=3_600_000, description="pause between a turn's answer and the next "
                                "turn (mean)")
    subagent_rate: float = Field(0.2, ge=0, le=1, description="share of sessions that start a sub-agent session "
                                 "of their own")


RunLength = Literal["fixed", "adaptive", "decide"]        # how long a point runs: the rule's modes, one owner
RUN_LENGTHS = get_args(RunLength)


class StopRule(_Strict):
    """How long a point runs (rackbench.load.stopping;
    docs/load.md#run-length-steady-state-precision-adaptive-stopping-profileloadstop---run-length). ``fixed``: the whole
    ``duration_s`` (the seed's protocol). ``adaptive``: after ``min_s`` and ``min_requests``, at checkpoints growing by
    ``growth``, stop once the 95% interval of the throughput's mean (batch means after the MSER-5 warm-up) is within
    ``target`` of it and the series is stationary; else run to ``duration_s``. ``decide``: at the same checkpoints,
    stop once the point's SLO verdict is resolved (its gated tier, or a search's tier: met or missed with
    confidence); else run to ``duration_s``."""

    mode: RunLength = Field("fixed", description="fixed: the whole duration_s; adaptive: stop once the throughput "
                            "is known to target; decide: stop once the SLO verdict is resolved")
    min_s: float = Field(120.0, gt=0, le=86400, description="no stop before this many seconds of the run")
    min_requests: StrictInt = Field(662, ge=0, le=10_000_000, description="nor before this many completed "
                                    "requests (MLPerf's minimum for a p99 at 99% confidence)")
    target: float = Field(0.02, gt=0, lt=1, description="relative half-width of the 95% interval to reach")
    growth: float = Field(1.5, gt=1, le=10, description="checkpoint k is at min_s x growth^k")
    slice_s: float = Field(5.0, gt=0, le=600, description="seconds per slice of the counters' series")


# profile.load keys every load generator applies; the others only the generators that declare them (`honours`).
COMMON_LOAD_KEYS = frozenset({"generator", "options", "dataset", "trace", "duration_s", "warmup_grace_s", "seed",
                              "idle_wait_s", "post_duration_grace_s", "stop"})


class LoadSection(_Strict):
    """How the load generator drives each point. The keys every generator applies are :data:`COMMON_LOAD_KEYS`; the
    rest are applied by the generators that declare them (AIPerf: all of them; docs/load.md#aiperf-options)."""

    generator: str = Field("aiperf", pattern=r"^[a-z][a-z0-9_-]*$", description="a registered load generator: "
                           "aiperf, or a site's (entry point group rackbench.load_generators)")
    options: dict[str, Any] = Field(default_factory=dict, description="the generator's own options (each generator "
                                    "says which it takes)")
    dataset: str = Field("generated", description="'generated' (rackbench's agentic sessions) or an AIPerf "
                                                  "--public-dataset name, e.g. semianalysis_cc_traces_weka_062126")
    trace: TraceShape = TraceShape()
    duration_s: StrictInt = Field(3600, gt=0, le=7 * 86400, description="--benchmark-duration")
    warmup_grace_s: StrictInt = Field(1800, ge=0, le=86400, description="dataset mode: --agentic-warmup-grace-"
                                      "period (how long the warmup barrier waits for priming requests)")
    post_duration_grace_s: float | None = Field(None, ge=0, le=86400, description="--benchmark-grace-period (wait "
                                                "for responses after the duration); unset = AIPerf's 30 s")
    idle_gap_cap_s: StrictInt = Field(300, gt=0, le=86400, description="dataset mode: --trace-idle-gap-cap-seconds "
                                      "(longest idle gap within one trace)")
    system_idle_gap_cap_s: float | None = Field(None, gt=0, le=86400, description="dataset mode: --system-idle-gap-"
                                                "cap-seconds (longest time the whole replay may sit idle)")
    dataset_entries: StrictInt | None = Field(None, gt=0, le=1_000_000, description="dataset mode: "
                                              "--num-dataset-entries (AIPerf reads 100 unless told)")
    cache_bust: Literal["first-turn-prefix", "first-turn-suffix", "system-prefix", "system-suffix", "none"] = Field(
        "first-turn-prefix", description="dataset mode: --cache-bust; a marker unique per AIPerf run (point) and "
        "trajectory, so no point rides on the prefix cache an earlier point of the same server built")
    trajectory_start: tuple[float, float] | None = Field(None, description="dataset mode: --trajectory-start-min/"
                                                         "max-ratio (where in its trajectory each lane starts)")
    agentic_cache_warmup_s: float | None = Field(None, gt=0, le=86400, description="dataset mode: "
                                                 "--agentic-cache-warmup-duration")
    max_context_tokens: StrictInt | None = Field(None, gt=0, description="dataset mode: --max-context-length")
    slice_duration_s: float | None = Field(None, gt=0, le=3600, description="--slice-duration")
    tokenizer_trust_remote_code: StrictBool = Field(False, description="--tokenizer-trust-remote-code")
    idle_wait_s: StrictInt = Field(1800, gt=0, le=86400, description="max wait for idle engines before a point")
    dataset_timeout_s: StrictInt | None = Field(None, gt=0, le=86400, description="how long the load generator may "
                                                "take to load and tokenize the corpus (AIPerf's dataset configuration "
                                                "timeout; the seed: 1800 s); unset = the generator's default")
    seed: StrictInt = Field(42, ge=0, le=2**32 - 1, description="--random-seed")
    burst_phase_starts: StrictBool = Field(False, description="dataset mode: --burst-phase-starts")
    stop: StopRule = StopRule()

    @model_validator(mode="after")
    def _ratios(self) -> "LoadSection":
        lo, hi = self.trajectory_start or (0.0, 1.0)
        if not 0 <= lo <= hi <= 1:
            raise ValueError(f"trajectory_start must be [min, max] with 0 <= min <= max <= 1, got {[lo, hi]}")
        return self


class ProfileSection(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_]*$", description="the profile's name, the last part of its id "
                      "<model>-<gpu_type>-<name> and what -k selects")
    model: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$", description="a model of recipes/models/ (its size, "
                       "context, attention for the capacity checks)")
    cluster: str = Field(description="a cluster of recipes/clusters/ (--cluster retargets to one of its shape)")
    description: str = Field("", description="one line for people: what the profile measures")
    concurrency: list[StrictInt] = Field(max_length=256, description="the concurrencies of its points, one point "
                                         "each")
    layout: Layout = Field(description="how the GPUs of the deployment are split (checked against the flags)")
    labels: Labels = Labels()
    gates: Gates = Gates()
    slo: dict[Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]*$")], SloTier] = Field(
        default_factory=dict, description="named service-level tiers (e.g. interactive, batch): every point reports "
        "each one's attainment and goodput; gates.slo makes one a gate")
    search: SearchSpec | None = Field(None, description="run one search for the highest concurrency meeting a tier "
                                      "instead of every point of the concurrency list (which then gives its range)")
    load: LoadSection = LoadSection()
    stop_grace_s: StrictInt = Field(60, ge=0, le=3600, description="at release, how long a process may take to "
                                    "stop after TERM before KILL (engines deregister before etcd goes)")
    templates: list[str] = Field(
        default_factory=list,
        description="env keys (e.g. environment.LOG_DIR) whose {placeholders} rackbench fills at launch")
    allocations: Literal["one", "fit"] = Field("one", description="one: every point in one allocation; fit: the "
                                               "points split over as many allocations as the job's time limit needs")
    waive: dict[WAIVABLE, Annotated[OneLine, StringConstraints(min_length=10)]] = Field(
        default_factory=dict, description="advisory rules this profile breaks on purpose, each with the reason "
        "(e.g. a deliberately slowed run); every run lists them")

    @model_validator(mode="after")
    def _gated_tier(self) -> "ProfileSection":
        if self.gates.slo is not None and self.gates.slo not in self.slo:
            known = ", ".join(self.slo) or "none: add profile.slo.<tier>"
            raise ValueError(f"gates.slo names the tier {self.gates.slo!r}, which profile.slo does not define "
                             f"(defined: {known})")
        if self.search is not None:
            if self.search.tier not in self.slo:
                raise ValueError(f"search.tier names the tier {self.search.tier!r}, which profile.slo does not define "
                                 f"(defined: {', '.join(self.slo) or 'none: add profile.slo.<tier>'})")
            if len(set(self.concurrency)) < 2:
                raise ValueError("a search needs its range in concurrency: [lowest, highest] (two values at least)")
        return self
