"""`servebench history` and `servebench compare`: the results history (servebench.history) from the command line."""

from __future__ import annotations

import json
import sys
from contextlib import closing

from . import history
from .compare import compare_point


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

    p = sub.add_parser("compare", help="run B against run A, per point, with bootstrap confidence intervals")
    p.add_argument("run_a", help="run id (or unique prefix, or git commit) of the reference")
    p.add_argument("run_b", help="run id (or prefix, or commit) compared with it")
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
            run_a, run_b = history.resolve_run(con, args.run_a), history.resolve_run(con, args.run_b)
            shared = sorted(set(history.cases(con, run_a)) & set(history.cases(con, run_b)))
            if not shared:
                raise ValueError(f"runs {run_a} and {run_b} measured no point in common")
            table = {case: compare_point(history.point(con, run_a, case), history.point(con, run_b, case))
                     for case in shared}
            profiles = dict(con.execute(f"SELECT case_id, profile FROM points WHERE run_id = ? AND case_id IN "
                                        f"({','.join('?' * len(shared))})", (run_b, *shared)).fetchall())
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({c: [ch.__dict__ for ch in chs] for c, chs in table.items()}, indent=1))
        return 0
    print(f"# {run_b} against {run_a}: change with its 95% bootstrap interval (README: Results history)")
    for case, changes in table.items():
        head = changes[0]
        print(f"{case}: {head.verdict}")
        for ch in changes:
            print(f"  {ch.metric:20} {_num(ch.a):>10} -> {_num(ch.b):>10}  {_change(ch)}")
    _by_changelog(args.changelog, table, profiles)
    return 0


def _by_changelog(path: str, table: dict, profiles: dict[str, str]) -> None:
    """Per perf-changelog entry: the compared points its config-keys select, and their output tok/s verdicts."""
    from pathlib import Path

    from . import yamlio
    from .changelog import affected
    from .errors import ConfigError

    if not Path(path).is_file():
        return
    try:
        entries = yamlio.load(path)
    except ConfigError:
        return           # `servebench changelog check` reports a broken changelog
    groups: dict[int, list[str]] = {}
    for case in table:
        for i in affected(entries, profiles[case]):
            groups.setdefault(i, []).append(case)
    for i, cases in sorted(groups.items()):
        entry = entries[i]
        verdicts = [table[c][0].verdict for c in cases]
        summary = ", ".join(f"{verdicts.count(v)} {v}" for v in ("better", "worse", "within noise", "no records")
                            if verdicts.count(v))
        print(f"perf-changelog entry {i + 1} ({entry.get('pr-link', 'no pr-link')}): {len(cases)} point(s): {summary}")


def _num(x) -> str:
    return "n/a" if x is None else f"{x:,.1f}" if abs(x) >= 1 else f"{x:.3f}"


def _change(ch) -> str:
    if ch.rel is None:
        return ch.verdict
    scale, unit = (100, " pts") if ch.metric == "error_rate" else (100, "%")
    span = "" if ch.low is None else f" [{ch.low * scale:+.1f}, {ch.high * scale:+.1f}]"
    return f"{ch.rel * scale:+.1f}{unit}{span}  {ch.verdict}"
