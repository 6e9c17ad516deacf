"""Commands that read the recipes and run nothing: recipe, matrix, capacity, schema, changelog (render: cli.render)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rackbench.core import yamlio
from rackbench.core.errors import ConfigError, Problem
from rackbench.core.secrets import masked
from rackbench.cli.base import JSON, PROFILES, Command

if TYPE_CHECKING:                      # the catalog's schemas load when a command reads recipes, not at every start
    from rackbench.catalog.loader import Catalog
    from rackbench.recipe.profile import Profile


def catalog(args, skip_rules=()) -> Catalog:
    from rackbench.catalog.loader import Catalog
    return Catalog.load(args.recipes, skip_rules=skip_rules)


def one(cat: Catalog, key: str) -> Profile:
    found = cat.find(key)
    if len(found) != 1:
        names = ", ".join(p.id for p in cat.profiles)
        raise SystemExit(f"rackbench: {key!r} {'matches several profiles' if found else 'is no profile'}; "
                         f"known: {names}")
    return found[0]


def many(cat: Catalog, keys: list[str]) -> list[Profile]:
    """The profiles ``keys`` name (all of them when none is given)."""
    if not keys:
        return list(cat.profiles)
    out = []
    for key in keys:
        found = cat.find(key)
        if not found:
            raise ConfigError(Problem(key, "", "no profile, case or recipe file by that name",
                                      "see `rackbench matrix` for the ids"))
        out += found
    return out


class RecipeCommand(Command):
    name = "recipe"
    help = "print a profile's effective recipe (base + overlays merged)"

    def add_arguments(self, parser) -> None:
        parser.add_argument("profile", help="profile id or name, e.g. dep_offload or kimi-k3-gb200-dep_offload")
        parser.add_argument("--srt", action="store_true", help="print only the srt-slurm recipe (for srtctl)")

    def run(self, args) -> int:
        from rackbench.catalog.flag_rules import table_for
        cat = catalog(args)
        prof = one(cat, args.profile)
        data = masked(prof.effective())      # credential-like environment values are never printed
        if args.srt:
            ext = f" + {', '.join(cat.declared.extensions)}" if cat.declared.extensions else ""
            print(f"# srt-slurm {cat.declared.srt_slurm} recipe{ext} (recipes/catalog.yaml)")
        print(f"# {prof.id}: effective recipe of {prof.file} (fingerprint {prof.fingerprint[:16]})")
        table, note = table_for(prof)
        print(f"# flags checked against table {table.name}" + (f"; note: {note}" if note else ""))
        print(yamlio.dump(data["recipe"] if args.srt else data), end="")
        return 0


class MatrixCommand(Command):
    name = "matrix"
    help = "validate every recipe and list the sweep's points (the offline dry run)"
    options = (JSON,)

    def add_arguments(self, parser) -> None:
        parser.add_argument("profile", nargs="?", help="only this profile")

    def run(self, args) -> int:
        from rackbench.catalog.loader import Catalog
        from rackbench.catalog.points import points, searches
        cat, problems = Catalog.read(args.recipes)
        if problems and args.json:
            raise ConfigError(problems)
        pts = [pt for pt in points(cat) if not args.profile or pt.profile.id in {p.id for p in cat.find(args.profile)}]
        if args.json:
            print(json.dumps([pt.as_dict() for pt in pts], indent=2))
            return 0
        if problems:        # the launch plans of the valid profiles are checked all the same, in this pass
            print(ConfigError(problems), file=sys.stderr)
        print(f"{'case id':40} {'cluster':10} {'layout':22} {'GPUs':>4}  markers")
        for pt in pts:
            p = pt.profile
            print(f"{pt.id:40} {p.cluster.name:10} {str(p.spec.layout):22} {p.topology.gpus:>4}  "
                  f"{','.join(pt.markers)}")
        found = [p for p in searches(cat) if not args.profile or p.id in {q.id for q in cat.find(args.profile)}]
        for p in found:         # one case each; its probes are chosen as it runs
            c = p.spec.concurrency
            print(f"{p.id + '-search':40} {p.cluster.name:10} {str(p.spec.layout):22} {p.topology.gpus:>4}  "
                  f"{','.join(p.markers)}  (search c{min(c)}-c{max(c)} for tier {p.spec.search.tier})")
        for r in cat.rankings if not args.profile else ():
            print(f"{r.name + '-rank':40} {'':10} {'':22} {'':>4}  {','.join(r.markers)}  (ranks "
                  f"{', '.join(p.name for p in r.arms)} for tier {r.spec.tier})")
        from rackbench.server.assembly import launch_problems
        profiles = {pt.profile.id for pt in pts} | {p.id for p in found}
        unseen = [line for p in cat.profiles if p.id in profiles for line in launch_problems(p)]
        for line in unseen:
            print(line, file=sys.stderr)
        if unseen or problems:
            print(f"\n{len(pts)} points and {len(found)} searches in {len(profiles)} valid profiles; {len(problems)} recipe problem(s) and "
                  f"{len(unseen)} launch problem(s) above")
            return 1
        print(f"\n{len(pts)} points and {len(found)} searches in {len(profiles)} profiles; every recipe is valid and every launch can see what "
              "it needs")
        for note in cat.notes():
            print(f"note: {note}", file=sys.stderr)
        return 0


class CapacityCommand(Command):
    name = "capacity"
    help = "does each profile fit in HBM and host DRAM? (exit 1 if one does not)"
    options = (PROFILES, JSON)

    def add_arguments(self, parser) -> None:
        parser.add_argument("--gpu-memory-utilization", type=float, help="what-if: override the recipe's value")

    def run(self, args) -> int:
        from rackbench.catalog import capacity
        cat = catalog(args, skip_rules={"capacity"})   # report, rather than refuse, what does not fit
        profiles = many(cat, args.targets)
        missing = [p.id for p in profiles if p.model is None]
        if missing:
            print(f"no model description in {args.recipes}/models for: {', '.join(missing)}", file=sys.stderr)
        ests = [capacity.estimate(p, args.gpu_memory_utilization) for p in profiles if p.model]
        print(capacity.as_json(ests) if args.json else capacity.table(ests))
        return 0 if ests and all(e.fits for e in ests) and not missing else 1


class SchemaCommand(Command):
    name = "schema"
    help = "the result JSON Schema, generated from the result model"

    def add_arguments(self, parser) -> None:
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--write", action="store_true", help="write rackbench/schemas/result.schema.json")
        mode.add_argument("--check", action="store_true", help="exit 1 if the checked-in file is stale")

    def run(self, args) -> int:
        from rackbench.core.files import write_atomic
        from rackbench.results import schema
        text, target = schema.text(), schema.checked_in_path()
        if args.check:
            if schema.checked_in() != text:
                print(f"{target} is stale: run `rackbench schema --write`", file=sys.stderr)
                return 1
            print(f"{target}: matches rackbench.results.model.PointResult")
        elif args.write:
            print(write_atomic(target, text))
        else:
            print(text, end="")
        return 0


class ChangelogCheck(Command):
    name = "check"
    help = "validate perf-changelog.yaml; exit 1 with one line per problem"

    def add_arguments(self, parser) -> None:
        parser.add_argument("--file", default="perf-changelog.yaml")
        parser.add_argument("--base", metavar="REF", help="also require that history since REF only appends")

    def run(self, args) -> int:
        from rackbench.history import changelog
        path = Path(args.file)
        if not path.is_file():
            print(f"{path}: not found (fix: create it or pass --file)", file=sys.stderr)
            return 1
        ids = [p.id for p in catalog(args).profiles]
        base = changelog.git_show(args.base, path) if args.base else None
        problems = changelog.check(path.read_bytes(), str(path), ids, base=base if args.base else None)
        for prob in problems:
            print(prob, file=sys.stderr)
        if not problems:
            print(f"{path}: valid" + (f" (appends only since {args.base})" if args.base else ""))
        return 1 if problems else 0


class ChangelogCommand(Command):
    name = "changelog"
    help = "perf-changelog.yaml tools"
    subcommands = (ChangelogCheck,)


COMMANDS = (RecipeCommand, MatrixCommand, CapacityCommand, SchemaCommand, ChangelogCommand)
