"""Building one point's result from what was measured (rackbench.load.measure.Measurement): the load generator's
records (the raw truth, in neutral form) and the engines' counters around the run.

The generator's summary covers the profiling phase only; its per-request records cover warmup too and carry each
failure. When there is no summary (every request failed, or the file is torn) the counts come from the records
and the result says why (``run.problems``). Building never raises on what a run wrote.
"""

from __future__ import annotations

from collections import Counter

from rackbench.load.measure import Measurement, stop_rule
from rackbench.load.records import busy_fraction
from rackbench.load.steady import needed, quantile_upper
from rackbench.load.stopping import planned_looks
from rackbench.results import bound, card, energy, omission, reuse, slo
from rackbench.results.model import SCHEMA_VERSION, PointResult
from rackbench.results.parts import TraceReuse
from rackbench.results.window import (measured_window, series_block, steady_block, telemetry_block, window_block,
                                      window_of)
from rackbench.server.counters import Snapshot


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
    if error.get("type") == "InvalidInferenceResultError" or "no responses were received" in text:
        return "empty_response"          # answered, with nothing in it: AIPerf's name for a completion with no data
    return "transport" if code is None else "other"


def _itl(dist: dict) -> dict:
    """An ITL of exactly 0 is no inter-token gap measured (every token arrived in one chunk), not a fast server."""
    return {k: (None if v == 0 else v) for k, v in dist.items()}


