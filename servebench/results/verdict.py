"""Judge one point's result against its profile's gates (and a baseline). Each failed check has its own message.

The pytest case judges once and stores the :class:`~servebench.results.model.Verdict` with the point; reports show
that stored verdict and never re-judge.
"""

from __future__ import annotations

from datetime import datetime, timezone

from servebench.core.format import interval, number
from servebench.results import routing
from servebench.results.bound import client_late
from servebench.results.reuse import GAP as REUSE_GAP, LOW as REUSE_LOW, REQUESTS as REUSE_REQUESTS, WARM
from servebench.results.slo import describe
from servebench.recipe.profile import Profile
from servebench.results.model import Check, PointResult, Verdict
from servebench.results.window import generator_ended, ran_out_check, stall_check, unanswered_check


def _check(name: str, ok: bool, passed: str, failed: str) -> Check:
    """A check with the message of its outcome: what passed, or what failed and the fix."""
    return Check(name=name, ok=ok, message=passed if ok else failed)


def judge(result: PointResult, profile: Profile, baseline: dict | None = None,
          baseline_file: str | None = None, schema_errors: list[str] = (), against: tuple[str, object] | None = None
          ) -> Verdict:
    """All checks in order. ``schema_errors``: how the written file breaks the checked-in JSON Schema (what
    consumers of the file rely on). With a baseline (servebench.results.baseline), the point must also keep its
    throughput within the profile's tolerance."""
    checks = [_check("schema", not schema_errors, "the result file matches schemas/result.schema.json",
                     "result file does not match schemas/result.schema.json:\n  " + "\n  ".join(schema_errors))]
    g = profile.spec.gates
    req, thr, conc, run = result.requests, result.throughput, result.concurrency, result.run
    case, target = result.identity.case_id, result.identity.concurrency

    if run.server_died or run.interrupted:        # recorded only when it happened: a failed check, first
        checks.append(Check(name="servers", ok=False, message=(
            f"the server died during the point: {run.server_died} (its log tail is in the report below; every "
            "server log is kept in the case's server-logs/)" if run.server_died else
            f"the session was interrupted during the point ({run.stopped_by}): not a measurement")))
    why = (f"0 successful requests of {_count(req.completed)} completed" if req.completed
           else f"{run.generator} completed no request")
    if not run.summary_present:
        why += f" and {run.generator} wrote no summary (exit code {run.exit_code}; see {run.artifact_dir}/logs)"
    checks.append(_check("successful", bool(req.successful),
                         f"{_count(req.successful)} successful requests of {_count(req.completed)} completed", why))

    checks.append(own_server(result, g.token_ratio_tolerance))
    if req.cut_short:
        checks.append(Check(name="records", ok=False, message=(
            f"{run.generator}'s per-request export holds {_count(req.recorded)} of the {_count(req.completed)} "
            f"requests its summary counts (cut short: a full or failing disk?): the requests' latencies and the "
            f"history's rows are not the point's (its files: {run.artifact_dir})")))
    checks += [c for c in (generator_ended(result), unanswered_check(result), stall_check(result, g.max_stall_s),
                           ran_out_check(result, profile.spec.load), reuse_check(result), counters_check(result),
                           routing.check(result)) if c is not None]

    rate = req.error_rate
    causes = ", ".join(f"{k} {v}" for k, v in req.errors_by_cause.items()) or "none classified"
    counted = f"{_count(req.errors or 0)} of {_count(req.completed or 0)} requests"
    checks.append(_check("error_rate", rate is not None and rate <= g.error_rate,
                         f"error rate {_pct(rate)} ({counted}) within the gate {_pct(g.error_rate)}",
                         f"error rate {_pct(rate)} ({counted}; {causes}) exceeds the gate {_pct(g.error_rate)} "
                         "(profile.gates.error_rate)"))
    if run.was_cancelled and run.stopped_at_s is None:       # not servebench's own adaptive stop
        checks.append(Check(name="live_error_rate", ok=False, message=f"{run.generator} aborted the run: live error rate "
                            f"above {_pct(g.live)} (profile.gates.live_error_rate)"))
    if g.require_steady:
        checks.append(steady_check(result))

    floor = g.min_output_tps_per_gpu.get(target)
    got = thr.output_tps_per_gpu
    if floor is not None:
        checks.append(_check("throughput", got is not None and got >= floor,
                             f"output throughput {_tps(got)} tok/s per GPU at or above the floor {_tps(floor)}",
                             f"output throughput {_tps(got)} tok/s per GPU (over {thr.gpus} GPUs) is below "
                             f"the floor {_tps(floor)} (profile.gates.min_output_tps_per_gpu[{target}])"))

    if g.slo is not None:
        checks.append(slo_check(result, g.slo))

    base = (baseline or {}).get("points", {}).get(case)
    if base is not None:
        tol = g.baseline_tolerance
        floor_b = base["output_tps_per_gpu"] * (1 - tol)
        note = "" if base["recipe_fingerprint"] == result.identity.recipe_fingerprint else \
            " (the baseline was measured with a different recipe fingerprint)"
        checks.append(_check("baseline", got is not None and got >= floor_b,
                             f"output {_tps(got)} tok/s per GPU within {_pct(tol)} of the baseline "
                             f"{_tps(base['output_tps_per_gpu'])} (run {base['run_id']}){note}",
                             f"regression: output {_tps(got)} tok/s per GPU < baseline "
                             f"{_tps(base['output_tps_per_gpu'])} x (1 - {_pct(tol)}) = {_tps(floor_b)} "
                             f"(run {base['run_id']}; profile.gates.baseline_tolerance){note}"))

    checks.append(client_bound(conc, g, run.generator))
    if run.ready_workers is not None and run.expected_workers and run.ready_workers < run.expected_workers:
        checks.append(Check(name="workers", ok=False, message=(
            f"{run.ready_workers} of the {run.expected_workers} serving instances ready at the point's start: a "
            "worker was lost since the deployment came up, and the point measured fewer than its layout (its log "
            "is in the profile's logs folder)")))
    if (wanted := g.wanted_bound(target)) is not None:
        checks.append(bound_check(result, wanted))
    if against is not None:        # (run ids, servebench.history.compare.Change of output tok/s per GPU)
        runs, ch = against
        span = interval(ch.low, ch.high)
        measured_change = f"output tok/s per GPU {_tps(ch.b)} against {_tps(ch.a)} in run {runs}, " \
                          f"{number(ch.rel, 'change')}{' ' + span if span else ''} (95% interval, {ch.basis})"
        checks.append(_check("regression", ch.verdict != "worse", f"not worse with confidence: {measured_change}",
                             f"regression with confidence: {measured_change}; --compare-run, "
                             "docs/results.md#results-history-servebench-history-servebench-compare"))
    return Verdict(passed=all(c.ok for c in checks), checks=checks, baseline=baseline_file,
                   judged_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))


