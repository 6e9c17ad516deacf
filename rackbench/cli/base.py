"""The command line's shape: one :class:`Command` class per subcommand (as vLLM's ``vllm bench sweep``), the options
several of them share declared once (:data:`RESULTS_DIR`, :data:`HISTORY`, ...), and one place that turns the
library's one-line errors into an exit code."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

from rackbench.core.errors import ConfigError


@dataclass(frozen=True)
class Option:
    """An option several subcommands take, declared once: the same name and meaning everywhere."""

    names: tuple[str, ...]
    kwargs: dict[str, Any]

    def add(self, parser: argparse.ArgumentParser, **override) -> None:
        parser.add_argument(*self.names, **{**self.kwargs, **override})


RESULTS_DIR = Option(("--results-dir",), {"default": "results", "metavar": "DIR",
                                          "help": "the results folder (default: results)"})
HISTORY = Option(("--history", "--db"), {"dest": "history", "metavar": "DB",
                                         "help": "the results history (default: <results>/history.sqlite, "
                                                 "results/history.sqlite; --db is the same option)"})
JSON = Option(("--json",), {"action": "store_true", "help": "machine-readable output"})
CHANGELOG = Option(("--changelog",), {"default": "perf-changelog.yaml", "metavar": "FILE",
                                      "help": "the perf-changelog whose entries group the points they select"})
PROFILES = Option(("targets",), {"nargs": "*", "help": "profile ids or names, case ids or recipe files "
                                                        "(default: all)"})


class Command:
    """One subcommand: its name, help, options (shared ones by reference) and what it does."""

    name: ClassVar[str]
    help: ClassVar[str]
    options: ClassVar[tuple[Option, ...]] = ()
    subcommands: ClassVar[tuple[type["Command"], ...]] = ()

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The subcommand's own arguments (shared ones come from ``options``)."""

    def run(self, args: argparse.Namespace) -> int:
        raise NotImplementedError

    path = "rackbench"     # what the user typed to reach this subcommand, for its errors (set by register)

    def register(self, sub, parent: str = "rackbench") -> None:
        self.path = f"{parent} {self.name}"
        # argparse %-formats help texts: a literal % (a "95%" interval) would crash --help
        parser = sub.add_parser(self.name, help=self.help.replace("%", "%%"), description=self.help)
        for option in self.options:
            option.add(parser)
        self.add_arguments(parser)
        if self.subcommands:
            nested = parser.add_subparsers(dest=f"{self.name}_command", required=True, metavar="COMMAND")
            for cls in self.subcommands:
                cls().register(nested, self.path)
        else:
            parser.set_defaults(command=self)


def run(command: Command, args: argparse.Namespace) -> int:
    """Run a subcommand; a bad input file is one line per problem (exit 1), a bad folder or store one line (2)."""
    try:
        return command.run(args)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 1
    except (ValueError, LookupError) as err:
        print(f"{command.path}: {err}", file=sys.stderr)
        return 2
