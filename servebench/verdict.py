"""Judge one point's result against its profile's gates. Each failed check has its own message."""

from __future__ import annotations

from dataclasses import dataclass

from .recipe import Profile
from .results import validate


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    message: str


def judge(result: dict, profile: Profile, baseline: dict | None = None) -> list[Check]:
    """All checks in order; schema problems stop the rest (the numbers cannot be trusted). With a baseline
    (servebench.baseline), the point must also keep its throughput within the profile's tolerance."""
    problems = validate(result)
    if problems:
        return [Check("schema", False, "result does not match schemas/result.schema.json:\n  " + "\n  ".join(problems))]
    checks = [Check("schema", True, "")]
    g = profile.spec.gates
    req, thr, conc = result["requests"], result["throughput"], result["concurrency"]
    run = result["run"]

    ok = bool(req["successful"])
    why = (f"0 successful requests of {req['completed']:.0f} completed"
           if req["completed"] else "AIPerf completed no request")
    if not run["summary_present"]:
        why += f" and wrote no summary (exit code {run['aiperf_exit_code']}; see {run['artifact_dir']}/logs)"
    checks.append(Check("successful", ok, why))

    rate = req["error_rate"]
    causes = ", ".join(f"{k} {v}" for k, v in req["errors_by_cause"].items()) or "none classified"
    checks.append(Check("error_rate", rate is not None and rate <= g.error_rate,
                        f"error rate {_pct(rate)} ({req['errors']:.0f} of {req['completed'] or 0:.0f} requests; "
                        f"{causes}) exceeds the gate {g.error_rate:.1%} (profile.gates.error_rate)"))
    if run["was_cancelled"]:
        checks.append(Check("live_error_rate", False, f"AIPerf aborted the run: live error rate above "
                            f"{g.live:.1%} (profile.gates.live_error_rate)"))

    floor = g.min_output_tps_per_gpu.get(result["identity"]["concurrency"])
    if floor is not None:
        got = thr["output_tps_per_gpu"]
        checks.append(Check("throughput", got is not None and got >= floor,
                            f"output throughput {_num(got)} tok/s per GPU (over {thr['gpus']} GPUs) is below the "
                            f"floor {floor} (profile.gates.min_output_tps_per_gpu[{result['identity']['concurrency']}])"))

    base = (baseline or {}).get("points", {}).get(result["identity"]["case_id"])
    if base is not None:
        tol = g.baseline_tolerance
        floor_b = base["output_tps_per_gpu"] * (1 - tol)
        got = thr["output_tps_per_gpu"]
        note = "" if base["recipe_fingerprint"] == result["identity"]["recipe_fingerprint"] else \
            " (the baseline was measured with a different recipe fingerprint)"
        checks.append(Check("baseline", got is not None and got >= floor_b,
                            f"regression: output {_num(got)} tok/s per GPU < baseline {base['output_tps_per_gpu']:.1f} x "
                            f"(1 - {tol:.0%}) = {floor_b:.1f} (run {base['run_id']}; "
                            f"profile.gates.baseline_tolerance){note}"))

    ratio = conc["ratio"]
    bound = ratio is None or ratio < g.min_concurrency_ratio
    checks.append(Check("concurrency", not bound or g.allow_client_bound,
                        f"client-bound: effective concurrency {_num(conc['effective_avg'])} of target {conc['target']} "
                        f"({_pct(ratio)} < {g.min_concurrency_ratio:.0%}); the load generator, not the server, "
                        "limited this point (set profile.gates.allow_client_bound to report it without failing)"))
    return checks


def client_bound(result: dict, profile: Profile) -> bool:
    ratio = result["concurrency"]["ratio"]
    return ratio is None or ratio < profile.spec.gates.min_concurrency_ratio


def failures(checks: list[Check]) -> list[str]:
    return [c.message for c in checks if not c.ok]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}"
