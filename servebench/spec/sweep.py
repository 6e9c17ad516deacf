"""servebench's own sections: the sweep profile and the cluster description.

A *profile file* has three top-level keys::

    extends: base.yaml        # an srt-slurm recipe, or another profile file
    profile: {...}            # servebench's sweep section (this module)
    recipe: {...}             # an srt-slurm overlay, deep-merged onto the base's recipe

The srt-slurm part stays pure srt-slurm, so the effective recipe can be handed to srtctl.
"""

from __future__ import annotations

from typing import Annotated, Literal

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

    tp: StrictInt = Field(1, ge=1)
    dp: StrictInt = Field(1, ge=1)
    pp: StrictInt = Field(1, ge=1)
    ep: StrictInt = Field(1, ge=1)

    @property
    def gpus(self) -> int:
        return self.tp * self.dp * self.pp

    def __str__(self) -> str:
        parts = [f"TP{self.tp}"] + [f"{k.upper()}{v}" for k, v in (("dp", self.dp), ("pp", self.pp)) if v > 1]
        text = " x ".join(parts)
        return f"{text} (EP{self.ep})" if self.ep > 1 else text


class Labels(_Strict):
    """Sweep labels, as in InferenceX's master config."""

    spec_decoding: Literal["mtp", "draft_model", "none"] = Field("none", alias="spec-decoding")
    kv_offloading: Literal["none", "dram"] = Field("none", alias="kv-offloading")
    kv_offload_backend: str | None = Field(None, alias="kv-offload-backend")


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
    allow_client_bound: StrictBool = False
    baseline_tolerance: float = Field(
        0.45, ge=0, lt=1, description="with --baseline: allowed drop of output tok/s per GPU (README: run-to-run noise)")

    @property
    def live(self) -> float:
        return self.error_rate if self.live_error_rate is None else self.live_error_rate


class TraceShape(_Strict):
    """Shape of the generated agentic sessions (``dataset: generated``); see servebench.load.traces."""

    sessions_per_concurrency: StrictInt = Field(20, gt=0, le=10_000, description="sessions in the file per live session")
    turns: StrictInt = Field(4, ge=2, le=1000)
    system_words: StrictInt = Field(300, ge=0, le=1_000_000)
    user_words: StrictInt = Field(40, gt=0, le=1_000_000)
    tool_words: StrictInt = Field(60, ge=0, le=1_000_000)
    assistant_words: StrictInt = Field(30, ge=0, le=1_000_000)
    output_tokens: StrictInt = Field(32, gt=0, le=1_000_000)
    think_ms: StrictInt = Field(500, ge=0, le=3_600_000)
    subagent_rate: float = Field(0.2, ge=0, le=1)


class LoadSection(_Strict):
    """How AIPerf drives each point."""

    dataset: str = Field("generated", description="'generated' (servebench's agentic sessions) or an AIPerf "
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
    seed: StrictInt = Field(42, ge=0, le=2**32 - 1, description="--random-seed")
    burst_phase_starts: StrictBool = Field(False, description="dataset mode: --burst-phase-starts")

    @model_validator(mode="after")
    def _ratios(self) -> "LoadSection":
        lo, hi = self.trajectory_start or (0.0, 1.0)
        if not 0 <= lo <= hi <= 1:
            raise ValueError(f"trajectory_start must be [min, max] with 0 <= min <= max <= 1, got {[lo, hi]}")
        return self


class ProfileSection(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_]*$")
    model: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$")
    cluster: str
    description: str = ""
    concurrency: list[StrictInt] = Field(max_length=256)
    layout: Layout
    labels: Labels = Labels()
    gates: Gates = Gates()
    load: LoadSection = LoadSection()
    stop_grace_s: StrictInt = Field(60, ge=0, le=3600, description="at release, how long a process may take to "
                                    "stop after TERM before KILL (engines deregister before etcd goes)")
    templates: list[str] = Field(
        default_factory=list,
        description="env keys (e.g. environment.LOG_DIR) whose {placeholders} servebench fills at launch")
    waive: dict[WAIVABLE, Annotated[OneLine, StringConstraints(min_length=10)]] = Field(
        default_factory=dict, description="advisory rules this profile breaks on purpose, each with the reason "
        "(e.g. a deliberately slowed run); every run lists them")


class SlurmAccess(_Strict):
    partition: OneLine | None = None
    account: OneLine | None = None
    pyxis: StrictBool = False
    gres: OneLine = "gpu"
    drop: list[str] = Field(default_factory=list, description="recipe sbatch_directives / srun_options this "
                            "cluster cannot honour (a stand-in's small nodes, no pyxis); dropped and reported")


class Network(_Strict):
    """Interfaces for NCCL/Gloo; None = detected on the node at launch."""

    nccl_socket_ifname: str | None = None
    gloo_socket_ifname: str | None = None


class Infra(_Strict):
    """Where etcd and NATS come from when the cluster's discovery is etcd (the model image may not carry them)."""

    image: OneLine | None = Field(None, description="pyxis: run etcd/NATS in this image instead of the recipe's")
    etcd: list[OneLine] = Field(["etcd"], description="argv prefix of etcd on the head node")
    nats_server: list[OneLine] = Field(["nats-server"], description="argv prefix of nats-server on the head node")


class Runtime(_Strict):
    """How server processes are started on this cluster's nodes."""

    python: OneLine = Field("python3", description="interpreter for dynamo.frontend / dynamo.vllm (relative = repo)")
    vllm_serve: list[OneLine] = Field(["vllm", "serve"], description="argv prefix of a plain vLLM server")
    discovery: Literal["etcd", "file"] = Field(
        "etcd", description="Dynamo discovery: etcd + NATS on the head node, or a shared directory")
    environment: dict[EnvName, OneLine | None] = Field(
        default_factory=dict, description="added to every server process; null unsets a variable")
    node_environment: list[dict[EnvName, OneLine]] = Field(
        default_factory=list, description="per node rank: added to that node's worker (e.g. CPU core binding)")
    model_paths: dict[str, OneLine] = Field(
        default_factory=dict, description="recipe model.path alias -> directory on the nodes")
    container_model_dir: str = "/model"
    flag_table: str = Field("dynamo-1.6.1_vllm-0.31.0",
                            description="servebench/data/flags/<name>.json: flags each entrypoint accepts")
    dynamo_install: StrictBool = Field(
        True, description="run the recipe's dynamo.install on every node; false where the environment stands in "
                          "for the image and carries its own Dynamo (preflight then reports the version it finds)")
    infra: Infra = Infra()


class ClusterSpec(_Strict):
    name: str
    description: str = ""
    kind: Literal["gpu", "embedded"]
    backend: Literal["slurm", "local"]
    gpu_type: str = Field(pattern=r"^[a-z0-9]+$")
    runners: list[str] = []
    nodes: StrictInt = Field(gt=0)
    gpus_per_node: StrictInt = Field(gt=0)
    hbm_gib_per_gpu: float = Field(gt=0)
    host_dram_mib_per_node: StrictInt = Field(gt=0)
    dram_utilization: float = Field(gt=0, le=1)
    slurm: SlurmAccess = SlurmAccess()
    network: Network = Network()
    runtime: Runtime = Runtime()

    @property
    def markers(self) -> list[str]:
        if self.kind == "gpu":
            return ["hardware", self.gpu_type]
        return ["local"] + (["slurm"] if self.backend == "slurm" else [])

    @property
    def dram_budget_bytes_per_node(self) -> float:
        return self.host_dram_mib_per_node * 2**20 * self.dram_utilization
