"""What differed between the machines of two groups of runs (pure: no I/O): their records (each host's CPU, memory,
GPUs with driver, CUDA, power limit and maximum clocks, GPU processes found before the servers started, a site's
fields) and the GPU telemetry sampled during their points (clocks, power, temperature, utilisation). ``servebench
compare`` prints these lines beside the change, so a slowdown can be told from a power cap or another tenant.
"""

from __future__ import annotations

import statistics

from servebench.core.format import number
from servebench.results.model import PointResult

# telemetry quantities compared (field, label, unit, which statistic over the run) and the relative gap that counts
SAMPLED = (("sm_clock_mhz", "SM clock during the points (mean)", "MHz", "mean"),
           ("mem_clock_mhz", "memory clock during the points (mean)", "MHz", "mean"),
           ("power_w", "GPU power during the points (mean)", "W", "mean"),
           ("temperature_c", "GPU temperature during the points (max)", "C", "max"),
           ("utilization_pct", "GPU utilisation during the points (mean)", "pct", "mean"))
GAP = 0.03
UNRECORDED = "neither side recorded its machine (results of schema 3 or older): nothing to compare"


def facts(r: PointResult) -> dict[str, str]:
    """One result's machine as flat facts (what a reader compares)."""
    m = r.machine
    if m is None:
        return {"machine record": "none (a result of schema 3 or older, or a run that recorded none)"}
    out: dict[str, str] = {}
    many = len(m.nodes) > 1
    for n in m.nodes:
        at = f"{n.node} " if many else ""
        out[f"{at}host"] = str(n.host)
        out[f"{at}CPU"] = f"{n.cpu}, {n.cores_usable} of {n.cores} cores usable"
        out[f"{at}memory"] = number(n.memory_gib, "GiB")
        out[f"{at}kernel"] = str(n.kernel)
        for g in n.gpus:
            gpu = f"{at}GPU{g.index}"
            out[f"{gpu} model"] = g.name
            out[f"{gpu} UUID"] = g.uuid
            out[f"{gpu} driver / CUDA"] = f"{g.driver} / {g.cuda}"
            out[f"{gpu} power limit"] = number(g.power_limit_w, "W")
            out[f"{gpu} max SM clock"] = number(g.max_sm_clock_mhz, "MHz")
        others = [f"{p.name} ({number(p.memory_mib, 'count')} MiB)" for p in n.gpu_processes]
        out[f"{at}GPU processes before the servers"] = ", ".join(others) or "none"
        if n.problems:
            out[f"{at}record problems"] = "; ".join(n.problems)
    for key, value in sorted(m.extra.items()):
        out[f"site: {key}"] = str(value)
    return out


def sampled(results: list[PointResult]) -> dict[str, float]:
    """Each telemetry quantity over every point and GPU of a group (its statistic's mean)."""
    out = {}
    for field, _, _, stat in SAMPLED:
        values = [getattr(getattr(g, field), stat) for r in results if r.telemetry for g in r.telemetry.gpus
                  if getattr(g, field) is not None]
        if values:
            out[field] = statistics.fmean(values)
    return out


def differences(a: list[PointResult], b: list[PointResult]) -> list[str]:
    """One line per machine fact or sampled quantity that differs from the runs ``a`` to the runs ``b``; the one
    line UNRECORDED where no result of either side has a record or telemetry (not "nothing differs")."""
    if not any(r.machine or r.telemetry for r in [*a, *b]):
        return [UNRECORDED] if a or b else []
    fa, fb = _merged(a), _merged(b)
    lines = []
    for key in [*fa, *(k for k in fb if k not in fa)]:
        va, vb = fa.get(key, {"—"}), fb.get(key, {"—"})
        if va != vb:
            lines.append(f"{key}: {' | '.join(sorted(va))} -> {' | '.join(sorted(vb))}")
    sa, sb = sampled(a), sampled(b)
    for field, label, unit, _ in SAMPLED:
        x, y = sa.get(field), sb.get(field)
        if x is None and y is None:
            continue
        if x is None or y is None or (abs(y - x) > GAP * abs(x) if x else y != 0):
            lines.append(f"{label}: {number(x, unit)} -> {number(y, unit)}")
    return lines


def _merged(results: list[PointResult]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for r in results:
        for key, value in facts(r).items():
            out.setdefault(key, set()).add(value)
    return out
