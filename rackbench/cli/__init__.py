"""rackbench: inspect recipes and the sweep, report and compare results, check a cluster. One class per
subcommand (rackbench.cli.base.Command); `rackbench COMMAND --help` says what each takes."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from rackbench.cli import components, docs, history, jobs, plan, recipes, rehearse, render, results
from rackbench.cli.base import run
from rackbench.core.former_name import stale_environment

COMMANDS = (*recipes.COMMANDS, *render.COMMANDS, *plan.COMMANDS, *results.COMMANDS, *history.COMMANDS, *components.COMMANDS, *rehearse.COMMANDS,
            *jobs.COMMANDS, *docs.COMMANDS)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rackbench", description=__doc__)
    parser.add_argument("--recipes", default="recipes", help="recipe catalog folder (default: recipes)")
    sub = parser.add_subparsers(dest="command_name", required=True, metavar="COMMAND")
    for cls in COMMANDS:
        cls().register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for line in stale_environment(os.environ):
        logging.getLogger("rackbench").warning("%s", line)
    try:
        return run(args.command, args)
    except BrokenPipeError:          # `rackbench plan | head`: the reader left; nothing more to say, and no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
