"""Whether the load was what the point claims: errors within the gates, the run steady where required, the client
not the limit, and the server's cache reuse what the trace allows."""

from __future__ import annotations

from rackbench.core.format import number
from rackbench.results.bound import client_late, issue_p99
from rackbench.results.checks.base import Judged, count, made, pct
from rackbench.results.model import Check
from rackbench.results.reuse import GAP as REUSE_GAP, LOW as REUSE_LOW, REQUESTS as REUSE_REQUESTS, WARM


def error_rate(p: Judged) -> Check:
    """The share of failed requests within profile.gates.error_rate, with their causes."""
    req, g = p.result.requests, p.gates
    rate = req.error_rate
    causes = ", ".join(f"{k} {v}" for k, v in req.errors_by_cause.items()) or "none classified"
    counted = f"{count(req.errors or 0)} of {count(req.completed or 0)} requests"
    return made("error_rate", rate is not None and rate <= g.error_rate,
                f"error rate {pct(rate)} ({counted}) within the gate {pct(g.error_rate)}",
                f"error rate {pct(rate)} ({counted}; {causes}) exceeds the gate {pct(g.error_rate)} "
                "(profile.gates.error_rate)")


def live_error_rate(p: Judged) -> Check | None:
    """The load generator did not abort the run on its live error gate (rackbench's own adaptive stop is not
    that)."""
    run = p.result.run
    if not (run.was_cancelled and run.stopped_at_s is None):
        return None
    return Check(name="live_error_rate", ok=False, message=f"{run.generator} aborted the run: live error rate "
                 f"above {pct(p.gates.live)} (profile.gates.live_error_rate)")


def steady(p: Judged) -> Check | None:
    """profile.gates.require_steady: the throughput became stationary within the run (Heidelberger-Welch)."""
    if not p.gates.require_steady:
        return None
    st = p.result.steady
    if st is None or st.stationary is None:
        why = "no series to judge" if st is None else f"{st.batches} batch means after the warm-up: too few to judge"
        return Check(name="steady", ok=False, message=f"not shown steady: {why} (profile.gates.require_steady)")
    said = (f"after a warm-up of {number(st.truncated_s, 's')} s, {st.batches} batch means, Heidelberger-Welch "
            f"p={st.p_value:.3f}, drift {number(st.drift_per_min_rel, 'change')} per minute")
    return made("steady", st.stationary, f"steady: stationary {said}",
                  f"not steady: the throughput still drifts {said} (profile.gates.require_steady; a longer "
                  "duration_s, or the server's own drift)")


def concurrency(p: Judged) -> Check:
    """Was the load generator, not the server, the limit? The client's own evidence decides: its credit-to-start
    latency (how late it sent requests after their schedule). Effective concurrency is reported against what the
    trace allows (think time between turns bounds it however fast the server is), and is the fallback evidence
    for results without the latency."""
    conc, g, generator = p.result.concurrency, p.gates, p.result.run.generator
    issue = issue_p99(conc, p.result.latency_ms.from_intended)
    allowed = f"; the trace allows {number(conc.trace_allowed, 'conc')} in flight" if conc.trace_allowed else ""
    where = f"effective concurrency {number(conc.effective_avg, 'conc')} of target {conc.target}{allowed}"
    if issue is not None:
        ok = not client_late(conc, g, p.result.latency_ms.from_intended)
        said = f"{generator} sent requests up to {number(issue, 'ms')} ms (p99) after their schedule"
        passed = f"not client-bound: {said} (<= {g.max_issue_latency_ms:g} ms); {where}"
        message = (f"client-bound: {said} (> {g.max_issue_latency_ms:g} ms, profile.gates.max_issue_latency_ms); "
                   f"{where}")
    else:
        ratio = conc.ratio_of_allowed if conc.ratio_of_allowed is not None else conc.ratio
        ok = ratio is not None and ratio >= g.min_concurrency_ratio
        of = "what the trace allows" if conc.ratio_of_allowed else "target"
        passed = f"not client-bound: {where} ({pct(ratio)} of {of} >= {pct(g.min_concurrency_ratio)})"
        message = (f"client-bound: {where} ({pct(ratio)} of {of} < {pct(g.min_concurrency_ratio)}) and no issue "
                   f"latency from {generator} to say otherwise")
    if ok:
        return Check(name="concurrency", ok=True, message=passed)
    if g.allow_client_bound:
        return Check(name="concurrency", ok=True, message=message + " (reported, not failed: "
                     "profile.gates.allow_client_bound)")
    return Check(name="concurrency", ok=False,
                 message=message + " (set profile.gates.allow_client_bound to report it without failing)")


def reuse(p: Judged) -> Check | None:
    """The server reused about what the trace allows wherever its cache should hold the live sessions
    (rackbench.results.reuse); where it cannot hold them the gap is the cache's size, said and not failed."""
    result = p.result
    r = result.reuse
    if r is None or r.gap is None:
        return None
    said = (f"the server served {pct(r.measured_share)} of the prompt tokens from its caches; the trace allows "
            f"{pct(r.allowed_share)} (block size {r.block_size})")
    held = (f"its caches hold {number(r.cache_tokens, 'count')} tokens and the live sessions' prefixes need "
            f"~{number(r.working_set_tokens, 'count')}")
    sent = result.requests.completed
    if r.warm and r.trace_requests and sent and sent > r.trace_requests:
        return made("reuse", False, said, f"{said}: the window sent {count(sent)} requests from a trace of "
                      f"{count(r.trace_requests)}, so {result.run.generator} replayed the trace and its second pass "
                      "hit what the first cached; TTFT and throughput measure a cache that no cold start has. Give the "
                      "point a trace longer than its window (profile.load.trace.sessions_per_concurrency, or "
                      "profile.load.dataset)")
    if r.warm:
        return made("reuse", False, said, f"{said}: more than the window's own requests allow (by over {WARM:.0%} "
                      "of the prompt tokens), so its cache was warm at the window's start: hits on prefixes an earlier "
                      "request cached (another point on this server replaying the same prompts, a trace without "
                      "rackbench's keyspace marker); TTFT and throughput measure a cache that no cold start has. "
                      "Start the point on a fresh server, or give every point's prompts a prefix of its own")
    if not r.should_hold:
        return Check(name="reuse", ok=True, message=f"{said}; {held}, so the cache cannot hold them all")
    done, least = result.requests.completed or 0, REUSE_REQUESTS * result.identity.concurrency
    if done < least:
        return Check(name="reuse", ok=True, message=f"{said}; too few requests to judge it ({count(done)} < "
                     f"{least}: a short window holds mostly sessions' first turns)")
    far = r.gap > REUSE_GAP and r.measured_share < REUSE_LOW * r.allowed_share
    return made("reuse", not far, f"{said}; {held}", (
        f"{said}, and {held}: the bytes the server saw were not the trace's from turn to turn (a client that "
        "re-renders or stamps a turn's history), or prefix caching is off (enable-prefix-caching)"))
