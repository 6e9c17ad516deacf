"""``rackbench history`` and ``rackbench compare``: the results history (rackbench.history) from the command line.
Reading never creates a store: a path with no history is one line and exit 2."""

from __future__ import annotations

import json
import math
from contextlib import closing
from itertools import combinations
from pathlib import Path

from rackbench.cli.base import CHANGELOG, HISTORY, JSON, Command
from rackbench.core.format import interval, number
from rackbench.core.results_folder import ResultsFolder
from rackbench.results import metrics as registry

# The history's modules (numpy, sqlite, the comparisons) load when a history command runs, not at every start.


def db(args) -> Path:
    """--history, else the history of ./results (looked up when a command runs, never at import)."""
    return Path(args.history) if args.history else ResultsFolder.at("results").history


class HistoryAdd(Command):
    name = "add"
    help = "record every point of a results folder (idempotent)"
    options = (HISTORY,)

    def add_arguments(self, parser) -> None:
        parser.add_argument("results")
        parser.add_argument("--commit", help="git commit the run measured (a benchmark session records its own)")

    def run(self, args) -> int:
        from rackbench.history import store
        added = store.add(db(args), args.results, args.commit)
        for name, why in sorted(added.skipped.items()):
            print(f"{ResultsFolder.at(args.results).points / name}: skipped: {why}")
        for case, why in sorted(added.no_requests.items()):
            print(f"{case}: added without its requests ({why}): compared only where the history has repeats")
        print(f"{db(args)}: run(s) {', '.join(added.run_ids)}: {added.points} point(s) added, "
              f"{added.already} already there")
        return 0


class HistoryList(Command):
    name = "list"
    help = "the runs the history holds"
    options = (HISTORY,)

    def run(self, args) -> int:
        from rackbench.history import rows, store
        with closing(store.connect(db(args), create=False)) as con:
            found = rows.runs(con)
        for r in found:
            print(f"{r['run_id']}  commit {(r['git_commit'] or '?')[:12]}  {r['points']} point(s) stored, "
                  f"{r['passed']} of them passed  added {r['added_at']}")
        if found:      # a session whose search or set-up failed still shows its points' own verdicts here
            print("(measured points only: a run's searches, and cases that failed before measuring, are in its "
                  "results folder's summary.md and junit file, not in the history)")
        return 0


class HistoryNoise(Command):
    name = "noise"
    help = "run-to-run noise from repeated points (what scripts/measure-noise prints)"
    options = (HISTORY,)

    def add_arguments(self, parser) -> None:
        parser.add_argument("--metric", default="output_tps_per_gpu",
                            choices=[m.name for m in registry.compared() if m.pooled])

    def run(self, args) -> int:
        from rackbench.history import noise, queries, store
        metric = registry.METRICS[args.metric]
        with closing(store.connect(db(args), create=False)) as con:
            clusters = [c for (c,) in con.execute("SELECT DISTINCT cluster FROM points ORDER BY cluster")]
            found = {c: reps for c in clusters if (reps := queries.repeats(con, c, args.metric))}
            if not found:
                print(f"{db(args)}: no repeated point (one case measured twice with one recipe fingerprint); run "
                      "scripts/measure-noise")
                return 1
            for cluster, reps in found.items():
                pooled = noise.pooled(reps)
                print(f"# {cluster}: {metric.label}, run-to-run")
                print(f"{'case':40} {'mean':>10} {'CV':>7} {'max drop':>9}  runs")
                for r in reps:
                    print(f"{r.case[:40]:40} {number(r.mean, metric.unit):>10} {number(r.cv, 'share'):>7} "
                          f"{number(r.drop, 'share'):>9}  {', '.join(number(v, metric.unit) for v in r.values)}")
                if pooled is not None:
                    band = pooled.band()
                    print(f"pooled: sd of ln = {pooled.sd:.3f} ({pooled.describe()}); a change between two single "
                          f"runs is within noise inside {interval(math.expm1(-band), math.expm1(band))} "
                          "(what `rackbench compare` uses)")
                if args.metric == "output_tps_per_gpu":
                    print("a fixed baseline tolerance (--baseline) noise alone would not cross: max(3 x CV, largest "
                          f"drop) = {noise.tolerance(reps):.2f}")
                if pooled is not None:
                    alarms = false_alarms(con, reps, args.metric, pooled)
                    print(f"same-recipe pairs of runs called better or worse: {alarms['run-to-run']} of "
                          f"{alarms['pairs']} by the run-to-run interval, {alarms['bootstrap']} of {alarms['pairs']} "
                          "by the within-run bootstrap alone (each should be about 5%)")
        return 0


