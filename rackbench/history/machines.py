"""What differed between the machines of two groups of runs (pure: no I/O): their records (each host's CPU, memory,
GPUs with driver, CUDA, power limit and maximum clocks, GPU processes found before the servers started, a site's
fields), the GPU telemetry sampled during their points (clocks, power, temperature, utilisation), the host record
(each process's CPU, the hosts' load and clock) and what bound the points. ``rackbench compare`` prints these lines
beside the change, so a slowdown can be told from a power cap, another tenant or a busy host.
"""

from __future__ import annotations

import statistics

from rackbench.core.format import number
from rackbench.results.model import PointResult

# telemetry quantities compared (field, label, unit, which statistic over the run) and the relative gap that counts
SAMPLED = (("sm_clock_mhz", "SM clock during the points (mean)", "MHz", "mean"),
           ("mem_clock_mhz", "memory clock during the points (mean)", "MHz", "mean"),
           ("power_w", "GPU power during the points (mean)", "W", "mean"),
           ("temperature_c", "GPU temperature during the points (max)", "C", "max"),
           ("utilization_pct", "GPU utilisation during the points (mean)", "pct", "mean"))
GAP = 0.03
# host quantities (rackbench.server.host): a process's CPU differs when it moved by this share and this many cores
CORES_GAP, CORES_MIN = 0.1, 0.05
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


def host_sampled(results: list[PointResult]) -> dict[str, tuple[float, str]]:
    """The hosts during a group's points: load average and CPU clock (means), and each process's CPU seconds per
    second by its name and role (the processes of one name summed per point, then the mean over the points), as
    label -> (value, unit)."""
    out: dict[str, list[float]] = {}
    units: dict[str, str] = {}
    for r in results:
        if r.host is None:
            continue
        for label, unit, values in (("host load average during the points (mean)", "load",
                                     [n.get("load_mean") for n in r.host.nodes]),
                                    ("CPU clock during the points (mean)", "MHz",
                                     [n.get("cpu_mhz_mean") for n in r.host.nodes])):
            got = [v for v in values if v is not None]
            if got:
                out.setdefault(label, []).append(statistics.fmean(got))
                units[label] = unit
        per: dict[str, float] = {}
        for p in r.host.processes:
            label = f"CPU of {p.name} ({p.role}) during the points"
            per[label] = per.get(label, 0.0) + p.cores_mean
        for label, cores in per.items():
            out.setdefault(label, []).append(cores)
            units[label] = "cores"
    return {label: (statistics.fmean(v), units[label]) for label, v in out.items()}


def _host_lines(a: list[PointResult], b: list[PointResult]) -> list[str]:
    lines = []
    bounds = [sorted({r.bound.bound for r in side if r.bound}) for side in (a, b)]
    if all(bounds) and bounds[0] != bounds[1]:
        lines.append(f"what bound the points: {', '.join(bounds[0])} -> {', '.join(bounds[1])}")
    ha, hb = host_sampled(a), host_sampled(b)
    for label in [*ha, *(k for k in hb if k not in ha)]:
        (x, ua), (y, ub) = ha.get(label, (None, "")), hb.get(label, (None, ""))
        unit = ua or ub
        if x is None or y is None:
            lines.append(f"{label}: {number(x, unit)} -> {number(y, unit)}")
            continue
        gap = abs(y - x)
        if (unit == "cores" and gap > max(CORES_MIN, CORES_GAP * abs(x))) or (unit != "cores" and gap > GAP * abs(x)):
            lines.append(f"{label}: {number(x, unit)} -> {number(y, unit)}")
    return lines


def differences(a: list[PointResult], b: list[PointResult]) -> list[str]:
    """One line per machine fact or sampled quantity that differs from the runs ``a`` to the runs ``b``; the one
    line UNRECORDED where no result of either side has a record or telemetry (not "nothing differs")."""
    if not any(r.machine or r.telemetry or r.host for r in [*a, *b]):
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
    return lines + _host_lines(a, b)


def _merged(results: list[PointResult]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for r in results:
        for key, value in facts(r).items():
            out.setdefault(key, set()).add(value)
    return out