COUNTER_TOLERANCE = 0.01


def counters_check(result: PointResult) -> Check | None:
    """The server's prompt tokens by where their KV came from (computed, GPU prefix cache, CPU tier: vLLM's
    prompt_tokens_by_source) add up to its prompt tokens over the window, within 1% (#33). They do exactly on every
    recorded point; a server whose counters do not cannot say what share the CPU tier served. None where the server
    has no per-source counter (older vLLM) or no counters were read."""
    s = result.server
    if s is None:
        return None
    parts = (s.prompt_tokens_local_compute, s.prompt_tokens_local_cache_hit, s.prompt_tokens_external)
    total = sum(parts)
    if total == 0:
        return None
    off = abs(total - s.prompt_tokens) / max(s.prompt_tokens, 1.0)
    said = (f"prompt tokens by source (computed {_count(parts[0])} + GPU prefix cache {_count(parts[1])} + CPU tier "
            f"{_count(parts[2])} = {_count(total)}) against the server's prompt tokens {_count(s.prompt_tokens)}")
    return _check("counters", off <= COUNTER_TOLERANCE, f"{said}: they add up",
                  f"{said}: off by {number(off, 'share')} (> {number(COUNTER_TOLERANCE, 'share')}): the shares of "
                  "where the window's KV came from do not describe it (a counter reset, or another server's "
                  "counters in the scrape)")


