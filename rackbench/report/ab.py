"""The offload A/B as a verdict: per concurrency both arms measured, the offload arm's change against the base arm
in output tok/s per GPU and TTFT p50 / p99, each with a 95% interval and a verdict (better, worse, within noise),
and the lowest concurrency from which the offload is better with confidence at every higher one.

The intervals are rackbench.history.compare's within-run bootstrap of each arm's own requests: throughput
resampled by 5 s slices of its window, TTFT by request (2,000 draws, fixed seed). It covers which requests landed in
each window, not the machine's run-to-run noise: `rackbench compare` with repeated runs in the history gives the
run-to-run interval; this table says which it used in its basis column.
"""

from __future__ import annotations

from pathlib import Path

from rackbench.core.format import number
from rackbench.history.compare import Change, compare_point
from rackbench.history.store import requests_of
from rackbench.report.offload import Pair
from rackbench.results import metrics as registry
from rackbench.results.model import PointResult

GAINS = ("output_tps_per_gpu", "ttft_p50_ms", "ttft_p99_ms")


def _side(results_dir: Path, r: PointResult) -> dict:
    requests, _ = requests_of(results_dir, r)
    return {**registry.values(r), "requests": requests, "duration_s": r.throughput.duration_s,
            "gpus": r.throughput.gpus}


def gains(results_dir: Path, points: list[PointResult], pair: Pair) -> dict[int, dict[str, Change]]:
    """Per shared concurrency, the offload arm's change against the base arm in each of GAINS."""
    idx = {(r.identity.profile, r.identity.concurrency): r for r in points}
    out = {}
    for c in pair.shared:
        base, off = _side(results_dir, idx[(pair.base, c)]), _side(results_dir, idx[(pair.offload, c)])
        out[c] = {ch.metric: ch for ch in compare_point(base, off, metrics=GAINS)}
    return out


def pays_from(found: dict[int, dict[str, Change]]) -> int | None:
    """The lowest concurrency from which the offload's throughput per GPU is better with confidence at it and at
    every higher one both arms measured (None: at none)."""
    start = None
    for c in sorted(found, reverse=True):
        if found[c]["output_tps_per_gpu"].verdict != "better":
            break
        start = c
    return start


def summary_line(found: dict[int, dict[str, Change]]) -> str:
    if not found:
        return ""
    start = pays_from(found)
    basis = next(iter(found.values()))["output_tps_per_gpu"].basis
    if start is None:
        return (f"The offload is better with confidence (output tok/s per GPU) at no concurrency from which it stays "
                f"so; intervals: {basis}.")
    return f"**The offload pays from c{start}**: better with confidence at c{start} and every higher concurrency " \
           f"both arms measured (output tok/s per GPU; intervals: {basis})."


def properties(pairs: list[tuple[Pair, dict[int, dict[str, Change]]]]) -> dict[str, str]:
    """The A/B in junit's session-wide properties, per pair (``ab_<offload>_vs_<base>_...``): where the offload
    pays (``pays_from``: ``c<N>`` or ``nowhere``), each shared concurrency's change in each of GAINS with its interval
    and verdict (``c<N>_<metric>``), or why the pair has no verdict (``verdict``)."""
    out = {}
    for pair, found in pairs:
        key = f"ab_{pair.offload}_vs_{pair.base}"
        void = [*(f"the arms differ in {d}" for d in pair.differs), *pair.void]
        if void:
            out[f"{key}_verdict"] = "no verdict: " + "; ".join(void)
            continue
        if not found:
            continue
        start = pays_from(found)
        out[f"{key}_pays_from"] = f"c{start}" if start is not None else "nowhere"
        for c, changes in sorted(found.items()):
            out.update({f"{key}_c{c}_{m}": changes[m].text() for m in GAINS if m in changes})
    return out


def columns(changes: dict[str, Change]) -> list[str]:
    """The change cells of one row: each GAINS metric as ``+12.3% [+1.0%, +20.0%] better``."""
    return [changes[m].text() if m in changes else number(None, "change") for m in GAINS]


def tier_answers(pair: Pair, answers: list[dict]) -> list[str]:
    """#33 item 5: where both arms' profiles ran an SLO search (rackbench.results.search), each tier's answer side
    by side: the highest concurrency meeting it and its bracket per arm, and how far the offload moves it. Lines of
    a markdown table; none when neither arm searched."""
    by = {(a.get("profile"), a.get("tier")): a for a in answers}
    tiers = sorted({t for p, t in by if p in (pair.base, pair.offload)})
    if not tiers:
        return []

    def cell(a: dict | None) -> str:
        if a is None:
            return "not searched"
        last, first = a["bracket"]
        if a["answer"] is None:
            return f"none in its range (first probe missed: c{first})"
        return f"c{a['answer']} [c{last}, {'c' + str(first) if first is not None else 'range top'}]"

    lines = ["| SLO tier | base: highest concurrency meeting it [bracket] | offload: the same | offload moves it |",
             "|---|---|---|---:|"]
    for t in tiers:
        b, o = by.get((pair.base, t)), by.get((pair.offload, t))
        moved = (f"{o['answer'] - b['answer']:+d}" if b and o and b["answer"] is not None and o["answer"] is not None
                 else "—")
        lines.append(f"| {t} | {cell(b)} | {cell(o)} | {moved} |")
    return lines
