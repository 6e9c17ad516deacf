"""Building one point's result from AIPerf's files (the raw truth) and the server's counters.

AIPerf's summary (``profile_export_aiperf.json``) covers the profiling phase only; its per-request records
(``profile_export.jsonl``) cover warmup too and carry each failure. Server counters are scraped by the suite right
before and after the AIPerf run, so the window holds warmup + profiling and nothing else. The shape is
:class:`servebench.result.PointResult`.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from .matrix import Point
from .result import SCHEMA_VERSION, PointResult
from .server.metrics import Snapshot

SUMMARY = "profile_export_aiperf.json"
RECORDS = "profile_export.jsonl"


def _stat(summary: dict, name: str, stat: str = "avg") -> float | None:
    value = summary.get(name)
    if isinstance(value, dict) and isinstance(value.get(stat), (int, float)) and math.isfinite(value[stat]):
        return float(value[stat])
    return None


def _dist(summary: dict, name: str) -> dict[str, float | None]:
    return {s: _stat(summary, name, s) for s in ("avg", "p50", "p90", "p99")}


def error_cause(error: dict) -> str:
    code = error.get("code")
    text = f"{error.get('type', '')} {error.get('message', '')}".lower()
    if code == 400 and "maximum context length" in text:
        return "context_overflow"
    if isinstance(code, int) and code >= 500:
        return "server_error"
    if isinstance(code, int) and code >= 400:
        return "client_error"
    if code is None and error.get("type") in ("RequestCancellationError", "CancelledError"):
        return "cancelled"
    return "transport" if code is None else "other"


def read_records(artifact_dir: Path) -> list[dict]:
    path = artifact_dir / RECORDS
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip()
        if line:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue    # a torn last line of a killed run
    return out


def trace_busy_fraction(records: list[dict]) -> float | None:
    """How much of a session's time the trace lets it have a request in flight: mean e2e / (mean e2e + mean
    think gap), the gap being from one turn's response to the next turn's credit (the trace's delay as AIPerf
    replayed it). With think time between turns, a load of N sessions keeps only N x this fraction in flight
    however fast the client is."""
    turns: dict[str, list[dict]] = {}
    e2e = []
    for r in records:
        m = r.get("metadata", {})
        if m.get("request_start_ns") is None or m.get("request_end_ns") is None:
            continue
        e2e.append(m["request_end_ns"] - m["request_start_ns"])
        turns.setdefault(str(m.get("x_correlation_id") or m.get("conversation_id")), []).append(m)
    gaps = []
    for session in turns.values():
        session.sort(key=lambda m: m.get("turn_index", 0))
        for prev, nxt in zip(session, session[1:]):
            if nxt.get("credit_issued_ns") is not None:
                gaps.append(max(0, nxt["credit_issued_ns"] - prev["request_end_ns"]))
    if not e2e:
        return None
    busy = sum(e2e) / len(e2e)
    think = sum(gaps) / len(gaps) if gaps else 0.0
    return busy / (busy + think) if busy + think > 0 else None


def build(point: Point, *, run_id: str, artifact_dir: Path, aiperf_exit_code: int | None,
          versions: dict[str, str], before: Snapshot | None, after: Snapshot | None,
          idle_wait_s: float | None, started_at: str, finished_at: str, logs: list[str]) -> PointResult:
    p = point.profile
    lay = p.spec.layout
    summary_path = artifact_dir / SUMMARY
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    records = read_records(artifact_dir)
    prof_recs = [r for r in records if r.get("metadata", {}).get("benchmark_phase") == "profiling"]
    warm_recs = [r for r in records if r.get("metadata", {}).get("benchmark_phase") == "warmup"]
    causes = Counter(error_cause(r["error"]) for r in prof_recs if isinstance(r.get("error"), dict))

    successful = _stat(summary, "request_count")
    errors = _stat(summary, "error_request_count")
    completed = _stat(summary, "completed_request_count")
    if summary:
        errors = errors or 0.0           # AIPerf omits the key when there were no errors
    else:                                # no summary (e.g. every request failed): count the records
        errors = float(sum(causes.values()))
        successful = float(len(prof_recs) - errors)
        completed = float(len(prof_recs))
    if completed is None and successful is not None:
        completed = successful + errors
    error_rate = (errors / completed) if completed else None

    gpus = p.topology.gpus          # every worker's GPUs (TP x DP x PP x agg_workers)
    out_tps = _stat(summary, "output_token_throughput")
    total_tps = _stat(summary, "total_token_throughput")
    itl = _dist(summary, "inter_token_latency")
    eff = _stat(summary, "effective_concurrency")
    ratio = (eff / point.concurrency) if eff is not None else None
    busy = trace_busy_fraction(prof_recs)
    allowed = point.concurrency * busy if busy is not None else None

    server = None
    token_ratio = None
    if before is not None and after is not None:
        d = after - before
        server = server_block(d)
        counted = sum(r.get("metrics", {}).get("output_sequence_length", {}).get("value", 0)
                      for r in records if "error" not in r)
        token_ratio = (counted / d.generation_tokens) if d.generation_tokens else None

    return PointResult.model_validate({
        "schema_version": SCHEMA_VERSION,
        "identity": {
            "case_id": point.id, "run_id": run_id, "profile": p.id, "model": p.spec.model,
            "model_repo": p.recipe.identity.model.repo, "cluster": p.cluster.name, "gpu_type": p.cluster.gpu_type,
            "image": p.recipe.model.container, "concurrency": point.concurrency,
            "layout": {"tp": lay.tp, "dp": lay.dp, "pp": lay.pp, "ep": lay.ep}, "gpus": gpus,
            "offload": {"enabled": p.offload, "backend": p.spec.labels.kv_offload_backend},
            "spec_decoding": p.spec.labels.spec_decoding, "recipe_fingerprint": p.fingerprint,
            "versions": {**versions, "aiperf": summary.get("aiperf_version")},
            "pinned_versions": dict(p.recipe.identity.frameworks),
            "dataset": p.spec.load.dataset, "started_at": started_at, "finished_at": finished_at,
        },
        "run": {"aiperf_exit_code": aiperf_exit_code, "summary_present": bool(summary),
                "was_cancelled": summary.get("was_cancelled"), "is_complete": summary.get("is_complete"),
                "idle_wait_s": idle_wait_s, "artifact_dir": str(artifact_dir), "server_logs": logs},
        "requests": {"completed": completed, "successful": successful, "errors": errors, "error_rate": error_rate,
                     "errors_by_cause": dict(sorted(causes.items())), "warmup_dropped": len(warm_recs)},
        "throughput": {
            "duration_s": _stat(summary, "benchmark_duration"),
            "requests_per_s": _stat(summary, "request_throughput"),
            "input_tps": _stat(summary, "input_token_throughput"), "output_tps": out_tps, "total_tps": total_tps,
            "gpus": gpus,
            "output_tps_per_gpu": out_tps / gpus if out_tps is not None else None,
            "total_tps_per_gpu": total_tps / gpus if total_tps is not None else None,
        },
        "interactivity": {
            "output_tps_per_user": _dist(summary, "output_token_throughput_per_user"),
            "intvty_p50": 1000.0 / itl["p50"] if itl["p50"] else None,
            "intvty_p90": 1000.0 / itl["p90"] if itl["p90"] else None,
        },
        "latency_ms": {"ttft": _dist(summary, "time_to_first_token"), "itl": itl,
                       "e2e": _dist(summary, "request_latency")},
        "concurrency": {"target": point.concurrency, "effective_avg": eff, "ratio": ratio,
                        "trace_allowed": allowed,
                        "ratio_of_allowed": (eff / allowed) if eff is not None and allowed else None,
                        "issue_latency_ms": {s: _stat(summary, "credit_to_start_latency", s)
                                             for s in ("avg", "p50", "p90", "p99")}},
        "server": server,
        "output_token_ratio": token_ratio,
    })


def _share(part: float, whole: float) -> float | None:
    return min(1.0, max(0.0, part / whole)) if whole > 0 else None


def server_block(d: Snapshot) -> dict:
    """Counter deltas of the measured window. Prompt-token shares come from vLLM's per-request source counter
    (prompt_tokens_by_source): the query counters grow on every scheduling attempt of a request waiting for KV
    space, so hits / queries understates the hit rate under pressure."""
    by_source = d.prompt_tokens_local_cache_hit + d.prompt_tokens_external + d.prompt_tokens_local_compute
    return {"source": "suite scrape before/after the AIPerf run (warmup + profiling)",
            **{k: v for k, v in d.as_dict().items() if k not in ("running", "waiting", "kv_cache_usage", "engines")},
            "prefix_cache_hit_rate": _share(d.prefix_cache_hits, d.prefix_cache_queries),
            "external_prefix_cache_hit_rate": _share(d.external_prefix_cache_hits, d.external_prefix_cache_queries),
            "prompt_token_shares": {"local_cache": _share(d.prompt_tokens_local_cache_hit, by_source),
                                    "cpu_tier": _share(d.prompt_tokens_external, by_source),
                                    "computed": _share(d.prompt_tokens_local_compute, by_source)}}