def slo_check(result: PointResult, tier: str) -> Check:
    """profile.gates.slo: the tier's attainment shown at or above its target with 95% confidence (the interval's
    lower bound); shown below it (the upper bound) fails; an interval across the target is unresolved and fails
    too, saying so: a pass means the evidence says met."""
    t = next((x for x in result.slo if x.tier == tier), None)
    if t is None or t.verdict is None:
        why = "no profiled request" if t is not None else "the result holds no such tier (made before it was defined)"
        return Check(name="slo", ok=False, message=f"SLO tier {tier} not judged: {why} (profile.gates.slo)")
    said = describe(t)
    if t.verdict == "met":
        return Check(name="slo", ok=True, message=f"SLO met: {said}")
    if t.verdict == "missed":
        return Check(name="slo", ok=False, message=f"SLO missed: {said}: even its upper bound is below the target "
                     "(profile.gates.slo)")
    return Check(name="slo", ok=False, message=f"SLO unresolved: {said}: the interval spans the target, so this "
                 "run cannot say whether the tier is met (a longer profile.load.duration_s narrows it; "
                 "profile.gates.slo)")


def reuse_check(result: PointResult) -> Check | None:
    """The server reused about what the trace allows wherever its cache should hold the live sessions
    (servebench.results.reuse); where it cannot hold them the gap is the cache's size, said and not failed."""
    r = result.reuse
    if r is None or r.gap is None:
        return None
    said = (f"the server served {_pct(r.measured_share)} of the prompt tokens from its caches; the trace allows "
            f"{_pct(r.allowed_share)} (block size {r.block_size})")
    held = (f"its caches hold {number(r.cache_tokens, 'count')} tokens and the live sessions' prefixes need "
            f"~{number(r.working_set_tokens, 'count')}")
    sent = result.requests.completed
    if r.warm and r.trace_requests and sent and sent > r.trace_requests:
        return _check("reuse", False, said, f"{said}: the window sent {_count(sent)} requests from a trace of "
                      f"{_count(r.trace_requests)}, so {result.run.generator} replayed the trace and its second pass "
                      "hit what the first cached; TTFT and throughput measure a cache that no cold start has. Give the "
                      "point a trace longer than its window (profile.load.trace.sessions_per_concurrency, or "
                      "profile.load.dataset)")
    if r.warm:
        return _check("reuse", False, said, f"{said}: more than the window's own requests allow (by over {WARM:.0%} "
                      "of the prompt tokens), so its cache was warm at the window's start: hits on prefixes an earlier "
                      "request cached (another point on this server replaying the same prompts, a trace without "
                      "servebench's keyspace marker); TTFT and throughput measure a cache that no cold start has. "
                      "Start the point on a fresh server, or give every point's prompts a prefix of its own")
    if not r.should_hold:
        return Check(name="reuse", ok=True, message=f"{said}; {held}, so the cache cannot hold them all")
    done, least = result.requests.completed or 0, REUSE_REQUESTS * result.identity.concurrency
    if done < least:
        return Check(name="reuse", ok=True, message=f"{said}; too few requests to judge it ({_count(done)} < "
                     f"{least}: a short window holds mostly sessions' first turns)")
    far = r.gap > REUSE_GAP and r.measured_share < REUSE_LOW * r.allowed_share
    return _check("reuse", not far, f"{said}; {held}", (
        f"{said}, and {held}: the bytes the server saw were not the trace's from turn to turn (a client that "
        "re-renders or stamps a turn's history), or prefix caching is off (enable-prefix-caching)"))


def own_server(result: PointResult, tolerance: float) -> Check:
    """The point measured its own server: the output tokens its load generator received are the server's own
    counters' within ``tolerance`` (profile.gates.token_ratio_tolerance). With the server's own token counts (AIPerf's
    --use-server-token-count) both count the same tokens; a server that counted none of them answered someone else
    (another session's server on the same port), and a ratio of 0.5 is one server shared by two clients."""
    ratio, gen = result.output_token_ratio, result.run.generator
    if not result.requests.successful:
        return Check(name="own_server", ok=True, message="no successful request to account for")
    if result.server is None:
        return Check(name="own_server", ok=False, message=(
            "the server's counters could not be read around the point: nothing shows that its own server answered "
            f"{gen}'s requests (docs/clusters.md#ports-addresses-and-whose-server-a-point-measured)"))
    if ratio is None and (result.server.generation_tokens or 0) > 0:
        return Check(name="own_server", ok=True, message=(
            f"not cross-checked: {gen} reported no output tokens per request (the server counted "
            f"{_count(result.server.generation_tokens)}); where the nodes are this machine, the process answering was "
            "checked before the load"))
    if ratio is None:
        return Check(name="own_server", ok=False, message=(
            f"the server counted no output tokens during the point while {gen} received "
            f"{_count(result.requests.successful)} successful requests: another server answered them"))
    said = f"{gen}'s output tokens are {number(ratio, 'ratio')} the server's own count"
    return _check("own_server", abs(ratio - 1) <= tolerance, f"{said} (1 within {_pct(tolerance)})",
                  f"{said}, beyond 1 ± {_pct(tolerance)}: " + (
                      "the server generated tokens no request of this point received (another client on the same "
                      "server)" if ratio < 1 else "the client counted tokens the server never generated") +
                  " (profile.gates.token_ratio_tolerance)")


