"""The `aiperf profile` command of one point: every option a documented function of the recipe (the table below is
the "AIPerf options" table of docs/load.md#aiperf-options; a test fails if a rendered option is missing from it)."""

from __future__ import annotations

from rackbench.load.generator import LoadJob

SESSION_HEADER = "X-Session-ID"

# How each AIPerf option of a point follows from the recipe: (option, profile.load key or what sets it, the seed's
# value in InferenceX's agentic_srt.sh / PR #2404). The AIPerf table of docs/load.md#aiperf-options is this one;
# tests check that every option of a rendered command is listed here.
OPTIONS: list[tuple[str, str, str]] = [
    ("--model", "recipe served-model-name", "SERVED_MODEL_NAME"),
    ("--url", "the deployment's API URL", "http://localhost:$PORT"),
    ("--endpoint-type", "fixed: chat", "chat"),
    ("--streaming", "fixed", "on"),
    ("--ui", "fixed: none (a status line instead)", "default"),
    ("--no-gpu-telemetry", "fixed", "on"),
    ("--tokenizer", "the model directory as the client sees it (an offline HF-cache copy made there)", "$MODEL"),
    ("--tokenizer-trust-remote-code", "tokenizer_trust_remote_code", "on"),
    ("--random-seed", "seed", "42"),
    ("--concurrency", "the point's concurrency", "$CONC"),
    ("--benchmark-duration", "duration_s", "$DURATION (3600)"),
    ("--benchmark-grace-period", "post_duration_grace_s (unset: AIPerf's 30 s)", "unset"),
    ("--use-server-token-count", "fixed", "on"),
    ("--extra-inputs", "fixed: ignore_eos:true (the scenario requires it)", "ignore_eos"),
    ("--connection-reuse-strategy", "fixed: sticky-user-sessions (generated trace)", "n/a"),
    ("--session-header", "fixed: X-Session-ID (generated trace)", "n/a"),
    ("--failed-request-threshold", "profile.gates.live_error_rate", "AIPERF_LIVE_FAILED_REQUEST_THRESHOLD"),
    ("--artifact-dir", "the case directory", "$RESULT_DIR/aiperf_artifacts"),
    ("--server-metrics", "every engine's /metrics", "worker leaders' URLs"),
    ("--slice-duration", "slice_duration_s", "1.0"),
    ("--input-file", "generated trace: the point's trace file", "n/a"),
    ("--custom-dataset-type", "generated trace: mooncake_trace", "n/a"),
    ("--num-sessions", "generated trace: trace.sessions_per_concurrency x concurrency", "n/a"),
    ("--warmup-request-count", "generated trace: one per live session", "n/a"),
    ("--public-dataset", "dataset", "semianalysis_cc_traces_weka_062126"),
    ("--num-dataset-entries", "dataset_entries", "393"),
    ("--cache-bust", "cache_bust", "first-turn-prefix (scenario lock)"),
    ("--trace-idle-gap-cap-seconds", "idle_gap_cap_s", "300"),
    ("--system-idle-gap-cap-seconds", "system_idle_gap_cap_s", "10 (scenario lock)"),
    ("--trajectory-start-min-ratio", "trajectory_start[0]", "0.25"),
    ("--trajectory-start-max-ratio", "trajectory_start[1]", "0.75"),
    ("--agentic-warmup-grace-period", "warmup_grace_s", "1800 (3600 for DEP16)"),
    ("--agentic-cache-warmup-duration", "agentic_cache_warmup_s", "unset (the fork's --warmup-requests-per-lane 10)"),
    ("--max-context-length", "max_context_tokens", "unset"),
    ("--burst-phase-starts", "burst_phase_starts", "off"),
]


def command(job: LoadJob, executable: list[str], tokenizer: str) -> list[str]:
    """The `aiperf profile` argv of one point: concurrency = live sessions, warmup excluded, bounded by the
    recipe's duration, the live error gate as AIPerf's early abort; every option as :data:`OPTIONS` says."""
    profile = job.point.profile
    load, gates = profile.spec.load, profile.spec.gates
    conc = job.point.concurrency
    argv = [*executable, "profile", "--model", job.model_name, "--url", job.api_url,
            "--endpoint-type", "chat", "--streaming", "--ui", "none", "--no-gpu-telemetry",
            "--tokenizer", tokenizer, "--random-seed", str(load.seed),
            "--concurrency", str(conc), "--benchmark-duration", str(load.duration_s),
            "--use-server-token-count", "--extra-inputs", "ignore_eos:true",
            "--failed-request-threshold", str(gates.live),
            "--artifact-dir", str(job.case.load_dir("aiperf"))]
    if load.tokenizer_trust_remote_code:
        argv.append("--tokenizer-trust-remote-code")
    if load.post_duration_grace_s is not None:
        argv += ["--benchmark-grace-period", f"{load.post_duration_grace_s:g}"]
    if load.slice_duration_s is not None:
        argv += ["--slice-duration", f"{load.slice_duration_s:g}"]
    for url in job.metrics_urls:
        argv += ["--server-metrics", url]
    if job.trace is not None:
        argv += ["--connection-reuse-strategy", "sticky-user-sessions", "--session-header", SESSION_HEADER,
                 "--input-file", str(job.trace), "--custom-dataset-type", "mooncake_trace",
                 "--num-sessions", str(job.sessions), "--warmup-request-count", str(conc)]
    else:
        argv += dataset_args(load)
    return argv


def dataset_args(load) -> list[str]:
    """A named agentic corpus: AIPerf's agentic replay (trajectory starts, synthesized warmup, idle caps)."""
    argv = ["--public-dataset", load.dataset, "--cache-bust", load.cache_bust,
            "--trace-idle-gap-cap-seconds", str(load.idle_gap_cap_s),
            "--agentic-warmup-grace-period", str(load.warmup_grace_s)]
    if load.dataset_entries is not None:
        argv += ["--num-dataset-entries", str(load.dataset_entries)]
    if load.system_idle_gap_cap_s is not None:
        argv += ["--system-idle-gap-cap-seconds", f"{load.system_idle_gap_cap_s:g}"]
    if load.trajectory_start is not None:
        argv += ["--trajectory-start-min-ratio", f"{load.trajectory_start[0]:g}",
                 "--trajectory-start-max-ratio", f"{load.trajectory_start[1]:g}"]
    if load.agentic_cache_warmup_s is not None:
        argv += ["--agentic-cache-warmup-duration", f"{load.agentic_cache_warmup_s:g}"]
    if load.max_context_tokens is not None:
        argv += ["--max-context-length", str(load.max_context_tokens)]
    if load.burst_phase_starts:
        argv.append("--burst-phase-starts")
    return argv
