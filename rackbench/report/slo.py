"""report.md's service-level section: every tier of every point (rackbench.results.slo), with its interval and
verdict, and the goodput."""

from __future__ import annotations

from rackbench.core.format import interval, number
from rackbench.results.model import PointResult
from rackbench.results.slo import limits_text


def section(points: list[PointResult]) -> str:
    rows = [(r, t) for r in sorted(points, key=lambda r: (r.identity.profile, r.identity.concurrency)) for t in r.slo]
    if not rows:
        return ""
    lines = ["## Service-level tiers", "",
             "A request is good when every limit holds (a failed or unfinished one is not); the interval is "
             "Wilson's on the effective number of requests: consecutive requests are correlated, so the smaller "
             "of the AR(1) size (by their lag-1 autocorrelation) and the size their batch means in time imply "
             "(swings over minutes), with Student's t on the batch means; 95%, or for a point decided by "
             "`--run-length decide` the share of 95% each of its planned looks is left (docs/statistics.md). "
             "`gates.slo` fails a point whose tier is missed or unresolved.", "",
             "| case | tier | limits | target | good / requests | attainment [interval, confidence] | effective n | "
             "batches | "
             "verdict | goodput req/s | good output tok/s per GPU |",
             "|---|---|---|---:|---:|---|---:|---:|---|---:|---:|"]
    for r, t in rows:
        span = interval(t.low, t.high, "share")
        lines.append(f"| {r.identity.case_id} | {t.tier}{' (gate)' if t.gated else ''} | {limits_text(t.limits)} | "
                     f"{number(t.target, 'share')} | {t.good:,} / {t.requests:,} | "
                     f"{number(t.attainment, 'share')} {span}, {100 * t.confidence:.3g}% | "
                     f"{number(t.effective_n, 'count')} | "
                     f"{number(t.batches, 'count')} | {t.verdict or 'n/a'} | {number(t.goodput_rps, 'rate')} | "
                     f"{number(t.good_output_tps_per_gpu, 'tok/s')} |")
    return "\n".join(lines) + "\n"


def searches_section(answers: list[dict], plot_names: dict[str, str], held: dict | None = None) -> str:
    """Each search's answer, bracket and probes (``answers``: the stored ``searches/<profile>.json``); with ``held``
    (profile -> rackbench.results.accounting.Held of its allocations, from the session's manifest) what the
    search's allocation held in all, beside what its probes measured."""
    if not answers:
        return ""
    lines = ["## Searches", ""]
    for a in answers:
        last, first = a["bracket"]
        notes = [f"Cliff: {a['cliff']}."] if a.get("cliff") else []
        if a.get("gpu_hours_measured") is not None:
            energy = a.get("energy_j")
            notes.append(f"It measured {number(a['gpu_hours_measured'], 'rate')} GPU-hours" +
                         (f" and {number(energy / 1000, 'rate')} kJ of GPU energy." if energy is not None else "."))
        at = a.get("at_answer")
        if at and at.get("good_output_tps_per_gpu") is not None:
            rng = at.get("good_output_tps_per_gpu_interval") or [None, None]
            said = [f"At c{at['concurrency']} it serves {number(at['good_output_tps_per_gpu'], 'rate')} good output "
                    f"tok/s per GPU {interval(rng[0], rng[1], 'rate')}"]
            if at.get("joules_per_output_token") is not None:
                said.append(f"{number(at['joules_per_output_token'], 'rate')} J per output token")
            if at.get("cost_per_m_output_tokens") is not None:
                money = " ".join(filter(None, [number(at["cost_per_m_output_tokens"], "rate"), at.get("currency")]))
                said.append(f"{money} per million output tokens")
            notes.append(", ".join(said) + " (energy and cost without an interval: the rate's is not claimed).")
        h = (held or {}).get(a["profile"])
        if h is not None:
            notes.append(f"Its allocation held {number(h.gpu_hours, 'rate')} GPU-hours in all (queue, model load, "
                         f"warm-up and idle waits included), {number(h.hours('measuring'), 'rate')} of them measuring.")
        if a["profile"] in plot_names:
            notes.append(f"Plot: `{plot_names[a['profile']]}`.")
        found = "none" if last is None else f"c{last}"
        if a.get("next") is not None:
            found = f"{'none' if last is None else f'at least c{last}'} so far (the search did not finish)"
        rel = a.get("relative")
        limits = "limits not set yet" if not a.get("limits") else limits_text(a["limits"]) + (
            f": {' and '.join(f'{k.upper()} {v:g}x' for k, v in rel['multiples'].items())} the medians of "
            f"{rel['case_id']} (TTFT {number(rel['ttft_p50_ms'], 'ms')} ms, TPOT {number(rel['tpot_p50_ms'], 'ms')} "
            "ms), measured first" + "".join(f"; dropped: {d}" for d in rel.get("dropped") or []) if rel else "")
        lines += [" ".join([f"**{a['profile']}**: the highest concurrency meeting tier {a['tier']} "
                            f"({limits}, {number(a['target'], 'share')} of requests) is "
                            f"**{found}**; bracket [{last}, {first}]; {a['why']}.",
                            *notes]), "",
                  "| probe | concurrency | attainment [interval] | verdict |", "|---|---:|---|---|"]
        for i, p in enumerate(a["probes"], 1):
            lines.append(f"| {i} | {p['concurrency']} | {number(p['attainment'], 'share')} "
                         f"{interval(p['low'], p['high'], 'share')} | {p['verdict'] or 'n/a'} |")
        lines.append("")
    return "\n".join(lines)
