"""Run real AIPerf (its own venv, a subprocess in its own process group) for one point.

AIPerf exits 0 with failed requests and writes no summary when every request fails, so nothing here judges a
run by its exit code: the caller reads the files (see :mod:`servebench.results`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..cluster.base import stop_process_group
from ..poll import Done, PollTimeout, poll
from ..matrix import Point
from ..profile import Profile
from ..server.plan import ServerPlan

DEFAULT_BIN = ".venvs/aiperf/bin/aiperf"
SESSION_HEADER = "X-Session-ID"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "config.json", "generation_config.json")


@dataclass(frozen=True)
class Invocation:
    argv: list[str]
    env: dict[str, str]
    artifact_dir: Path
    log: Path


def offline_tokenizer(model_dir: Path, cache: Path, name: str) -> str:
    """Copy a local tokenizer into an HF-cache layout and return its repo id (``local/<name>``).

    AIPerf 0.13.0 rejects a directory path whenever it loads tokenizers offline (HF_HUB_OFFLINE, and always in
    its parallel decode pool); a cached repo id works."""
    files = [model_dir / f for f in TOKENIZER_FILES if (model_dir / f).is_file()]
    digest = hashlib.sha1(b"".join(f.read_bytes() for f in files)).hexdigest()
    repo = cache / "hub" / f"models--local--{name}"
    snap = repo / "snapshots" / digest
    if not (snap / "tokenizer.json").is_file():
        snap.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copy2(f, snap / f.name)
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(digest)
    return f"local/{name}"


# How each AIPerf option of a point follows from the recipe: (option, profile.load key or what sets it, the seed's
# value in InferenceX's agentic_srt.sh / PR #2404). The README's AIPerf table is this one; tests check that every
# option of a rendered command is listed here.
OPTIONS: list[tuple[str, str, str]] = [
    ("--model", "recipe served-model-name", "SERVED_MODEL_NAME"),
    ("--url", "the deployment's API URL", "http://localhost:$PORT"),
    ("--endpoint-type", "fixed: chat", "chat"),
    ("--streaming", "fixed", "on"),
    ("--ui", "fixed: none (a status line instead)", "default"),
    ("--no-gpu-telemetry", "fixed", "on"),
    ("--tokenizer", "the model directory (an offline HF-cache copy)", "$MODEL"),
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


def command(profile: Profile, point: Point, plan: ServerPlan, *, aiperf_bin: str, artifact_dir: Path,
            tokenizer: str, trace: Path | None, sessions: int | None) -> list[str]:
    """The `aiperf profile` argv of one point: concurrency = live sessions, warmup excluded, bounded by the
    recipe's duration, the live error gate as AIPerf's early abort; every option as :data:`OPTIONS` says."""
    load, gates = profile.spec.load, profile.spec.gates
    conc = point.concurrency
    argv = [aiperf_bin, "profile", "--model", plan.model_name, "--url", plan.api_url,
            "--endpoint-type", "chat", "--streaming", "--ui", "none", "--no-gpu-telemetry",
            "--tokenizer", tokenizer, "--random-seed", str(load.seed),
            "--concurrency", str(conc), "--benchmark-duration", str(load.duration_s),
            "--use-server-token-count", "--extra-inputs", "ignore_eos:true",
            "--failed-request-threshold", str(gates.live),
            "--artifact-dir", str(artifact_dir)]
    if load.tokenizer_trust_remote_code:
        argv.append("--tokenizer-trust-remote-code")
    if load.post_duration_grace_s is not None:
        argv += ["--benchmark-grace-period", f"{load.post_duration_grace_s:g}"]
    if load.slice_duration_s is not None:
        argv += ["--slice-duration", f"{load.slice_duration_s:g}"]
    for url in plan.metrics_urls:
        argv += ["--server-metrics", url]
    if trace is not None:
        argv += ["--connection-reuse-strategy", "sticky-user-sessions", "--session-header", SESSION_HEADER,
                 "--input-file", str(trace), "--custom-dataset-type", "mooncake_trace",
                 "--num-sessions", str(sessions), "--warmup-request-count", str(conc)]
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


def environment(case_dir: Path, hf_cache: Path, tmp: Path) -> dict[str, str]:
    """Dataset mmap and caches under the case dir; tokenizers only from the local cache.

    TMPDIR is ``tmp``, a short directory of its own: AIPerf puts its ZMQ IPC sockets there, and a socket path
    longer than 107 bytes (a deep results dir) makes every service fail while AIPerf still exits 0."""
    work = case_dir / "aiperf-work"
    work.mkdir(parents=True, exist_ok=True)
    return {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(hf_cache / "hub"), "HF_HOME": str(hf_cache),
            "TMPDIR": str(tmp), "AIPERF_DATASET_MMAP_BASE_PATH": str(work),
            "AIPERF_DATASET_MMAP_CACHE_DIR": str(work / "mmap-cache"), "XDG_CACHE_HOME": str(work / "cache"),
            "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}


def run(inv: Invocation, timeout: float, on_tick=None, tick_s: float = 15.0) -> int:
    """Run AIPerf to completion (or kill its process group after ``timeout`` s). Returns its exit code.
    ``on_tick(elapsed_s)`` is called every ``tick_s`` seconds while it runs (the live status line)."""
    inv.log.parent.mkdir(parents=True, exist_ok=True)
    (inv.artifact_dir.parent / "aiperf-command.txt").write_text(" ".join(inv.argv) + "\n")
    start = time.monotonic()
    with open(inv.log, "ab") as out:
        proc = subprocess.Popen(inv.argv, env={**os.environ, **inv.env}, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        next_tick = [tick_s]

        def probe():
            code = proc.poll()
            if code is not None:
                return Done(code)
            elapsed = time.monotonic() - start
            if on_tick is not None and elapsed >= next_tick[0]:
                next_tick[0] += tick_s
                on_tick(elapsed)
            return "running"
        try:
            return poll(probe, timeout=timeout, interval=min(1.0, tick_s), what="AIPerf")
        except PollTimeout:
            stop_process_group(proc)
            raise subprocess.TimeoutExpired(inv.argv, timeout) from None
        except BaseException:
            stop_process_group(proc)
            raise


def errors_so_far(artifact_dir: Path) -> int:
    """Failed requests AIPerf has recorded so far (its per-request export, when it has written one)."""
    path = artifact_dir / "profile_export.jsonl"
    try:
        with open(path, "rb") as fh:
            return sum(1 for line in fh if b'"error":' in line)
    except OSError:
        return 0