def false_alarms(con, reps: list, metric: str, pooled) -> dict[str, int]:
    """Every pair of runs of a repeated point measured the same recipe: a verdict other than "within noise" on one
    is a false alarm. Counted for the run-to-run interval and for the bootstrap alone."""
    from rackbench.history import rows
    from rackbench.history.compare import compare_point
    counts = {"pairs": 0, "run-to-run": 0, "bootstrap": 0}
    for r in reps:
        for a, b in combinations(r.runs, 2):
            pa, pb = rows.point(con, a, r.case), rows.point(con, b, r.case)
            counts["pairs"] += 1
            for key, known in (("run-to-run", {metric: pooled}), ("bootstrap", None)):
                counts[key] += compare_point(pa, pb, metrics=(metric,), noise=known)[0].verdict in ("better", "worse")
    return counts


class HistoryCommand(Command):
    name = "history"
    help = "the results history: every point ever measured (SQLite)"
    subcommands = (HistoryAdd, HistoryList, HistoryNoise)


class CompareCommand(Command):
    name = "compare"
    help = "runs B against runs A, per point, with 95% intervals (run-to-run noise, else a bootstrap)"
    options = (HISTORY, JSON, CHANGELOG)

    def add_arguments(self, parser) -> None:
        parser.add_argument("run_a", help="the reference: a run id (or unique prefix), a git commit (all its runs), "
                                          "or last:N (the N newest runs other than B's)")
        parser.add_argument("run_b", help="the runs compared with it, named the same way")
        parser.add_argument("--profile", help="only this profile's points (with last:N: the N newest runs that "
                                              "measured it)")

    def run(self, args) -> int:
        from rackbench.history import changelog, machines, queries, store
        with closing(store.connect(db(args), create=False)) as con:
            runs_b = queries.resolve_runs(con, args.run_b, profile=args.profile)
            runs_a = queries.resolve_runs(con, args.run_a, exclude=tuple(runs_b), profile=args.profile)
            if set(runs_a) & set(runs_b):
                raise ValueError(f"{args.run_a!r} and {args.run_b!r} both name run(s) "
                                 f"{', '.join(sorted(set(runs_a) & set(runs_b)))}")
            table = queries.compare_runs(con, runs_a, runs_b, args.profile)
            if not table:
                raise ValueError(f"runs {', '.join(runs_a)} and {', '.join(runs_b)} measured no point in common")
            profiles = queries.case_profiles(con)
            machine = queries.machine_differences(con, runs_a, runs_b, args.profile)
        entries = changelog.effects(changelog.load_entries(args.changelog),
                                    {c: chs[0].verdict for c, chs in table.items()}, profiles)
        if args.json:
            print(json.dumps({"a": runs_a, "b": runs_b, "points": {c: [ch.__dict__ for ch in chs]
                                                                    for c, chs in table.items()},
                              "machine_differences": machine, "changelog": entries}, indent=1))
            return 0
        print(f"# {', '.join(runs_b)} against {', '.join(runs_a)}: change with its 95% interval ("
              "docs/results.md#results-history-rackbench-history-rackbench-compare)")
        for case, changes in table.items():
            print(f"{case}: {changes[0].verdict}  ({changes[0].basis})")
            for ch in changes:
                metric = registry.METRICS[ch.metric]
                basis = "" if ch.basis == changes[0].basis else f"  ({ch.basis})"
                print(f"  {metric.label:24} {number(ch.a, metric.unit):>10} -> {number(ch.b, metric.unit):>10}  "
                      f"{ch.text()}{basis}")
        if machine == [machines.UNRECORDED]:
            print(f"machines: {machines.UNRECORDED}")
        else:
            print("machines: " + ("what differed between A's and B's (records before the servers; telemetry during "
                                  "the points)" if machine else "nothing recorded differs"))
            for line in machine:
                print(f"  {line}")
        for e in entries:
            summary = ", ".join(f"{n} {v}" for v, n in e["counts"].items())
            print(f"perf-changelog entry {e['entry']} ({e['pr']}): {len(e['cases'])} point(s): {summary}")
        return 0


COMMANDS = (HistoryCommand, CompareCommand)
