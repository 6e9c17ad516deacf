"""Questions to the results history: which runs a selector names, the repeated points of a cluster and their
noise, each case's points in a group of runs, and the changes between two groups (rackbench.history.compare).

The runs on trial (B, compared against the reference A) never estimate their own noise: :func:`noise` leaves them
out, so a regression of an unchanged recipe (a new commit, another machine) is not hidden by the spread it adds
itself. The reference runs' repeats, and every other run's, are what the noise rests on.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field

from rackbench.history import machines
from rackbench.history.compare import Change, compare_groups
from rackbench.history.noise import Noise, Repeat, pooled, repeats as _repeats
from rackbench.history.rows import cases, point, results
from rackbench.results import metrics as registry


def resolve_runs(con: sqlite3.Connection, key: str, exclude: tuple[str, ...] = (), profile: str | None = None
                 ) -> list[str]:
    """The runs ``key`` names, oldest first: ``last:N`` (the N newest runs, leaving out ``exclude``; with
    ``profile``, the N newest that measured it), a git commit or its prefix (every run of that commit: its
    repeats), or a run id or a unique prefix of one. ValueError (one line) when it names none."""
    order = "ORDER BY MIN(p.started_at), r.run_id"
    where, args = ("WHERE p.profile = ?", (profile,)) if profile else ("", ())
    if key.startswith("last:"):
        try:
            n = int(key[5:])
            assert n >= 1
        except (ValueError, AssertionError):
            raise ValueError(f"{key!r}: write last:N with N a whole number >= 1, e.g. last:3") from None
        rows = [r for (r,) in con.execute(f"SELECT r.run_id FROM runs r JOIN points p USING (run_id) {where} "
                                          f"GROUP BY r.run_id {order}", args) if r not in exclude]
        found = rows[-n:]
    else:
        by_id = sorted({r for (r,) in con.execute("SELECT run_id FROM runs WHERE run_id = ? OR run_id LIKE ?",
                                                  (key, f"{key}%"))})
        if len(by_id) > 1 and key not in by_id:
            raise ValueError(f"{key!r} is the prefix of several run ids: {', '.join(by_id[:5])}; name one")
        found = [key] if key in by_id else by_id
        if not found and re.fullmatch(r"[0-9a-f]{4,40}", key):
            found = [r for (r,) in con.execute(f"SELECT r.run_id FROM runs r JOIN points p USING (run_id) WHERE "
                                               f"r.git_commit LIKE ? GROUP BY r.run_id {order}", (f"{key}%",))]
    if not found:
        raise ValueError(f"{key!r} names no run in the history; see `rackbench history list`")
    return found


def repeats(con: sqlite3.Connection, cluster: str, metric: str = "output_tps_per_gpu",
            exclude: tuple[str, ...] = ()) -> list[Repeat]:
    """The cluster's repeated points (one case measured by several runs with one recipe fingerprint), leaving out
    the runs in ``exclude``."""
    if metric not in registry.METRICS:
        raise ValueError(f"{metric!r} is not a metric (known: {', '.join(registry.METRICS)})")
    rows = con.execute("SELECT run_id, case_id, fingerprint, result_json FROM points WHERE cluster = ? "
                       "ORDER BY case_id, started_at, run_id", (cluster,)).fetchall()
    from rackbench.history.rows import metric_values
    return _repeats((case, fp, run, metric_values(con, run, case, blob)[metric])
                    for run, case, fp, blob in rows if run not in exclude)


@dataclass(frozen=True)
class ClusterNoise:
    """The run-to-run noise of each pooled metric on one cluster, from the repeats not on trial."""

    by_metric: dict[str, Noise | None]
    too_few: set[str] = field(default_factory=set)   # metrics with repeats, but too few once the trial's are left out


def noise(con: sqlite3.Connection, cluster: str, exclude: tuple[str, ...] = ()) -> ClusterNoise:
    out, few = {}, set()
    for m in registry.compared():
        if not m.pooled:
            continue
        out[m.name] = pooled(repeats(con, cluster, m.name, exclude))
        if out[m.name] is None and exclude and pooled(repeats(con, cluster, m.name)) is not None:
            few.add(m.name)
    return ClusterNoise(out, few)


def case_profiles(con: sqlite3.Connection) -> dict[str, str]:
    """case id -> profile id, for every case the history holds."""
    return dict(con.execute("SELECT DISTINCT case_id, profile FROM points"))


def by_case(con: sqlite3.Connection, runs: list[str], profile: str | None = None) -> dict[str, list[dict]]:
    """Each case's points (rackbench.history.rows.point) in ``runs``, of ``profile`` if given."""
    got: dict[str, list[dict]] = {}
    for run in runs:
        for case in cases(con, run):
            p = point(con, run, case)
            if profile is None or p["profile"] == profile:
                got.setdefault(case, []).append(p)
    return got


def compare_cases(con: sqlite3.Connection, a: dict[str, list[dict]], b: dict[str, list[dict]],
                  metrics: tuple[str, ...] | None = None, noises: dict[tuple, ClusterNoise] | None = None
                  ) -> dict[str, list[Change]]:
    """Per case in both ``a`` and ``b`` (by_case): the changes from A to B, with the run-to-run noise of the case's
    cluster from the repeats of every run but B's (the runs on trial). ``noises`` caches it per (cluster, trial)."""
    noises = {} if noises is None else noises
    out = {}
    for case in sorted(set(a) & set(b)):
        cluster = b[case][0]["cluster"]
        trial = tuple(sorted({p["run_id"] for p in _all(b)}))
        if (cluster, trial) not in noises:
            noises[(cluster, trial)] = noise(con, cluster, exclude=trial)
        known = noises[(cluster, trial)]
        out[case] = compare_groups(a[case], b[case], metrics=metrics, noise=known.by_metric, few=known.too_few)
    return out


def _all(groups: dict[str, list[dict]]) -> list[dict]:
    return [p for points in groups.values() for p in points]


def compare_runs(con: sqlite3.Connection, runs_a: list[str], runs_b: list[str], profile: str | None = None,
                 metrics: tuple[str, ...] | None = None) -> dict[str, list[Change]]:
    """compare_cases over the points of two groups of runs."""
    return compare_cases(con, by_case(con, runs_a, profile), by_case(con, runs_b, profile), metrics)


def machine_differences(con: sqlite3.Connection, runs_a: list[str], runs_b: list[str],
                        profile: str | None = None) -> list[str]:
    """What differed between the machines of the runs A and B (rackbench.history.machines), over the points of
    ``profile`` (or all) the two groups measured in common."""
    def group(runs: list[str]) -> dict[str, list]:
        got: dict[str, list] = {}
        for run in runs:
            for case, r in results(con, run):
                if profile is None or r.identity.profile == profile:
                    got.setdefault(case, []).append(r)
        return got
    a, b = group(runs_a), group(runs_b)
    common = set(a) & set(b)
    return machines.differences([r for c in sorted(common) for r in a[c]], [r for c in sorted(common) for r in b[c]])
