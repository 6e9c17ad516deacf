"""``servebench`` command line: inspect recipes and the sweep without running anything."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import changelog, yamlio
from .flags import masked
from .errors import ConfigError
from .matrix import points
from .catalog import Catalog
from .cli_history import add_parsers as add_history_parsers
from .cli_run import _many, cmd_flag_table, cmd_flags, cmd_preflight
from .profile import Profile


def _catalog(args) -> Catalog:
    return Catalog.load(args.recipes)


def _one(cat: Catalog, key: str) -> Profile:
    found = cat.find(key)
    if len(found) != 1:
        names = ", ".join(p.id for p in cat.profiles)
        raise SystemExit(f"servebench: {key!r} {'matches several profiles' if found else 'is no profile'}; "
                         f"known: {names}")
    return found[0]


def table_for(prof):
    from .flag_rules import table_for as _table_for
    return _table_for(prof)


def cmd_recipe(args) -> int:
    cat = _catalog(args)
    prof = _one(cat, args.profile)
    data = masked(prof.effective())      # credential-like environment values are never printed
    if args.srt:
        ext = f" + {', '.join(cat.declared.extensions)}" if cat.declared.extensions else ""
        print(f"# srt-slurm {cat.declared.srt_slurm} recipe{ext} (recipes/catalog.yaml)")
    print(f"# {prof.id}: effective recipe of {prof.file} (fingerprint {prof.fingerprint[:16]})")
    table, note = table_for(prof)
    print(f"# flags checked against table {table.name}" + (f"; note: {note}" if note else ""))
    print(yamlio.dump(data["recipe"] if args.srt else data), end="")
    return 0


def cmd_matrix(args) -> int:
    cat = _catalog(args)
    pts = [pt for pt in points(cat) if not args.profile or pt.profile.id in {p.id for p in cat.find(args.profile)}]
    if args.json:
        print(json.dumps([pt.as_dict() for pt in pts], indent=2))
        return 0
    print(f"{'case id':40} {'cluster':10} {'layout':22} {'GPUs':>4}  markers")
    for pt in pts:
        p = pt.profile
        print(f"{pt.id:40} {p.cluster.name:10} {str(p.spec.layout):22} {p.topology.gpus:>4}  "
              f"{','.join(pt.markers)}")
    profiles = {pt.profile.id: pt.profile for pt in pts}
    print(f"\n{len(pts)} points in {len(profiles)} profiles; every recipe is valid")
    for note in cat.notes():
        print(f"note: {note}", file=sys.stderr)
    return 0


def cmd_render(args) -> int:
    """The allocation a profile gets, as it would be submitted: nothing is submitted."""
    import shlex

    from .cluster.request import request_for
    from .cluster.slurm import sbatch_script, srun_prefix
    from .server.placement import dry_placement
    from .server.plan import plan

    cat = _catalog(args)
    prof = _one(cat, args.target)
    req = request_for(prof, "RUN", args.results_dir)
    cl = prof.cluster
    print(f"# {prof.id}: cluster {cl.name}, backend {cl.backend}, {req.nodes} nodes x {req.gpus_per_node} GPUs")
    sp = plan(prof, dry_placement(prof))
    if cl.backend == "slurm":
        print(f"# sbatch script ({req.workdir / (req.name + '.sbatch')}):")
        print(sbatch_script(req))
        print("# each process below is one srun step in that job (JOB = the job id sbatch returns):")
    else:
        print("# local backend: the processes below run on this machine, no scheduler")
    print(f"# {sp.kind}: {len(sp.processes)} processes, {len(sp.engines)} engine(s), "
          f"{len(sp.metrics_urls)} metrics URL(s), {sp.expected_instances} registering worker(s); "
          f"API {sp.api_url}")
    shared = {k: v for k, v in sp.processes[0].env.items()
              if all(k in p.env and p.env[k] == v for p in sp.processes)} if sp.processes else {}
    if shared:
        print("\n# environment of every process")
        _print_env(shared)
    for proc in sp.processes:
        node = dry_placement(prof).nodes[proc.rank]
        step = "runs to completion before the servers" if proc.oneshot else proc.role
        print(f"\n## {proc.name} ({step}) on node {proc.rank} ({node})")
        _print_env({k: v for k, v in proc.env.items() if k not in shared})
        prefix = srun_prefix("JOB", node, req, proc.name, proc.image) + ["--"] if cl.backend == "slurm" else []
        print(shlex.join([*prefix, *proc.argv]))
    print("\n# engines (DP rank -> metrics URL)")
    for eng in sp.engines:
        print(f"engine {eng.dp_rank} on node {eng.rank}: {eng.metrics_url}")
    _print_aiperf(prof, sp, args.target, args.results_dir)
    return 0


def _print_aiperf(prof, sp, target: str, results_dir: str) -> None:
    """The AIPerf command of the case named (or of the profile's first point); README: AIPerf options."""
    import shlex

    from .load.aiperf import command
    from .matrix import Point

    conc = next((c for c in prof.spec.concurrency if prof.case_id(c) == target), prof.spec.concurrency[0])
    point = Point(prof, conc)
    case = f"{results_dir}/{prof.id}/{point.id}"
    generated = prof.spec.load.dataset == "generated"
    argv = command(prof, point, sp, aiperf_bin="aiperf", artifact_dir=Path(f"{case}/aiperf"),
                   tokenizer=f"local/{prof.spec.model}", trace=Path(f"{case}/trace.jsonl") if generated else None,
                   sessions=prof.spec.load.trace.sessions_per_concurrency * conc if generated else None)
    print(f"\n# AIPerf for {point.id} (each option: README, AIPerf options)")
    print(shlex.join(argv))


def _print_env(env: dict) -> None:
    import shlex

    for key, value in masked(env).items():
        print(f"unset {key}" if value is None else f"export {key}={shlex.quote(value)}")


def cmd_capacity(args) -> int:
    """Per-GPU memory of each profile (weights, load peak, graphs, KV) and a verdict; exit 1 if any does not fit."""
    from . import capacity

    cat = Catalog.load(args.recipes, skip_rules={"capacity"})   # report, rather than refuse, what does not fit
    profiles = [p for t in args.targets for p in _many(cat, t)] if args.targets else cat.profiles
    missing = [p.id for p in profiles if p.model is None]
    if missing:
        print(f"no model description in {args.recipes}/models for: {', '.join(missing)}", file=sys.stderr)
    ests = [capacity.estimate(p, args.gpu_memory_utilization) for p in profiles if p.model]
    print(capacity.as_json(ests) if args.json else capacity.table(ests))
    return 0 if ests and all(e.fits for e in ests) and not missing else 1


def cmd_report(args) -> int:
    """Plots, offload A/B, markdown and CSV from <results>/points/*.json."""
    from . import report

    try:
        rep = report.write(Path(args.results), Path(args.out) if args.out else None)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    for name, why in sorted(rep.rejected.items()):
        print(f"{args.results}/points/{name}: skipped: {why}", file=sys.stderr)
    html_error = None
    if rep.points:
        try:
            rep.files.append(_html(args, rep.files[0].parent / "report.html"))
        except ValueError as err:        # a --history that is not one: the other files are written already
            html_error = f"report.html not written: {err}"
    else:
        print(f"{args.results}/points: no valid result file in it", file=sys.stderr)
    print("\n".join(str(f) for f in rep.files))
    if html_error:
        print(html_error, file=sys.stderr)
        return 2
    return 0 if rep.points else 1


def _html(args, page: Path) -> Path:
    """report.html over the history (--history, else RESULTS/history.sqlite); without one, over this folder alone
    (in a throw-away store: the report adds nothing to any history)."""
    import tempfile

    from . import history, html_report
    db = Path(args.history) if args.history else Path(args.results) / "history.sqlite"
    if db.is_file():
        return html_report.write(db, page, Path(args.changelog))
    with tempfile.TemporaryDirectory() as tmp:
        history.add(Path(tmp) / "history.sqlite", args.results)
        return html_report.write(Path(tmp) / "history.sqlite", page, Path(args.changelog))


def cmd_baseline(args) -> int:
    """Write a baseline file (accepted output tok/s per GPU per point) from a results directory."""
    from . import baseline

    dropped: dict[str, str] = {}
    try:
        data = baseline.make(Path(args.results), args.cluster, dropped)
        baseline.write(data, Path(args.out))
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    for name, why in sorted(dropped.items()):
        print(f"{args.results}/points/{name}: dropped: {why}", file=sys.stderr)
    print(f"{args.out}: {len(data['points'])} point(s) of cluster {data['cluster']}"
          + (f", {len(dropped)} file(s) dropped (above)" if dropped else ""))
    return 0 if data["points"] else 1


def cmd_schema(args) -> int:
    """The result JSON Schema, generated from the result model; --check compares it with the checked-in file."""
    from . import result

    text = result.schema_text()
    target = Path(__file__).resolve().parent / "schemas" / "result.schema.json"
    if args.check:
        if target.read_text() != text:
            print(f"{target} is stale: run `servebench schema --write`", file=sys.stderr)
            return 1
        print(f"{target}: matches servebench.result.PointResult")
    elif args.write:
        from .yamlio import write_atomic
        write_atomic(target, text)
        print(target)
    else:
        print(text, end="")
    return 0


def cmd_changelog_check(args) -> int:
    path = Path(args.file)
    if not path.is_file():
        print(f"{path}: not found (fix: create it or pass --file)", file=sys.stderr)
        return 1
    ids = [p.id for p in _catalog(args).profiles]
    base = changelog.git_show(args.base, path) if args.base else None
    problems = changelog.check(path.read_bytes(), str(path), ids, base=base if args.base else None)
    for prob in problems:
        print(prob, file=sys.stderr)
    if not problems:
        print(f"{path}: valid" + (f" (appends only since {args.base})" if args.base else ""))
    return 1 if problems else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="servebench", description=__doc__)
    parser.add_argument("--recipes", default="recipes", help="recipe catalog directory (default: recipes)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("recipe", help="print a profile's effective recipe (base + overlays merged)")
    p.add_argument("profile", help="profile id or name, e.g. dep_offload or kimi-k3-gb200-dep_offload")
    p.add_argument("--srt", action="store_true", help="print only the srt-slurm recipe (for srtctl)")
    p.set_defaults(func=cmd_recipe)

    p = sub.add_parser("matrix", help="validate every recipe and list the sweep's points (the offline dry run)")
    p.add_argument("profile", nargs="?", help="only this profile")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_matrix)

    p = sub.add_parser("render", help="print the allocation a profile or case gets (sbatch script, srun lines)")
    p.add_argument("target", help="case id (kimi-k3-gb200-dep-c64) or profile")
    p.add_argument("--results-dir", default="results")
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("capacity", help="does each profile fit in HBM and host DRAM? (exit 1 if one does not)")
    p.add_argument("targets", nargs="*", help="profile ids/names, case ids or recipe files (default: all)")
    p.add_argument("--gpu-memory-utilization", type=float, help="what-if: override the recipe's value")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_capacity)

    p = sub.add_parser("report", help="Pareto plots, offload A/B, markdown summary and CSV of a results directory "
                       "(and report.html over its history.sqlite)")
    p.add_argument("--history", metavar="DB", help="history for report.html (default: RESULTS/history.sqlite)")
    p.add_argument("results", help="results directory (reads <results>/points/*.json)")
    p.add_argument("--out", help="output directory (default: <results>/report)")
    p.add_argument("--changelog", default="perf-changelog.yaml",
                   help="report.html shows, per entry of this perf-changelog, the measured effect on the points it selects")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("baseline", help="write a baseline (accepted tok/s per GPU per point) from a results dir")
    p.add_argument("results")
    p.add_argument("--out", required=True, help="e.g. baselines/<cluster>.json")
    p.add_argument("--cluster", help="when the results hold several clusters")
    p.set_defaults(func=cmd_baseline)

    p = sub.add_parser("flags", help="parse every server process's flags with the real parsers of the serving venv")
    p.add_argument("targets", nargs="*", help="profiles (default: all)")
    p.add_argument("--python", default=".venvs/serve/bin/python", help="interpreter with vLLM/Dynamo installed")
    p.set_defaults(func=cmd_flags)

    p = sub.add_parser("preflight", help="allocate, run setup steps and etcd/NATS, check every node; no server")
    p.add_argument("targets", nargs="+", help="profiles")
    p.add_argument("--on", metavar="CLUSTER", help="run on another cluster of the same shape (e.g. gb200-local)")
    p.add_argument("--results-dir", default="results")
    p.set_defaults(func=cmd_preflight)

    p = sub.add_parser("flag-table", help="write the flag table of an interpreter's vLLM/Dynamo (real parsers)")
    p.add_argument("--python", default=".venvs/serve/bin/python", help="interpreter with vLLM/Dynamo installed")
    p.add_argument("--out", required=True, help="e.g. servebench/data/flags/<name>.json")
    p.add_argument("--name", help="table name (default: from the installed versions)")
    p.set_defaults(func=cmd_flag_table)

    p = sub.add_parser("schema", help="the result JSON Schema, generated from the result model")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write servebench/schemas/result.schema.json")
    mode.add_argument("--check", action="store_true", help="exit 1 if the checked-in file is stale")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("changelog", help="perf-changelog.yaml tools")
    csub = p.add_subparsers(dest="changelog_command", required=True)
    c = csub.add_parser("check", help="validate perf-changelog.yaml; exit 1 with one line per problem")
    c.add_argument("--file", default="perf-changelog.yaml")
    c.add_argument("--base", metavar="REF", help="also require that history since REF only appends")
    c.set_defaults(func=cmd_changelog_check)
    add_history_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
