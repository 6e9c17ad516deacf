"""What bound a point (#34): the GPU, the KV cache, the host, the load generator, or the offered load itself, from
evidence the point already has. Pure: no I/O.

- **client**: the load generator sent requests late (its issue latency over ``gates.max_issue_latency_ms``).
- **kv**: requests waited while the running ones held the KV cache nearly full: in at least ``WAITING_SHARE`` of the
  active slices of the engines' series requests waited, and the KV-cache usage in those slices averaged at least
  ``KV_FULL``; and the GPU was not busy (below). The batch is starved by the cache, not by the GPU.
- **gpu**: the GPU drew at least ``BUSY`` of its power cap (nvidia-smi's ``power.draw`` against the node record's
  ``power_limit_w``), or, where no cap is known, was busy at least ``BUSY`` of the time (``utilization.gpu``, which
  counts any kernel running and so overstates a starved GPU: on the H200 recordings 73-77% with 31-34% of the cap).
- **host**: one process of the deployment took at least ``HOST_CORE`` core-seconds per second (the host record,
  rackbench.server.host) while the GPU was not busy: a single-threaded engine loop, tokenizer or scheduler.
- **load**: no queue: requests waited in under ``WAITING_SHARE`` of the active slices (or the cache was not full when
  they did), and nothing above holds. Everything offered ran at once; more concurrency would load the server more.
- **unknown**: the point has no series to judge from.

The first that holds, in that order, is the point's bound; the evidence of every signal is kept beside it.
"""

from __future__ import annotations

from rackbench.results.parts import BoundVerdict

BUSY = 0.6             # share of the power cap (or of the time, without a cap) that makes a GPU busy (#34)
WAITING_SHARE = 0.1    # share of the active slices with a request waiting that makes a queue
KV_FULL = 0.8          # mean KV-cache usage in those slices that makes the cache what the requests waited for
HOST_CORE = 0.9        # core-seconds per second of one process that make it the host's limit


def issue_p99(concurrency, intended=None) -> float | None:
    """How late the client sent its requests after their schedule, p99 (ms): the generator's own summary (AIPerf's
    credit-to-start latency), else its per-request records' (``intended``: rackbench.results.omission)."""
    if concurrency.issue_latency_ms is not None and concurrency.issue_latency_ms.p99 is not None:
        return concurrency.issue_latency_ms.p99
    return intended.delay_ms.p99 if intended is not None else None


def client_late(concurrency, gates, intended=None) -> bool:
    """The load generator sent requests later after their schedule than ``gates.max_issue_latency_ms`` (its p99
    issue latency; a result without one is not late by this evidence)."""
    issue = issue_p99(concurrency, intended)
    return issue is not None and issue > gates.max_issue_latency_ms


def _verdict(bound: str, reason: str, evidence: dict) -> BoundVerdict:
    return BoundVerdict(bound=bound, reason=reason, evidence={
        k: (round(v, 4) if isinstance(v, float) else v) for k, v in evidence.items()})


def queue(series, window=None) -> dict:
    """The engines' queue over the slices in which they held a request or generated a token, inside the measured
    ``window`` where it is known (the warm-up's and the grace's slices are no measurement): the share of those with
    requests waiting, the mean KV-cache usage in them, and the mean running and waiting requests."""
    if series is None or not series.t:
        return {}
    inside = range(len(series.t)) if window is None else \
        [i for i, t in enumerate(series.t) if window.start_s < t <= window.end_s]
    active = [i for i in inside                        # the gauges are read at an instant and can miss short
              if (series.running[i] or 0) + (series.waiting[i] or 0) > 0 or (series.output_tps[i] or 0) > 0]
    if not active:
        return {}
    waited = [i for i in active if (series.waiting[i] or 0) >= 1]
    kv = [series.kv_usage[i] for i in waited if series.kv_usage[i] is not None]
    return {"active_slices": len(active), "waiting_share": len(waited) / len(active),
            "kv_usage_while_waiting": sum(kv) / len(kv) if kv else None,
            "running_mean": sum(series.running[i] or 0 for i in active) / len(active),
            "waiting_mean": sum(series.waiting[i] or 0 for i in active) / len(active)}


def gpu_load(telemetry, machine) -> dict:
    """The busiest GPU's mean power against its cap and its mean utilisation (empty without telemetry)."""
    if telemetry is None or not telemetry.gpus:
        return {}
    caps = {g.uuid: g.power_limit_w for node in (machine.nodes if machine else []) for g in node.gpus}
    best: dict = {}
    for g in telemetry.gpus:
        power = g.power_w.mean if g.power_w else None
        util = g.utilization_pct.mean if g.utilization_pct else None
        cap = caps.get(g.uuid)
        share = power / cap if power is not None and cap else None
        key = share if share is not None else (util or 0) / 100
        if not best or key > best["_key"]:
            best = {"_key": key, "power_w": power, "power_cap_w": cap, "power_share": share,
                    "utilization": util / 100 if util is not None else None}
    best.pop("_key")
    return best


def busy(gpu: dict) -> bool | None:
    if not gpu:
        return None
    if gpu.get("power_share") is not None:
        return gpu["power_share"] >= BUSY
    return gpu.get("utilization") is not None and gpu["utilization"] >= BUSY


def judge(series, telemetry, machine, host: dict | None, late: bool, window=None) -> BoundVerdict:
    """The point's bound and the evidence for it (the module's docstring says how), over the measured ``window``
    where it is known (the telemetry is the window's then too: results.build)."""
    q, gpu = queue(series, window), gpu_load(telemetry, machine)
    hottest = (host or {}).get("hottest") or {}
    evidence = {**q, **{f"gpu_{k}": v for k, v in gpu.items()},
                "host_hottest": hottest.get("name"), "host_hottest_cores": hottest.get("cores"),
                "client_late": late}
    gpu_busy = busy(gpu)
    queued = bool(q) and q["waiting_share"] >= WAITING_SHARE
    kv_full = queued and q["kv_usage_while_waiting"] is not None and q["kv_usage_while_waiting"] >= KV_FULL
    if late:
        return _verdict("client", "the load generator sent requests late (profile.gates.max_issue_latency_ms)", evidence)
    if not q:
        return _verdict("unknown", "no series of the engines' running and waiting requests", evidence)
    said = (f"requests waited in {q['waiting_share']:.0%} of the active slices, "
            f"{q['running_mean']:.1f} running and {q['waiting_mean']:.1f} waiting on average")
    gpu_said = _gpu_said(gpu)
    if kv_full and not gpu_busy:
        return _verdict("kv", f"{said}, the KV cache {q['kv_usage_while_waiting']:.0%} full while they waited; "
                           f"{gpu_said}", evidence)
    if gpu_busy:
        return _verdict("gpu", f"{gpu_said}; {said}", evidence)
    if hottest.get("cores") is not None and hottest["cores"] >= HOST_CORE:
        return _verdict("host", f"{hottest['name']} took {hottest['cores']:.2f} cores while {gpu_said}; {said}",
                     evidence)
    return _verdict("load", f"no queue the server could not take in ({said}); {gpu_said}", evidence)


def _gpu_said(gpu: dict) -> str:
    if not gpu:
        return "no GPU telemetry"
    parts = []
    if gpu.get("power_share") is not None:
        parts.append(f"the GPU drew {gpu['power_w']:.0f} W of its {gpu['power_cap_w']:.0f} W cap "
                     f"({gpu['power_share']:.0%})")
    if gpu.get("utilization") is not None:
        parts.append(f"busy {gpu['utilization']:.0%} of the time")
    return ", ".join(parts) or "no GPU power or utilisation sampled"
