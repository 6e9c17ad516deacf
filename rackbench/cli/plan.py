"""`rackbench plan PROFILE...|RANKING...`: what a grid, a search or a ranking will cost in GPU-hours before any node
is held (rackbench.report.plan)."""

from __future__ import annotations

from rackbench.cli.base import Command, Option

TARGETS = Option(("targets",), {"nargs": "*", "help": "profile ids or names, case ids, recipe files or rankings "
                                                      "(recipes/rankings/; default: every profile)"})


class PlanCommand(Command):
    name = "plan"
    help = "the GPU-hours a grid, a search or a ranking will take, from the recipe, before any node is held"
    options = (TARGETS,)

    def run(self, args) -> int:
        from rackbench.cli.recipes import catalog, many
        from rackbench.report.plan import estimate, lines, ranking_lines
        cat = catalog(args)
        for target in args.targets or [None]:
            ranking = cat.ranking(target) if target else None
            if ranking is not None:
                print("\n".join(ranking_lines(ranking.name, [estimate(p) for p in ranking.arms])))
                continue
            for p in many(cat, [target] if target else []):
                print("\n".join(lines(estimate(p))))
        return 0


COMMANDS = (PlanCommand,)
