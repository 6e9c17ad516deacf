"""What a session held, in GPU-hours (pure: no I/O): each allocation's time x its GPUs, split by what the time went
to, from the run manifest (rackbench.results.manifest) and the points measured in it.

Per allocation: **queue** (submitted to running), **model load** (running to every server ready: preflight, infra,
weights, engine start), per point **idle wait** (the engines drained before it), **warm-up** (the generator's start,
its warm-up requests, the grace after its duration), **measuring** (the generator's measured window), **between
points** (what is left of the held time: scrapes, result writing) and **release** (the last point's end to the nodes
given back). With adaptive run length, **saved** is what the fixed plan (each point's whole ``duration_s``) would
have measured beyond what was measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from rackbench.catalog.points import parse_allocation_key
from rackbench.results.model import PointResult

PHASES = ("queue", "model_load", "idle_wait", "warmup", "measuring", "between_points", "release")
LABELS = {"queue": "queue", "model_load": "model load", "idle_wait": "idle wait", "warmup": "warm-up",
          "measuring": "measuring", "between_points": "between points", "release": "release"}


@dataclass
class Held:
    """One allocation (or a sum of them): seconds per phase, GPUs, GPU-seconds saved by adaptive stopping."""

    name: str
    gpus: int = 0
    seconds: dict[str, float] = field(default_factory=lambda: {p: 0.0 for p in PHASES})
    gpu_seconds: dict[str, float] = field(default_factory=lambda: {p: 0.0 for p in PHASES})
    saved_gpu_s: float = 0.0
    points: int = 0

    @property
    def gpu_hours(self) -> float:
        return sum(self.gpu_seconds.values()) / 3600

    def hours(self, phase: str) -> float:
        return self.gpu_seconds[phase] / 3600

    def add(self, other: "Held") -> None:
        for p in PHASES:
            self.seconds[p] += other.seconds[p]
            self.gpu_seconds[p] += other.gpu_seconds[p]
        self.saved_gpu_s += other.saved_gpu_s
        self.points += other.points


def _ts(iso: str | None) -> float | None:
    try:
        return datetime.fromisoformat(iso).timestamp() if iso else None
    except ValueError:
        return None


def allocation(entry: dict, ready_at: float | None, points: list[PointResult], gpus: int) -> Held:
    """One allocation's held time by phase (``ready_at``: when its servers were ready; ``points``: its results)."""
    held = Held(entry.get("profile", "?"), gpus, points=len(points))
    start, end = entry.get("allocated_at"), entry.get("released_at")
    if start is None:
        return held
    requested = entry.get("requested_at") or start
    end = end if end is not None else max([start, *(_ts(r.identity.finished_at) or start for r in points)])
    s = held.seconds
    s["queue"] = max(0.0, start - requested)
    ready = ready_at if ready_at is not None else start
    s["model_load"] = max(0.0, min(ready, end) - start)
    last = ready
    for r in points:
        t0, t1 = _ts(r.identity.started_at), _ts(r.identity.finished_at)
        if t0 is None or t1 is None:
            continue
        wall = max(0.0, t1 - t0)
        idle = min(wall, r.run.idle_wait_s or 0.0)
        measuring = min(wall - idle, r.throughput.duration_s or 0.0)
        s["idle_wait"] += idle
        s["measuring"] += measuring
        s["warmup"] += wall - idle - measuring
        last = max(last, t1)
        if r.run.mode == "adaptive" and r.run.stopped_at_s is not None:
            planned = points_duration(r)
            held.saved_gpu_s += max(0.0, planned - measuring) * gpus
    s["release"] = max(0.0, end - last) if points else 0.0
    used = sum(v for k, v in s.items() if k != "between_points")
    s["between_points"] = max(0.0, (end - requested) - used)
    for p in PHASES:
        held.gpu_seconds[p] = s[p] * gpus
    return held


def points_duration(r: PointResult) -> float:
    """The duration the fixed plan gives a point (its profile's duration_s, as the result recorded it)."""
    return float(r.run.planned_s if r.run.planned_s is not None else r.throughput.duration_s or 0.0)


def session(manifest: dict, results: list[PointResult], gpus_of: dict[str, int]) -> tuple[list[Held], Held]:
    """Every allocation of a session's manifest with its points (by profile and time), and their sum."""
    ready = {}
    for s in manifest.get("server_starts", []):
        ready.setdefault(s.get("profile"), []).append(s.get("started_at"))
    out, total = [], Held("sweep")
    for entry in manifest.get("allocations", []):
        key = entry.get("profile", "?")
        profile, _ = parse_allocation_key(key)
        lo, hi = entry.get("allocated_at") or 0, entry.get("released_at") or float("inf")
        mine = [r for r in results if r.identity.profile == profile and lo <= (_ts(r.identity.started_at) or 0) <= hi]
        at = next((t for t in sorted(ready.get(key, [])) if t is not None and lo <= t <= hi), None)
        held = allocation(entry, at, mine, gpus_of.get(profile, 0))
        held.name = key
        out.append(held)
        total.gpus = max(total.gpus, held.gpus)
        total.add(held)
    return out, total
