"""Whether the point meets what its profile promises and what it is held to: a throughput floor, an SLO tier, a
baseline, a run it is compared against."""

from __future__ import annotations

from rackbench.core.format import interval, number
from rackbench.results.checks.base import Judged, made, pct, tps
from rackbench.results.model import Check
from rackbench.results.slo import describe


def throughput(p: Judged) -> Check | None:
    """Output tok/s per GPU at or above the profile's floor for this concurrency
    (profile.gates.min_output_tps_per_gpu)."""
    thr, target = p.result.throughput, p.result.identity.concurrency
    floor = p.gates.min_output_tps_per_gpu.get(target)
    if floor is None:
        return None
    got = thr.output_tps_per_gpu
    return made("throughput", got is not None and got >= floor,
                f"output throughput {tps(got)} tok/s per GPU at or above the floor {tps(floor)}",
                f"output throughput {tps(got)} tok/s per GPU (over {thr.gpus} GPUs) is below "
                f"the floor {tps(floor)} (profile.gates.min_output_tps_per_gpu[{target}])")


def slo(p: Judged) -> Check | None:
    """profile.gates.slo: the tier's attainment shown at or above its target with 95% confidence (the interval's
    lower bound); shown below it (the upper bound) fails; an interval across the target is unresolved and fails
    too, saying so: a pass means the evidence says met."""
    result, tier = p.result, p.gates.slo
    if tier is None:
        return None
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


def baseline(p: Judged) -> Check | None:
    """With --baseline: output tok/s per GPU within profile.gates.baseline_tolerance of the accepted run's."""
    result = p.result
    base = (p.baseline or {}).get("points", {}).get(result.identity.case_id)
    if base is None:
        return None
    tol, got = p.gates.baseline_tolerance, result.throughput.output_tps_per_gpu
    floor = base["output_tps_per_gpu"] * (1 - tol)
    note = "" if base["recipe_fingerprint"] == result.identity.recipe_fingerprint else \
        " (the baseline was measured with a different recipe fingerprint)"
    return made("baseline", got is not None and got >= floor,
                f"output {tps(got)} tok/s per GPU within {pct(tol)} of the baseline "
                f"{tps(base['output_tps_per_gpu'])} (run {base['run_id']}){note}",
                f"regression: output {tps(got)} tok/s per GPU < baseline "
                f"{tps(base['output_tps_per_gpu'])} x (1 - {pct(tol)}) = {tps(floor)} "
                f"(run {base['run_id']}; profile.gates.baseline_tolerance){note}")


def regression(p: Judged) -> Check | None:
    """With --compare-run: output tok/s per GPU not worse, with confidence, than the runs it is compared against
    (the change's 95% interval, rackbench.history.compare)."""
    if p.against is None:
        return None
    runs, ch = p.against
    span = interval(ch.low, ch.high)
    measured_change = f"output tok/s per GPU {tps(ch.b)} against {tps(ch.a)} in run {runs}, " \
                      f"{number(ch.rel, 'change')}{' ' + span if span else ''} (95% interval, {ch.basis})"
    return made("regression", ch.verdict != "worse", f"not worse with confidence: {measured_change}",
                f"regression with confidence: {measured_change}; --compare-run, "
                "docs/results.md#results-history-rackbench-history-rackbench-compare")
