"""Offline check of each flag's value against the type, choice, arity and bounds the receiving entrypoint's real
parser and vLLM's engine configuration accept (the flag table records them: ``rackbench/data/flags``). Part of
:data:`rackbench.catalog.rules.RULES` (rule ``flag-types``); which table judges is rackbench.catalog.flag_rules'."""

from __future__ import annotations

import json
import re
from typing import Iterator

from rackbench.catalog.flag_rules import frontend, table_for, worker_entrypoint
from rackbench.core.errors import Problem
from rackbench.recipe.flags import canonical
from rackbench.recipe.profile import ENGINE_FLAGS as FLAGS, Profile
from rackbench.recipe.topology import DERIVED_FLAGS


_SIZE = re.compile(r"-?\d+(\.\d+)?[kKmMgGtT]?|auto")
_KINDS = {"int": "a whole number", "float": "a number", "size": "a whole number or a size like 32k",
          "json": "a JSON object", "str": "a string", "any": "a value", "bool": "true or false", "flag": "true"}


_LIMIT = {"gt": (lambda x, b: x > b, "greater than"), "ge": (lambda x, b: x >= b, "at least"),
          "lt": (lambda x, b: x < b, "less than"), "le": (lambda x, b: x <= b, "at most")}


def _bounds_problem(what: str, number: float, bounds: dict) -> str | None:
    """The engine's own bound that ``number`` breaks (vLLM's config classes, recorded in the flag table)."""
    for key, limit in bounds.items():
        ok, words = _LIMIT[key]
        if not ok(number, limit):
            return f"{what} must be {words} {limit:g}, got {number:g} (vLLM refuses it at start-up)"
    return None


def _object_problem(name: str, value: dict, obj: dict) -> str | None:
    """A JSON flag's object against the engine's config class: unknown keys where it refuses them, each known
    field's kind and bounds."""
    fields = obj["fields"]
    for key, item in value.items():
        field = fields.get(key)
        if field is None:
            if obj.get("extra") == "forbid":
                return f"--{name} has no field {key!r} ({obj['config']} refuses unknown fields)"
            continue
        kind, what = field["kind"], f"--{name} {key}"
        items = item if kind.startswith("list") and isinstance(item, list) else None
        if kind.startswith("list") and items is None:
            return f"{what} takes a list, got {item!r}"
        inner = kind[5:-1] if kind.startswith("list[") else kind
        for x in (items if items is not None else [item]):
            if inner == "int" and (isinstance(x, bool) or not isinstance(x, int)):
                return f"{what} takes {'a list of whole numbers' if items is not None else 'a whole number'}, " \
                       f"got {item!r}"
            if inner == "float" and (isinstance(x, bool) or not isinstance(x, (int, float))):
                return f"{what} takes {'a list of numbers' if items is not None else 'a number'}, got {item!r}"
            if inner == "bool" and not isinstance(x, bool):
                return f"{what} takes true or false, got {item!r}"
            bounds = {k: v for k, v in field.items() if k != "kind"}
            why = _bounds_problem(what, x, bounds) if inner in ("int", "float") and bounds else None
            if why:
                return why
    return None


def _scalar_problem(name: str, value, spec: dict) -> str | None:
    """Why the real parser would refuse ``value`` for ``--name`` (None if it converts)."""
    kind, text = spec["kind"], str(value)
    if isinstance(value, (dict, list)):
        return f"--{name} takes {_KINDS[kind]}, got a nested {type(value).__name__}"
    if kind == "int" and (isinstance(value, bool) or not re.fullmatch(r"-?\d+", text)):
        return f"--{name} takes a whole number, got {value!r}"
    if kind == "float":
        try:
            number = float(text)
        except ValueError:
            return f"--{name} takes a number, got {value!r}"
        if number != number or number in (float("inf"), float("-inf")) or isinstance(value, bool):
            return f"--{name} takes a finite number, got {value!r}"
    if kind == "size" and (isinstance(value, bool) or not _SIZE.fullmatch(text)):
        return f"--{name} takes a whole number or a size like 32k, got {value!r}"
    if kind in ("int", "float") and spec.get("bounds"):       # a number by now (the checks above)
        why = _bounds_problem(f"--{name}", float(text), spec["bounds"])
        if why:
            return why
    if kind == "json" and not isinstance(value, dict):
        try:
            parsed = json.loads(text)
        except ValueError:
            return f"--{name} takes a JSON object, got {value!r}"
        if not isinstance(parsed, dict):
            return f"--{name} takes a JSON object, got {value!r}"
        if spec.get("object"):
            return _object_problem(name, parsed, spec["object"])
    choices = spec.get("choices")
    if choices and text not in choices and text.lower() not in choices:
        shown = ", ".join(choices[:12]) + (", ..." if len(choices) > 12 else "")
        return f"--{name} {value!r} is not one of its choices ({shown})"
    if kind in ("str", "any") and text.startswith("-"):
        return f"--{name} {value!r} starts with '-': the parser would read it as another flag"
    return None