def build(m: Measurement) -> PointResult:
    point, rec = m.point, m.records
    p = point.profile
    lay = p.spec.layout
    profiled = rec.profiled
    causes = Counter(error_cause(r.error) for r in profiled if r.error is not None)

    successful, errors, completed = rec.stat("successful"), rec.stat("errors"), rec.stat("completed")
    problems = list(rec.problems)
    if not rec.summary_present:              # counted from the records
        errors = float(sum(causes.values()) + sum(1 for r in profiled if not r.ok and r.error is None))
        successful = float(len(profiled)) - errors
        completed = float(len(profiled))
        if profiled:
            problems.append(f"{rec.generator} wrote no summary: requests counted from its per-request records")
    if completed is None and successful is not None:
        completed = successful + (errors or 0.0)
    if rec.unanswered:            # sent in the window, never answered: failed requests the records do not hold
        causes["unanswered"] += rec.unanswered
        errors, completed = (errors or 0.0) + rec.unanswered, (completed or 0.0) + rec.unanswered
    error_rate = (errors / completed) if completed else None

    gpus = p.topology.gpus          # every worker's GPUs (TP x DP x PP x agg_workers)
    out_tps, total_tps = rec.stat("output_tps"), rec.stat("total_tps")
    itl = _itl(rec.dist("itl_ms"))
    eff = rec.stat("effective_concurrency")
    busy = busy_fraction(profiled)
    allowed = point.concurrency * busy if busy is not None else None

    server, token_ratio = None, None
    before, after, window = measured_window(m)
    if before is not None and after is not None:
        server = {**server_block(after - before), "source": window}
    if m.before is not None and m.after is not None:
        # the generator's tokens against the server's over the whole run, warm-up included: no traffic before or
        # after it, so no window edge splits a request (a short point's warm-up tokens sit right at the measured
        # window's start, and a 1 s scrape moved a 500-token ratio by 5% either way)
        whole = (m.after - m.before).generation_tokens
        reported = [r.output_tokens for r in rec.requests if r.ok and r.output_tokens is not None]
        counted = sum(reported)
        token_ratio = (counted / whole) if whole and (reported or not any(r.ok for r in rec.requests)) else None
        if whole and not reported and any(r.ok for r in rec.requests):
            problems.append(f"{rec.generator} reported no output tokens per request: the point's own-server "
                            "cross-check (client against server tokens) cannot be made")

    r = PointResult.model_validate({
        "schema_version": SCHEMA_VERSION,
        "identity": {
            "case_id": point.id, "run_id": m.run_id, "profile": p.id, "model": p.spec.model,
            "model_repo": p.recipe.identity.model.repo, "cluster": p.cluster.name, "gpu_type": p.cluster.gpu_type,
            "image": p.recipe.model.container, "concurrency": point.concurrency,
            "layout": {"tp": lay.tp, "dp": lay.dp, "pp": lay.pp, "ep": lay.ep}, "gpus": gpus,
            "offload": {"enabled": p.offload, "backend": p.spec.labels.kv_offload_backend},
            "spec_decoding": p.spec.labels.spec_decoding, "recipe_fingerprint": p.fingerprint,
            "versions": {**m.versions, rec.generator: rec.version},
            "pinned_versions": dict(p.recipe.identity.frameworks),
            "dataset": p.spec.load.dataset, "started_at": m.started_at, "finished_at": m.finished_at,
            "frontend": p.recipe.frontend.type, "load_fingerprint": p.load_fingerprint,
        },
        "run": {"generator": rec.generator, "exit_code": m.exit_code, "summary_present": rec.summary_present,
                "was_cancelled": rec.cancelled, "is_complete": rec.complete, "idle_wait_s": m.idle_wait_s,
                "artifact_dir": str(m.out_dir or m.case.load_dir(rec.generator)), "server_logs": list(m.logs),
                "stopped_by": m.stopped_by, "interrupted": m.interrupted, "server_died": m.server_died,
                "problems": problems, "mode": m.mode, "stop_reason": m.stop_reason,
                "stopped_at_s": m.stopped_at_s, "planned_s": float(p.spec.load.duration_s),
                "checkpoints": [{"at_s": at, "found": found} for at, found in m.looks],
                "ready_workers": m.ready_workers, "expected_workers": m.expected_workers,
                "kv_events": kv_events_delta(m.kv_events_before, m.kv_events_after), "window": window_block(m)},
        "requests": {"completed": completed, "successful": successful, "errors": errors, "error_rate": error_rate,
                     "errors_by_cause": dict(sorted(causes.items())), "warmup_dropped": len(rec.warmup),
                     "recorded": len(profiled), "unanswered": rec.unanswered},
        "throughput": {
            "duration_s": rec.stat("duration_s"), "requests_per_s": rec.stat("requests_per_s"),
            "input_tps": rec.stat("input_tps"), "output_tps": out_tps, "total_tps": total_tps, "gpus": gpus,
            "output_tps_per_gpu": out_tps / gpus if out_tps is not None else None,
            "total_tps_per_gpu": total_tps / gpus if total_tps is not None else None,
        },
        "interactivity": {
            "output_tps_per_user": rec.dist("tps_per_user"),
            "intvty_p50": 1000.0 / itl["p50"] if itl["p50"] else None,
            "intvty_p90": 1000.0 / itl["p90"] if itl["p90"] else None,
        },
        "latency_ms": {"ttft": rec.dist("ttft_ms"), "itl": itl, "e2e": rec.dist("e2e_ms"),
                       "from_intended": omission.block(profiled)},
        "concurrency": {"target": point.concurrency, "effective_avg": eff,
                        "ratio": (eff / point.concurrency) if eff is not None else None,
                        "trace_allowed": allowed,
                        "ratio_of_allowed": (eff / allowed) if eff is not None and allowed else None,
                        "issue_latency_ms": rec.dist("issue_latency_ms")},
        "server": server,
        "output_token_ratio": token_ratio,
        "steady": steady_block(m, gpus),
        "series": series_block(m),
        "evidence": evidence_block(profiled),
        "slo": slo.tiers(p.spec.slo, p.spec.gates.slo, profiled, rec.stat("duration_s"), gpus,
                         looks=planned_looks(stop_rule(point), p.spec.load.duration_s) if m.mode == "decide" else 1),
        "economics": energy.block(m.power, (m.telemetry or {}).get("interval_s", 1.0), window_of(profiled),
                                  sum(r.output_tokens or 0.0 for r in profiled if r.ok), out_tps, total_tps, gpus,
                                  p.cluster.cost),
        "machine": {"nodes": m.machine, "extra": m.machine_extra} if m.machine else None,
        "telemetry": telemetry_block(m),
        "host": m.host,
    })
    late = bound.client_late(r.concurrency, p.spec.gates, r.latency_ms.from_intended)
    found = reuse.block(reuse.read(m.case.trace_reuse), r.server, point.concurrency, p, len(profiled))
    if r.machine is not None:
        cl = p.cluster
        r = r.model_copy(update={"identity": r.identity.model_copy(update={
            "card": card.card(r.machine.nodes),
            "card_differs": card.contradictions(cl.gpu_type, cl.gpus_per_node, cl.hbm_gib_per_gpu, r.machine.nodes)})})
    return r.model_copy(update={"bound": bound.judge(r.series, r.telemetry, r.machine, m.host, late, r.run.window),
                                "reuse": TraceReuse.model_validate(found) if found else None})


