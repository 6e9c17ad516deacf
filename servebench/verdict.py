"""Judge one point's result against its profile's gates (and a baseline). Each failed check has its own message.

The pytest case judges once and stores the :class:`~servebench.result.Verdict` with the point; reports show
that stored verdict and never re-judge.
"""

from __future__ import annotations

from datetime import datetime, timezone

from .profile import Profile
from .result import Check, PointResult, Verdict


def judge(result: PointResult, profile: Profile, baseline: dict | None = None,
          baseline_file: str | None = None, schema_errors: list[str] = (), against: tuple[str, object] | None = None
          ) -> Verdict:
    """All checks in order. ``schema_errors``: how the written file breaks the checked-in JSON Schema (what
    consumers of the file rely on). With a baseline (servebench.baseline), the point must also keep its
    throughput within the profile's tolerance."""
    checks = [Check(name="schema", ok=not schema_errors, message="result file does not match "
                    "schemas/result.schema.json:\n  " + "\n  ".join(schema_errors))]
    g = profile.spec.gates
    req, thr, conc, run = result.requests, result.throughput, result.concurrency, result.run
    case, target = result.identity.case_id, result.identity.concurrency

    why = (f"0 successful requests of {req.completed:.0f} completed" if req.completed
           else "AIPerf completed no request")
    if not run.summary_present:
        why += f" and wrote no summary (exit code {run.aiperf_exit_code}; see {run.artifact_dir}/logs)"
    checks.append(Check(name="successful", ok=bool(req.successful), message=why))

    rate = req.error_rate
    causes = ", ".join(f"{k} {v}" for k, v in req.errors_by_cause.items()) or "none classified"
    checks.append(Check(name="error_rate", ok=rate is not None and rate <= g.error_rate,
                        message=f"error rate {_pct(rate)} ({req.errors or 0:.0f} of {req.completed or 0:.0f} "
                                f"requests; {causes}) exceeds the gate {g.error_rate:.1%} (profile.gates.error_rate)"))
    if run.was_cancelled:
        checks.append(Check(name="live_error_rate", ok=False, message=f"AIPerf aborted the run: live error rate "
                            f"above {g.live:.1%} (profile.gates.live_error_rate)"))

    floor = g.min_output_tps_per_gpu.get(target)
    got = thr.output_tps_per_gpu
    if floor is not None:
        checks.append(Check(name="throughput", ok=got is not None and got >= floor,
                            message=f"output throughput {_num(got)} tok/s per GPU (over {thr.gpus} GPUs) is below "
                                    f"the floor {floor} (profile.gates.min_output_tps_per_gpu[{target}])"))

    base = (baseline or {}).get("points", {}).get(case)
    if base is not None:
        tol = g.baseline_tolerance
        floor_b = base["output_tps_per_gpu"] * (1 - tol)
        note = "" if base["recipe_fingerprint"] == result.identity.recipe_fingerprint else \
            " (the baseline was measured with a different recipe fingerprint)"
        checks.append(Check(name="baseline", ok=got is not None and got >= floor_b,
                            message=f"regression: output {_num(got)} tok/s per GPU < baseline "
                                    f"{base['output_tps_per_gpu']:.1f} x (1 - {tol:.0%}) = {floor_b:.1f} "
                                    f"(run {base['run_id']}; profile.gates.baseline_tolerance){note}"))

    checks.append(client_bound(conc, g))
    if against is not None:        # (run ids, servebench.compare.Change of output tok/s per GPU)
        runs, ch = against
        span = "" if ch.low is None else f" [{ch.low:+.1%}, {ch.high:+.1%}]"
        checks.append(Check(name="regression", ok=ch.verdict != "worse",
                            message=f"regression with confidence: output tok/s per GPU {_num(ch.b)} against "
                                    f"{_num(ch.a)} in run {runs}, {ch.rel:+.1%}{span} (95% interval, {ch.basis}; "
                                    "--compare-run, README: Results history)"))
    return Verdict(passed=all(c.ok for c in checks), checks=checks, baseline=baseline_file,
                   judged_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))


def client_bound(conc, g) -> Check:
    """Was the load generator, not the server, the limit? The client's own evidence decides: AIPerf's credit-to-start
    latency (how late it sent requests after their schedule). Effective concurrency is reported against what the
    trace allows (think time between turns bounds it however fast the server is), and is the fallback evidence
    for results without the latency."""
    issue = (conc.issue_latency_ms.p99 if conc.issue_latency_ms else None)
    allowed = f"; the trace allows {_num(conc.trace_allowed)} in flight" if conc.trace_allowed else ""
    where = f"effective concurrency {_num(conc.effective_avg)} of target {conc.target}{allowed}"
    if issue is not None:
        ok = issue <= g.max_issue_latency_ms
        message = (f"client-bound: AIPerf sent requests up to {issue:.1f} ms (p99) after their schedule "
                   f"(> {g.max_issue_latency_ms:g} ms, profile.gates.max_issue_latency_ms); {where}")
    else:
        ratio = conc.ratio_of_allowed if conc.ratio_of_allowed is not None else conc.ratio
        ok = ratio is not None and ratio >= g.min_concurrency_ratio
        message = (f"client-bound: {where} ({_pct(ratio)} of {'what the trace allows' if conc.ratio_of_allowed else 'target'}"
                   f" < {g.min_concurrency_ratio:.0%}) and no issue latency from AIPerf to say otherwise")
    return Check(name="concurrency", ok=ok or g.allow_client_bound,
                 message=message + " (set profile.gates.allow_client_bound to report it without failing)")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}"
