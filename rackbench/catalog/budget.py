"""How long an allocation is held, against the job's time limit (pure: no I/O).

One allocation holds a profile's points one after another (rackbench.plugin.fixtures), so the job must outlast the
model's load and every point's longest run: the measured duration, the warmup grace, and the margin after which the
load generator is stopped (rackbench.load.measure.GRACE_S). The wait for idle engines between points is not
counted: it is seconds unless a point left requests behind (bounded by ``load.idle_wait_s``). A profile whose points do
not fit is refused before anything is allocated; with ``profile.allocations: fit`` its points are split over as many
allocations as the limit needs, each of them holding consecutive points.

What it assumes: the model load is the checkpoint read at the cluster's ``runtime.model_load_gib_per_s`` by every
node in parallel (each reads its share), plus ``runtime.startup_s`` (engine start, graph capture; alone where the
model declares no checkpoint size or the cluster no load rate, if the cluster file sets it); the first point
also waits for the load generator's dataset configuration (``load.dataset_timeout_s``, the seed's 1800 s). With neither a
load rate nor a start-up time the load is not counted and a note says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rackbench.core.timeouts import (CLIENT_SETUP_S, INTERRUPT_GRACE_S, KILL_WAIT_S, MOUNTS_TIMEOUT_S,
                                      PREFLIGHT_TIMEOUT_S, RELEASE_TIERS, STOP_MARGIN_S)
from rackbench.recipe.profile import Profile

GIB = 2**30


def seconds(limit: str | None) -> float | None:
    """A Slurm time limit (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``) in seconds; None for
    none (or UNLIMITED); ValueError for what Slurm would refuse."""
    if limit is None or str(limit).strip().upper() in ("", "UNLIMITED", "INFINITE"):
        return None
    text = str(limit).strip()
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if not m:
        raise ValueError(f"{limit!r} is not a Slurm time limit (e.g. 12:00:00 or 1-00:00:00)")
    days, a, b, c = m.groups()
    parts = [int(x) for x in (a, b, c) if x is not None]
    if days is not None:                      # D-HH[:MM[:SS]]
        h, mi, s = (parts + [0, 0])[:3]
        return float(int(days) * 86400 + h * 3600 + mi * 60 + s)
    if len(parts) == 1:                       # MM
        return float(parts[0] * 60)
    if len(parts) == 2:                       # MM:SS
        return float(parts[0] * 60 + parts[1])
    return float(parts[0] * 3600 + parts[1] * 60 + parts[2])


def clock(s: float) -> str:
    """Seconds as a Slurm time limit, rounded up to the minute (D-HH:MM:SS past a day)."""
    minutes = -(-int(s) // 60)
    days, rest = divmod(minutes * 60, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:00"
    return f"{days}-{text}" if days else text


def human(s: float) -> str:
    return f"{s / 3600:.1f} h" if s >= 5400 else f"{s / 60:.0f} min"


@dataclass(frozen=True)
class Budget:
    """What one allocation holds: the expected time (``held_s``: the model load as the cluster declares it, each point's
    own worst case) and the bound (``bound_s``: every timeout of the suite's own reached, the readiness wait instead of
    the expected load, preflight, each point's idle wait, the generator's interrupt, the release's graces)."""

    limit_s: float | None
    load_s: float | None         # None: the cluster declares no load rate
    first_point_extra_s: float   # the load generator's dataset configuration, before the first point
    point_s: float               # one point's worst case
    points: int
    ready_timeout_s: float = 0.0     # health_check: max_attempts x interval_seconds
    point_timeouts_s: float = 0.0    # per point beyond point_s: the idle wait and the generator's interrupt grace
    fixed_timeouts_s: float = 0.0    # once: preflight, the mount look, the release by tier

    def bound_s(self, points: int | None = None) -> float:
        n = self.points if points is None else points
        return self.ready_timeout_s + self.fixed_timeouts_s + self.first_point_extra_s + \
            n * (self.point_s + self.point_timeouts_s)

    def held_s(self, points: int | None = None) -> float:
        n = self.points if points is None else points
        return (self.load_s or 0.0) + self.first_point_extra_s + n * self.point_s

    @property
    def fits(self) -> bool:
        return self.limit_s is None or self.held_s() <= self.limit_s

    @property
    def per_allocation(self) -> int:
        """How many points one allocation can hold within the limit (at least one)."""
        if self.limit_s is None:
            return self.points
        room = self.limit_s - (self.load_s or 0.0) - self.first_point_extra_s
        return max(1, int(room // self.point_s)) if self.point_s > 0 else self.points

    def allocations(self) -> list[int]:
        """Points per allocation, in order, when split to fit."""
        n, per = self.points, self.per_allocation
        return [min(per, n - i) for i in range(0, n, per)]

    def describe(self) -> str:
        load = (f"model load ~{human(self.load_s)}" if self.load_s is not None else "model load not counted")
        return (f"{load} + {self.points} point(s) x up to {human(self.point_s)} (duration, warmup grace, "
                f"{STOP_MARGIN_S // 60} min stop margin)" + (f" + {human(self.first_point_extra_s)} dataset "
                                                             "configuration" if self.first_point_extra_s else "")
                + f" = {human(self.held_s())}")

    def describe_bound(self) -> str:
        """The bound, with its parts: what the allocation holds if every wait of the suite runs to its timeout."""
        return (f"at most {human(self.bound_s())} if every timeout is reached (readiness {human(self.ready_timeout_s)}"
                f" + preflight and release {human(self.fixed_timeouts_s)} + {self.points} point(s) x "
                f"{human(self.point_s + self.point_timeouts_s)} with the idle wait, the client's setup and the generator's "
                "interrupt)")


def budget(p: Profile) -> Budget:
    load, rt = p.spec.load, p.cluster.runtime
    ckpt = p.model.checkpoint_bytes.value if p.model is not None and p.model.checkpoint_bytes is not None else None
    nodes = max(1, p.topology.nodes)
    read = ckpt is not None and rt.model_load_gib_per_s is not None
    load_s = ((ckpt / nodes / (rt.model_load_gib_per_s * GIB) if read else 0.0) + rt.startup_s) \
        if read or "startup_s" in rt.model_fields_set else None
    point = load.duration_s + load.warmup_grace_s + STOP_MARGIN_S
    release = RELEASE_TIERS * (p.spec.stop_grace_s + KILL_WAIT_S)
    return Budget(seconds(p.recipe.slurm.time_limit), load_s, float(load.dataset_timeout_s or 0), float(point),
                  p.spec.search.max_probes if p.spec.search is not None else len(p.spec.concurrency),
                  float(p.recipe.health_check.timeout_seconds),
                  float(load.idle_wait_s + CLIENT_SETUP_S + INTERRUPT_GRACE_S),
                  float(PREFLIGHT_TIMEOUT_S + MOUNTS_TIMEOUT_S + release))
