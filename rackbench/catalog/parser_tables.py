"""Pinned flag tables: the long options each entrypoint's real parser accepts, per installed version.

Tables live in ``rackbench/data/flags/<name>.json`` and are written by ``rackbench/tools/flag_table.py`` from the real
parsers (vLLM's ``vllm serve`` parser, Dynamo's worker = its own groups + vLLM's engine args, Dynamo's frontend).
A cluster names its table in ``runtime.flag_table``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


@dataclass(frozen=True)
class FlagTable:
    name: str
    versions: dict
    entrypoints: dict[str, list[str]]
    types: dict[str, dict[str, dict]]   # entrypoint -> --flag -> {kind, choices?, nargs?} (empty in old tables)


@lru_cache(maxsize=None)
def load(name: str) -> FlagTable:
    path = resources.files("rackbench").joinpath(f"data/flags/{name}.json")
    if not path.is_file():
        available = sorted(p.name.removesuffix(".json") for p in resources.files("rackbench").joinpath(
            "data/flags").iterdir() if p.name.endswith(".json"))
        raise KeyError(f"no flag table {name!r} (have: {', '.join(available)}); generate it with rackbench/tools/flag_table.py")
    data = json.loads(path.read_text())
    return FlagTable(data["name"], data["versions"], data["entrypoints"], data.get("types", {}))


def available() -> list[str]:
    return sorted(p.name.removesuffix(".json") for p in resources.files("rackbench").joinpath("data/flags").iterdir()
                  if p.name.endswith(".json"))


def _matches(table: FlagTable, pins: dict[str, str], components: tuple[str, ...]) -> bool:
    return all(pins.get(c) in (None, table.versions.get(c)) for c in components)


def for_pins(cluster_table: str, pins: dict[str, str], components: tuple[str, ...] = ("vllm", "dynamo")
             ) -> tuple[FlagTable, str | None]:
    """The table that judges a recipe's flags, and a note when it is not the one for the recipe's pinned versions.

    The cluster's table when its versions match the pins (``identity.frameworks``), else a table that does,
    else the cluster's table with a note saying which versions judged instead of the pinned ones."""
    table = load(cluster_table)
    if _matches(table, pins, components):
        return table, None
    for name in available():
        other = load(name)
        if _matches(other, pins, components):
            return other, f"flags judged by table {name} (the recipe's pinned versions), not the cluster's {cluster_table}"
    pinned = ", ".join(f"{c} {pins[c]}" for c in components if pins.get(c))
    have = ", ".join(f"{c} {table.versions.get(c)}" for c in components if pins.get(c))
    return table, (f"flags judged by table {cluster_table} ({have}), but the recipe pins {pinned} and no table for "
                   "those is in rackbench/data/flags: run `rackbench flag-table` where they are installed")
