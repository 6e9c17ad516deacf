"""`servebench history` and `servebench compare`: the results history (servebench.history) from the command line."""

from __future__ import annotations

import json
import math
import sys
from contextlib import closing

from . import changelog, history, noise


def add_parsers(sub) -> None:
    p = sub.add_parser("history", help="the results history: every point ever measured (SQLite)")
    hsub = p.add_subparsers(dest="history_command", required=True)
    a = hsub.add_parser("add", help="record every point of a results folder (idempotent)")
    a.add_argument("results")
    a.add_argument("--db", default=history.DEFAULT_DB)
    a.add_argument("--commit", help="git commit the run measured (a benchmark session records its own)")
    a.set_defaults(func=cmd_history_add)
    ls = hsub.add_parser("list", help="the runs the history holds")
    ls.add_argument("--db", default=history.DEFAULT_DB)
    ls.set_defaults(func=cmd_history_list)
    nz = hsub.add_parser("noise", help="run-to-run noise from repeated points (what scripts/measure-noise prints)")
    nz.add_argument("--db", default=history.DEFAULT_DB)
    nz.add_argument("--metric", default="output_tps_per_gpu", choices=noise.POOLED)
    nz.set_defaults(func=cmd_history_noise)

    p = sub.add_parser("compare", help="run B against run A, per point, with 95% intervals (run-to-run noise, else bootstrap)")
    p.add_argument("run_a", help="the reference: a run id (or unique prefix), a git commit (all its runs), or last:N "
                                 "(the N newest runs other than B's)")
    p.add_argument("run_b", help="the runs compared with it, named the same way")
    p.add_argument("--profile", help="only this profile's points (with last:N: the N newest runs that measured it)")
    p.add_argument("--db", default=history.DEFAULT_DB)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--changelog", default="perf-changelog.yaml",
                   help="group the points by the perf-changelog entries whose config-keys select them")
    p.set_defaults(func=cmd_compare)


def cmd_history_add(args) -> int:
    try:
        added = history.add(args.db, args.results, args.commit)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    for name, why in sorted(added.skipped.items()):
        print(f"{args.results}/points/{name}: skipped: {why}", file=sys.stderr)
    print(f"{args.db}: run(s) {', '.join(added.run_ids)}: {added.points} point(s) added, {added.already} already there")
    return 0


def cmd_history_list(args) -> int:
    try:
        rows = history.runs(args.db)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    for r in rows:
        print(f"{r['run_id']}  commit {(r['git_commit'] or '?')[:12]}  {r['points']} point(s), {r['passed']} passed"
              f"  added {r['added_at']}")
    return 0


def cmd_compare(args) -> int:
    try:
        with closing(history.connect(args.db)) as con:
            runs_b = history.resolve_runs(con, args.run_b, profile=args.profile)
            runs_a = history.resolve_runs(con, args.run_a, exclude=tuple(runs_b), profile=args.profile)
            if set(runs_a) & set(runs_b):
                raise ValueError(f"{args.run_a!r} and {args.run_b!r} both name run(s) "
                                 f"{', '.join(sorted(set(runs_a) & set(runs_b)))}")
            table = history.compare_runs(con, runs_a, runs_b, args.profile)
            if not table:
                raise ValueError(f"runs {', '.join(runs_a)} and {', '.join(runs_b)} measured no point in common")
            profiles = history.case_profiles(con)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    entries = changelog.effects(changelog.load_entries(args.changelog),
                                {c: chs[0].verdict for c, chs in table.items()}, profiles)
    if args.json:
        print(json.dumps({"a": runs_a, "b": runs_b, "points": {c: [ch.__dict__ for ch in chs]
                                                                for c, chs in table.items()},
                          "changelog": entries}, indent=1))
        return 0
    print(f"# {', '.join(runs_b)} against {', '.join(runs_a)}: change with its 95% interval (README: Results "
          "history)")
    for case, changes in table.items():
        print(f"{case}: {changes[0].verdict}  ({changes[0].basis})")
        for ch in changes:
            basis = "" if ch.basis == changes[0].basis else f"  ({ch.basis})"
            print(f"  {ch.metric:20} {_num(ch.a):>10} -> {_num(ch.b):>10}  {_change(ch)}{basis}")
    for e in entries:
        summary = ", ".join(f"{n} {v}" for v, n in e["counts"].items())
        print(f"perf-changelog entry {e['entry']} ({e['pr']}): {len(e['cases'])} point(s): {summary}")
    return 0


