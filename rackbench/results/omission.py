"""Latency as users feel it under load: coordinated omission (G. Tene, "How NOT to measure latency", 2013; the
correction wrk2 and HdrHistogram make). A load generator that sends a request late, because it was busy, measures
the request's latency from when it sent it, and the wait before that is lost from every percentile. AIPerf stamps
each request with the time its schedule let it go (its credit: after the think time following the previous turn)
and the time it sent it; here each successful profiled request's TTFT and end-to-end latency are counted from the
credit too (pure: no I/O).

What it cannot see: a credit the generator's own scheduler issued late (a starved timing loop) carries its delay in
the credit itself; and a server that answers slowly delays the next turn's credit, which is the closed loop of an
agentic replay, not an omission.
"""

from __future__ import annotations

from rackbench.load.records import Request

DIFFERS = 0.05      # the p99 from the credit this share above the measured p99: reported as differing


def dist(values: list[float]) -> dict:
    """Mean and p50 / p90 / p99 (numpy's linear interpolation between order statistics)."""
    import numpy as np
    if not values:
        return {"avg": None, "p50": None, "p90": None, "p99": None}
    a = np.asarray(values, dtype=float)
    return {"avg": float(a.mean()), **{f"p{q}": float(np.percentile(a, q)) for q in (50, 90, 99)}}


def block(profiled: list[Request]) -> dict | None:
    """The latency from each request's credit, its send delay, and whether it differs from the measured latency;
    None where no successful profiled request has both times."""
    sent = [q for q in profiled if q.ok and q.credit_s is not None and q.start_s is not None]
    if not sent:
        return None
    delay = [max(0.0, (q.start_s - q.credit_s) * 1000.0) for q in sent]
    out, differs = {"requests": len(sent), "delay_ms": dist(delay)}, False
    for key, field in (("ttft", "ttft_ms"), ("e2e", "latency_ms")):
        pairs = [(getattr(q, field), d) for q, d in zip(sent, delay) if getattr(q, field) is not None]
        measured, out[key] = dist([v for v, _ in pairs]), dist([v + d for v, d in pairs])
        differs = differs or (pairs != [] and out[key]["p99"] > (1 + DIFFERS) * measured["p99"])
    return {**out, "differs": differs}
