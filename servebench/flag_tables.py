"""Pinned flag tables: the long options each entrypoint's real parser accepts, per installed version.

Tables live in ``servebench/data/flags/<name>.json`` and are written by ``servebench/tools/flag_table.py`` from the real
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
    path = resources.files("servebench").joinpath(f"data/flags/{name}.json")
    if not path.is_file():
        available = sorted(p.name.removesuffix(".json") for p in resources.files("servebench").joinpath(
            "data/flags").iterdir() if p.name.endswith(".json"))
        raise KeyError(f"no flag table {name!r} (have: {', '.join(available)}); generate it with servebench/tools/flag_table.py")
    data = json.loads(path.read_text())
    return FlagTable(data["name"], data["versions"], data["entrypoints"], data.get("types", {}))
