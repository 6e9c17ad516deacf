"""Points written as the seed system's agentic aggregate (InferenceX's per-concurrency ``agg`` JSON, which its
``utils/agentic/aggregation`` writes from AIPerf's exports), so a team moving from it keeps its visualiser.

The seed's rules, applied to the point's own requests (rackbench.results.requests, the profiled phase):
- only successful profiled requests count; warm-up and failed ones are counted in ``request_accounting``;
- the throughput window runs from the first such request's start to the last one's end;
- per GPU divides by the deployment's GPUs (workers x TP x PP: the point's ``gpus``);
- latencies are in seconds; a request's ITL is (latency - TTFT) / (output tokens - 1), AIPerf's definition, and
  TPOT is the same series; interactivity is 1 / the matching ITL statistic, its ``std`` that of 1 / ITL per request;
- each statistic is the mean, the 50/75/90/95th percentiles by linear interpolation between closest ranks, and the
  population standard deviation; requests per second are counted by completion in 1 s windows;
- floats are rounded to 5 places.

What the seed reads from AIPerf's or the server's own exports and a rackbench point does not keep is left out
(AIPerf's per-user full-response throughput, the server's per-metric Prometheus export): the aggregate holds only
what the point measured.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np

from rackbench.core.files import write_json
from rackbench.core.report_folder import ExportFolder
from rackbench.core.results_folder import ResultsFolder
from rackbench.results import requests as request_file
from rackbench.results.model import PointResult
from rackbench.results.slo import tpot_ms

DECIMALS = 5


def _rounded(obj):
    if isinstance(obj, float):
        if not math.isfinite(obj):
            return None
        r = round(obj, DECIMALS)
        return int(r) if abs(r) >= 1 and r.is_integer() else r
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v) for v in obj]
    return obj


def stats(values: list[float]) -> dict[str, float]:
    """mean, p50, p75, p90, p95 (linear interpolation) and the population standard deviation; {} for none."""
    if not values:
        return {}
    pct = np.percentile(values, [50, 75, 90, 95])
    return {"mean": statistics.mean(values), "p50": float(pct[0]), "p75": float(pct[1]), "p90": float(pct[2]),
            "p95": float(pct[3]), "std": statistics.pstdev(values) if len(values) > 1 else 0.0}


def qps(ends: list[float]) -> dict:
    """Requests completed per 1 s window [t, t + 1), from the first completion, over the whole windows that fit."""
    ends = sorted(ends)
    if len(ends) < 2 or ends[-1] <= ends[0]:
        return {}
    edges = ends[0] + np.arange(math.floor(ends[-1] - ends[0]) + 1, dtype=float)
    at = np.searchsorted(ends, edges, side="left")          # completions before each edge: one pass, not one per window
    counts = [float(c) for c in np.diff(at)]
    body = stats(counts) if counts else {"mean": len(ends) / (ends[-1] - ends[0])}
    return {"window_seconds": 1.0, "samples": len(counts), **body}


def request_metrics(good: list, gpus: int) -> dict:
    itls = [x / 1000.0 for x in (tpot_ms(q) for q in good) if x is not None and x > 0]
    itl = stats(itls)
    intvty = {k: 1.0 / v for k, v in itl.items() if k != "std" and v > 0}
    if itls:
        per_request = [1.0 / x for x in itls]
        intvty["std"] = statistics.pstdev(per_request) if len(per_request) > 1 else 0.0
    start = min(q.start_s for q in good)
    end = max(q.end_s for q in good)
    duration = end - start
    tin = sum(int(q.input_tokens or 0) for q in good)
    tout = sum(int(q.output_tokens or 0) for q in good)
    tput = {"input": {"tokens_per_second": tin / duration}, "output": {"tokens_per_second": tout / duration},
            "total": {"tokens_per_second": (tin + tout) / duration}, "duration_seconds": duration,
            "per_gpu": {"total_tput_tps": (tin + tout) / duration / gpus, "output_tput_tps": tout / duration / gpus,
                        "input_tput_tps": tin / duration / gpus} if gpus else {}}
    return {"qps": qps([q.end_s for q in good]),
            "latency": {"ttft": stats([q.ttft_ms / 1000 for q in good if q.ttft_ms and q.ttft_ms > 0]),
                        "e2el": stats([q.latency_ms / 1000 for q in good if q.latency_ms and q.latency_ms > 0]),
                        "itl": itl, "tpot": dict(itl), "intvty": intvty},
            "tokens": {"input": stats([int(q.input_tokens or 0) for q in good]),
                       "output_actual": stats([int(q.output_tokens or 0) for q in good])},
            "throughput": tput}


def seed_framework(frontend: str) -> str:
    """The seed's FRAMEWORK label of a frontend (the frontend's own), or its name where it has none."""
    from rackbench.server.frontends import of
    try:
        return of(frontend).seed_framework or frontend
    except LookupError:
        return frontend


def aggregate(r: PointResult, every: list) -> dict:
    """The seed's aggregate of one point from all its requests (warm-up included, to be counted out)."""
    profiled = [q for q in every if q.profiled]
    good = [q for q in profiled if q.ok and q.start_s is not None and q.end_s is not None]
    if not good:
        raise ValueError(f"{r.identity.case_id}: no successful profiled request to aggregate")
    errors: dict[str, int] = {}
    for q in every:
        if not q.ok:
            kind = str((q.error or {}).get("type") or (q.error or {}).get("code") or "unknown")[:120]
            errors[kind] = errors.get(kind, 0) + 1
    i, lay = r.identity, r.identity.layout
    server = r.server
    reuse = r.reuse
    return _rounded({
        "hw": i.cluster, "conc": i.concurrency, "image": i.image, "model": i.model_repo,
        "infmax_model_prefix": i.model, "framework": seed_framework(i.frontend),
        "precision": "", "spec_decoding": i.spec_decoding, "disagg": False, "scenario_type": "agentic-coding",
        "is_multinode": len(r.machine.nodes) > 1 if r.machine else False,
        "tp": lay.tp, "ep": lay.ep, "pp": lay.pp, "dp_attention": "true" if lay.dp > 1 else "false",
        "kv_offloading": "cpu" if i.offload.enabled else "none",
        "kv_offload_backend": (i.offload.backend or "") if i.offload.enabled else "",
        "allocated_cpu_dram_gb": 0,
        "num_requests_total": len(every), "num_requests_successful": len(good),
        "request_accounting": {
            "records_total": len(every), "records_profiled": len(good),
            "records_dropped_total": len(every) - len(good),
            "records_warmup_dropped": len(every) - len(profiled),
            "records_error_dropped": sum(1 for q in every if not q.ok), "error_categories": errors},
        "request_metrics": {**request_metrics(good, i.gpus),
                            "cache": {"theoretical_cache_hit_rate": reuse.allowed_share if reuse else None}},
        "server_metrics": {"kv_cache": {"gpu_total_tokens": server.cache_tokens if server else None},
                           "cache": {"gpu_cache_hit_rate": server.prefix_cache_hit_rate if server else None}},
        "kv_cache_pool_tokens": server.cache_tokens if server else None,
        "rackbench": {"case_id": i.case_id, "run_id": i.run_id, "gpus": i.gpus, "card": i.card}})


def export(results: Path, out: Path, name: str | None = None) -> list[Path]:
    """One aggregate per point of ``results`` into ``out`` (``<case id>.json``) and their list as
    ``agg_<name>.json`` (default: the run id), as the seed's collector concatenates them."""
    from rackbench.results.files import load_points
    folder = ResultsFolder.at(results)
    points, rejected = load_points(folder.root)
    if not points:
        raise ValueError(f"{folder.points}: no point to export" + "".join(f"; {n}: {why}" for n, why in
                                                                        sorted(rejected.items())))
    written, bodies = [], []
    for r in sorted(points, key=lambda p: p.identity.case_id):
        case = folder.case(r.identity.profile, r.identity.case_id)
        kept = next((f for f in (case.requests, case.requests_archived) if f.is_file()), None)
        if kept is None:
            raise ValueError(f"{case.requests}: no requests file: the aggregate is computed from each request")
        body = aggregate(r, request_file.read(kept))
        bodies.append(body)
        written.append(write_json(ExportFolder(out).point(r.identity.case_id), body, indent=2))
    exp = name or points[0].identity.run_id
    written.append(write_json(ExportFolder(out).aggregate(exp), bodies, indent=2))
    return written