def _value_problem(name: str, value, spec: dict) -> str | None:
    kind, nargs = spec["kind"], spec.get("nargs")
    if value is None:
        return None
    if value is True:
        return None if kind in ("flag", "bool") or nargs in ("?", "*") else (
            f"--{name} takes {_KINDS[kind]}; `true` would render `--{name}` with no value")
    if value is False:
        return None if kind in ("bool", "flag") else (
            f"--{name} takes {_KINDS[kind]}; `false` would render `--no-{name}`, which does not exist")
    if kind in ("flag", "bool"):
        return f"--{name} is a switch: write true or false, got {value!r}"
    if isinstance(value, dict):
        if kind not in ("json", "any"):
            return f"--{name} takes {_KINDS[kind]}, not a mapping"
        return _object_problem(name, value, spec["object"]) if spec.get("object") else None
    if isinstance(value, list):
        if nargs not in ("+", "*"):
            return (f"--{name} takes one value, got a list: spread into argv its items would become arguments "
                    "of their own")
        if not value and nargs == "+":
            return f"--{name} needs at least one value, got []"
        for item in value:
            why = _scalar_problem(name, item, spec) or (
                f"--{name} item {item!r} starts with '-'" if str(item).startswith("-") else None)
            if why:
                return why
        return None
    return _scalar_problem(name, value, spec)


def flag_types(p: Profile) -> Iterator[Problem]:
    """Catches a value the receiving entrypoint's real parser would not convert (the flag table records each option's
    kind, choices and arity from the parser itself): a word for a number (`block-size: 64.5`,
    `gpu-memory-utilization: most`), a choice it does not have (`kv-cache-dtype: fp9`), a list for a one-value
    flag (spread into argv its items would become arguments of their own), `true` for a flag that takes a value,
    a value starting with `-`; and what vLLM's engine configuration refuses at start-up, after the weights have
    loaded, read from its own config classes into the table: the bounds of 49 numeric engine arguments
    (`block-size: 0`, `gpu-memory-utilization: 1.5`) and, for the 10 JSON arguments that are config classes,
    their fields' kinds and bounds and unknown fields where the class refuses them (`compilation-config:
    {cudagraph_capture_size: [8]}`). The 1.4.0/0.26.0 table of the H200 clusters has vLLM 0.26.0's own bounds,
    written on the lent H200 (42 numeric arguments, 7 config classes). The table that judges is the one for the
    recipe's pinned versions (`identity.frameworks`); where none is checked in, `rackbench matrix`/`recipe` say
    which versions judged instead."""
    table, _ = table_for(p)
    types = table.types.get(worker_entrypoint(p), {})
    if not types:
        return
    for key, value in p.flags.raw.items():
        name = canonical(key)
        spec = types.get(f"--{name}")
        if spec is None or name in DERIVED_FLAGS or key in p.flags.errors:
            continue
        why = _value_problem(name, value, spec)
        if why:
            yield p.recipe_problem(
                [*FLAGS, key], f"{why} (flag table {table.name})",
                "give a value of the type the flag takes" + (
                    f" ({', '.join(spec['choices'][:6])}{', ...' if len(spec['choices']) > 6 else ''})"
                    if spec.get("choices") else ""))
    api = frontend(p).api_entrypoint
    front = table.types.get(api, {}) if api else {}
    if front:
        for key, value in (p.recipe.frontend.args or {}).items():
            spec = front.get(f"--{canonical(key)}")
            why = spec and _value_problem(canonical(key), value, spec)
            if why:
                yield p.recipe_problem(
                    ["frontend", "args", key], f"{why} (flag table {table.name})",
                    "give a value of the type the flag takes")