def cmd_history_noise(args) -> int:
    """Per repeated point: mean, CV, largest drop; per cluster: the pooled noise and the interval it gives."""
    try:
        with closing(history.connect(args.db)) as con:
            clusters = [c for (c,) in con.execute("SELECT DISTINCT cluster FROM points ORDER BY cluster")]
            found = {c: history.repeats(con, c, args.metric) for c in clusters}
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    found = {c: reps for c, reps in found.items() if reps}
    if not found:
        print(f"{args.db}: no repeated point (one case measured twice with one recipe fingerprint); run "
              "scripts/measure-noise", file=sys.stderr)
        return 1
    for cluster, reps in found.items():
        pooled = noise.pooled(reps)
        print(f"# {cluster}: {args.metric}, run-to-run")
        print(f"{'case':40} {'mean':>10} {'CV':>6} {'max drop':>9}  runs")
        for r in reps:
            print(f"{r.case[:40]:40} {r.mean:10.1f} {r.cv:6.1%} {r.drop:9.1%}  {', '.join(f'{v:.0f}' for v in r.values)}")
        if pooled is not None:
            print(f"pooled: sd of ln = {pooled.sd:.3f} ({pooled.describe()}); a change between two single runs is "
                  f"within noise inside [{math.expm1(-pooled.band()):+.1%}, {math.expm1(pooled.band()):+.1%}] "
                  "(what `servebench compare` uses)")
        if args.metric == "output_tps_per_gpu":
            print(f"a fixed baseline tolerance (--baseline) noise alone would not cross: max(3 x CV, largest drop) = "
                  f"{noise.tolerance(reps):.2f}")
        if pooled is not None:
            alarms = _false_alarms(args.db, reps, args.metric, pooled)
            print(f"same-recipe pairs of runs called better or worse: {alarms['run-to-run']} of {alarms['pairs']} by "
                  f"the run-to-run interval, {alarms['bootstrap']} of {alarms['pairs']} by the within-run bootstrap "
                  "alone (each should be about 5%)")
    return 0


def _false_alarms(db, reps: list, metric: str, pooled) -> dict[str, int]:
    """Every pair of runs of a repeated point measured the same recipe: a verdict other than "within noise" on one
    is a false alarm. Counted for the run-to-run interval and for the bootstrap alone."""
    from itertools import combinations

    from .compare import compare_point
    counts = {"pairs": 0, "run-to-run": 0, "bootstrap": 0}
    with closing(history.connect(db)) as con:
        for r in reps:
            for a, b in combinations(r.runs, 2):
                pa, pb = history.point(con, a, r.case), history.point(con, b, r.case)
                counts["pairs"] += 1
                for key, known in (("run-to-run", {metric: pooled}), ("bootstrap", None)):
                    counts[key] += compare_point(pa, pb, metrics=(metric,), noise=known)[0].verdict in ("better", "worse")
    return counts


def _num(x) -> str:
    return "n/a" if x is None else f"{x:,.1f}" if abs(x) >= 1 else f"{x:.3f}"


def _change(ch) -> str:
    if ch.rel is None:
        return ch.verdict
    scale, unit = (100, " pts") if ch.metric == "error_rate" else (100, "%")
    span = "" if ch.low is None else f" [{ch.low * scale:+.1f}, {ch.high * scale:+.1f}]"
    return f"{ch.rel * scale:+.1f}{unit}{span}  {ch.verdict}"