def steady_check(result: PointResult) -> Check:
    """profile.gates.require_steady: the throughput became stationary within the run (Heidelberger-Welch)."""
    st = result.steady
    if st is None or st.stationary is None:
        why = "no series to judge" if st is None else f"{st.batches} batch means after the warm-up: too few to judge"
        return Check(name="steady", ok=False, message=f"not shown steady: {why} (profile.gates.require_steady)")
    said = (f"after a warm-up of {number(st.truncated_s, 's')} s, {st.batches} batch means, Heidelberger-Welch "
            f"p={st.p_value:.3f}, drift {number(st.drift_per_min_rel, 'change')} per minute")
    return _check("steady", st.stationary, f"steady: stationary {said}",
                  f"not steady: the throughput still drifts {said} (profile.gates.require_steady; a longer "
                  "duration_s, or the server's own drift)")


def bound_check(result: PointResult, wanted: str) -> Check:
    """``gates.bound``: the point was bound by what the profile says it measures (servebench.results.bound)."""
    got = result.bound
    if got is None:
        return Check(name="bound", ok=False, message=f"no bound judged (a result without a series): profile.gates."
                     f"bound wants {wanted}")
    if got.bound == wanted:
        return Check(name="bound", ok=True, message=f"{wanted}-bound as profile.gates.bound wants: {got.reason}")
    return Check(name="bound", ok=False, message=f"{got.bound}-bound, not {wanted}-bound (profile.gates.bound): "
                 f"{got.reason}")


def client_bound(conc, g, generator: str = "the load generator") -> Check:
    """Was the load generator, not the server, the limit? The client's own evidence decides: its credit-to-start
    latency (how late it sent requests after their schedule). Effective concurrency is reported against what the
    trace allows (think time between turns bounds it however fast the server is), and is the fallback evidence
    for results without the latency."""
    issue = (conc.issue_latency_ms.p99 if conc.issue_latency_ms else None)
    allowed = f"; the trace allows {number(conc.trace_allowed, 'conc')} in flight" if conc.trace_allowed else ""
    where = f"effective concurrency {number(conc.effective_avg, 'conc')} of target {conc.target}{allowed}"
    if issue is not None:
        ok = not client_late(conc, g)
        said = f"{generator} sent requests up to {number(issue, 'ms')} ms (p99) after their schedule"
        passed = f"not client-bound: {said} (<= {g.max_issue_latency_ms:g} ms); {where}"
        message = (f"client-bound: {said} (> {g.max_issue_latency_ms:g} ms, profile.gates.max_issue_latency_ms); "
                   f"{where}")
    else:
        ratio = conc.ratio_of_allowed if conc.ratio_of_allowed is not None else conc.ratio
        ok = ratio is not None and ratio >= g.min_concurrency_ratio
        of = "what the trace allows" if conc.ratio_of_allowed else "target"
        passed = f"not client-bound: {where} ({_pct(ratio)} of {of} >= {_pct(g.min_concurrency_ratio)})"
        message = (f"client-bound: {where} ({_pct(ratio)} of {of} < {_pct(g.min_concurrency_ratio)}) and no issue "
                   f"latency from {generator} to say otherwise")
    if ok:
        return Check(name="concurrency", ok=True, message=passed)
    if g.allow_client_bound:
        return Check(name="concurrency", ok=True, message=message + " (reported, not failed: "
                     "profile.gates.allow_client_bound)")
    return Check(name="concurrency", ok=False,
                 message=message + " (set profile.gates.allow_client_bound to report it without failing)")


def _pct(x: float | None) -> str:
    return number(x, "share", missing="n/a")


def _tps(x: float | None) -> str:
    return number(x, "tok/s", missing="n/a")


def _count(x: float | None) -> str:
    return number(x, "count", missing="n/a")
