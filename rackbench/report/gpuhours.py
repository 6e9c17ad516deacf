"""GPU-hours of a session, as the reports show them (rackbench.results.accounting computes them): one table per
results folder, from its manifest.json and its points."""

from __future__ import annotations

from pathlib import Path

from rackbench.catalog.points import parse_allocation_key
from rackbench.core.files import read_json
from rackbench.core.format import number
from rackbench.core.results_folder import ResultsFolder
from rackbench.results.accounting import LABELS, PHASES, Held, session
from rackbench.results.model import PointResult


def of_folder(results_dir: Path, points: list[PointResult]) -> tuple[list[Held], Held] | None:
    """The accounting of a results folder's session (None without a manifest)."""
    manifest = ResultsFolder.at(results_dir).manifest
    try:
        data = read_json(manifest)
    except ValueError:
        return None
    gpus = {r.identity.profile: r.throughput.gpus for r in points}
    return session(data, points, gpus)


def by_profile(allocations: list[Held]) -> dict[str, Held]:
    """What each profile's allocations held, summed (a profile allocated again, ``name#2``, counts once)."""
    out: dict[str, Held] = {}
    for h in allocations:
        name, _ = parse_allocation_key(h.name)
        if name not in out:
            out[name] = Held(name, h.gpus)
        out[name].add(h)
    return out


def _hours(x: float) -> str:
    return number(x, "rate")


def markdown(allocations: list[Held], total: Held) -> str:
    head = "| allocation | GPUs | GPU-hours | " + " | ".join(LABELS[p] for p in PHASES) + " | saved by adaptive stop |"
    lines = ["## GPU-hours held", "", "Allocation time x GPUs, by what it went to (docs/results.md#gpu-hours).", "",
             head,
             "|---|---:|---:|" + "---:|" * (len(PHASES) + 1)]
    for h in [*allocations, total]:
        name = "**all**" if h is total else h.name
        lines.append(f"| {name} | {h.gpus if h is not total else ''} | {_hours(h.gpu_hours)} | "
                     + " | ".join(_hours(h.hours(p)) for p in PHASES) + f" | {_hours(h.saved_gpu_s / 3600)} |")
    return "\n".join(lines) + "\n"


def line(total: Held) -> str:
    """The terminal's one line."""
    parts = ", ".join(f"{LABELS[p]} {_hours(total.hours(p))}" for p in PHASES if total.gpu_seconds[p] > 0)
    saved = f"; adaptive stopping saved {_hours(total.saved_gpu_s / 3600)}" if total.saved_gpu_s else ""
    return f"GPU-hours held: {_hours(total.gpu_hours)} ({parts}){saved}"


def properties(total: Held) -> dict[str, float]:
    """What junit carries for the whole session."""
    return {"gpu_hours": round(total.gpu_hours, 4), "gpu_hours_measuring": round(total.hours("measuring"), 4),
            "gpu_hours_saved": round(total.saved_gpu_s / 3600, 4)}