def evidence_block(profiled: list) -> dict:
    """TTFT, end-to-end and inter-token p99 of the successful profiled requests, each with its upper bound."""
    ok = [r for r in profiled if r.ok]
    timed = [r for r in ok if slo.tpot_ms(r) is not None]
    itl = [slo.tpot_ms(r) for r in timed]
    return {"ttft_p99_ms": quantile([r.ttft_ms for r in ok], [r.start_s for r in ok]),
            "e2e_p99_ms": quantile([r.latency_ms for r in ok], [r.start_s for r in ok]),
            "itl_p99_ms": quantile(itl, [r.start_s for r in timed])}


def quantile(values: list, sent_s: list | None = None, p: float = 0.99, confidence: float = 0.99) -> dict:
    """The p-quantile and its upper bound (rackbench.load.steady.quantile_upper: on the effective size of the
    requests in time where every one has a send time; else as if independent)."""
    import numpy as np       # here: every pytest start loads this module, through the plugin's fixtures
    keep = [i for i, v in enumerate(values) if v is not None]
    xs = [values[i] for i in keep]
    times = [sent_s[i] for i in keep] if sent_s is not None else None
    if times is not None and None in times:
        times = None
    need = needed(p, confidence)
    return {"estimate": float(np.percentile(xs, 100 * p)) if xs else None,
            "upper_bound": quantile_upper(xs, p, confidence, times), "confidence": confidence,
            "requests": len(xs), "needed": need, "enough": len(xs) >= need,
            "independent": times is None}


def _share(part: float, whole: float) -> float | None:
    return min(1.0, max(0.0, part / whole)) if whole > 0 else None


def server_block(d: Snapshot) -> dict:
    """Counter deltas of the measured window. Prompt-token shares come from vLLM's per-request source counter
    (prompt_tokens_by_source): the query counters grow on every scheduling attempt of a request waiting for KV
    space, so hits / queries understates the hit rate under pressure."""
    by_source = d.prompt_tokens_local_cache_hit + d.prompt_tokens_external + d.prompt_tokens_local_compute
    return {"source": "suite scrape before/after the load generator's run (warmup + profiling)",
            **{k: v for k, v in d.as_dict().items() if k not in ("running", "waiting", "kv_cache_usage", "engines",
                                                                 "block_size", "cache_tokens")},
            "block_size": d.block_size or None, "cache_tokens": d.cache_tokens or None,
            "prefix_cache_hit_rate": _share(d.prefix_cache_hits, d.prefix_cache_queries),
            "external_prefix_cache_hit_rate": _share(d.external_prefix_cache_hits, d.external_prefix_cache_queries),
            "prompt_token_shares": {"local_cache": _share(d.prompt_tokens_local_cache_hit, by_source),
                                    "cpu_tier": _share(d.prompt_tokens_external, by_source),
                                    "computed": _share(d.prompt_tokens_local_compute, by_source)}}


def kv_events_delta(before: dict | None, after: dict | None) -> dict[str, float] | None:
    """The KV events the router applied over the run, by status (None without both reads)."""
    if before is None or after is None:
        return None
    return {k: after.get(k, 0.0) - before.get(k, 0.0) for k in sorted({*before, *after})}
