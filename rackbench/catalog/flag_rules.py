"""Offline checks of the vLLM / Dynamo flags against the pinned flag table of the real parsers
(``rackbench/data/flags``, written by ``rackbench flag-table``): is the flag accepted by the entrypoint that
receives it, does its value have the type, choice and arity that parser converts to, and do class paths
resolve by name. Part of :data:`rackbench.catalog.rules.RULES`.
"""

from __future__ import annotations

from typing import Iterator

from rackbench.catalog import parser_tables as flag_tables
from rackbench.core import entry_points
from rackbench.core.errors import Problem
from rackbench.recipe.flags import canonical
from rackbench.recipe.profile import ENGINE_FLAGS as FLAGS, Profile
from rackbench.recipe.topology import DERIVED_FLAGS


def frontend(p: Profile):
    """The recipe's frontend (rackbench.server.frontends), asked through the registry for its facts."""
    return entry_points.load(entry_points.FRONTENDS, p.recipe.frontend.type)()


def components(p: Profile) -> tuple[str, ...]:
    return frontend(p).components


def table_for(p: Profile) -> tuple[flag_tables.FlagTable, str | None]:
    """The flag table that judges this profile (by the recipe's pinned versions) and a note if it is not theirs."""
    return flag_tables.for_pins(p.cluster.runtime.flag_table, pins(p), components(p))


def pins(p: Profile) -> dict[str, str]:
    """The versions a recipe pins: identity.frameworks, and what the frontend's own install names (the Dynamo
    release of the dynamo section)."""
    written = p.layers.recipe if isinstance(p.layers.recipe, dict) else {}
    return {**frontend(p).installs(written), **p.recipe.identity.frameworks}


def worker_entrypoint(p: Profile) -> str:
    return frontend(p).worker_entrypoint


# The same option under the other entrypoint, for the fix text.
_COUNTERPARTS = {"tool-call-parser": "dyn-tool-call-parser", "reasoning-parser": "dyn-reasoning-parser",
                 "enable-auto-tool-choice": None, "chat-template": "custom-jinja-template"}


def another_major(p: Profile, table: flag_tables.FlagTable) -> str | None:
    """The pinned component whose major release differs from the judging table's (its parser cannot judge which
    flags exist there), or None."""
    from packaging.version import InvalidVersion, Version

    for name, pinned in pins(p).items():
        have = table.versions.get(name)
        if name not in components(p) or not have:
            continue
        try:
            if Version(str(pinned)).major != Version(str(have)).major:
                return f"{name} {pinned}"
        except InvalidVersion:
            continue
    return None


def unknown_flags(p: Profile) -> list[str]:
    """Flags the judging table does not know, when the recipe pins another major release (notes, not errors)."""
    table, _ = table_for(p)
    if another_major(p, table) is None:
        return []
    return [pr.message for pr in _entrypoint_findings(p, table) if "is not accepted by" in pr.message
            and "; it is a `" not in pr.message]


def entrypoint_flags(p: Profile) -> Iterator[Problem]:
    """Catches a flag the receiving entrypoint's real parser does not accept (pinned table; see Servers),
    abbreviations, layout-derived flags.

    Against a table of another major release than the recipe pins, a flag the table does not know is a note
    (``unknown_flags``), not an error: that parser cannot say the pinned release lacks it."""
    table, _ = table_for(p)
    lenient = another_major(p, table) is not None
    for pr in _entrypoint_findings(p, table):
        if lenient and "is not accepted by" in pr.message and "; it is a `" not in pr.message:
            continue
        yield pr


def _entrypoint_findings(p: Profile, table: flag_tables.FlagTable) -> Iterator[Problem]:
    worker, api = worker_entrypoint(p), frontend(p).api_entrypoint
    accepted = set(table.entrypoints[worker])
    other_workers = sorted({entry_points.load(entry_points.FRONTENDS, n).worker_entrypoint      # another frontend's
                            for n in entry_points.names(entry_points.FRONTENDS)} - {worker})   # worker takes it
    for key, value in p.flags.raw.items():
        name = canonical(key)
        if name in DERIVED_FLAGS:
            yield p.recipe_problem(
                [*FLAGS, key], f"--{name} is derived from the layout by rackbench (per node)",
                "remove it; set tensor/data-parallel sizes and resources instead")
            continue
        if f"--{name}" in accepted or (value is False and f"--no-{name}" in accepted):
            continue
        hint = ""
        other = next((e for e in other_workers if f"--{name}" in set(table.entrypoints.get(e, []))), None)
        if other:
            alt = _COUNTERPARTS.get(name)
            hint = f"; it is a `{other}` flag" + (f": use {alt}" if alt else ": drop it")
        near = [f for f in accepted if f.startswith(f"--{name}")]
        if near and not hint:
            hint = f"; abbreviations are not allowed, did you mean {', '.join(sorted(near)[:3])}?"
        yield p.recipe_problem(
            [*FLAGS, key], f"--{name} is not accepted by {frontend(p).titles[worker]} "
            f"(flag table {table.name}){hint}", "remove or rename the flag")
    front = set(table.entrypoints.get(api, [])) if api else set()
    if front:
        for key in (p.recipe.frontend.args or {}):
            if f"--{canonical(key)}" not in front:
                yield p.recipe_problem(
                    ["frontend", "args", key], f"--{canonical(key)} is not accepted by "
                    f"{frontend(p).titles[api]} (flag table {table.name})", "remove or rename it")


def headless_entrypoint(p: Profile) -> Iterator[Problem]:
    """Catches a layout with a headless TP follower while the cluster starts vLLM as `python -m
    vllm.entrypoints.openai.api_server`, which ignores `--headless` (seen on H200s: the follower starts its own
    engine and dies).

    vLLM's own words for it: "collective_rpc should not be called on follower node"."""
    if not frontend(p).worker_is_vllm_serve or not any(r.mode == "headless" for r in p.topology.roles):
        return
    argv = p.cluster.runtime.vllm_serve
    if any("entrypoints.openai.api_server" in a for a in argv):
        yield p.layers.profile_origins.problem(
            ["cluster"], f"this layout has a headless follower, but cluster {p.cluster.name} starts vLLM as "
            f"{' '.join(argv)}, which ignores --headless (the follower starts its own engine and dies)",
            f"set runtime.vllm_serve of {p.cluster.name} to the CLI, e.g. [vllm, serve]")


OBJECT_FLAGS = ("scheduler-cls", "worker-cls", "worker-extension-cls")


def object_flags(p: Profile) -> Iterator[Problem]:
    """Catches `scheduler-cls`, `worker-cls`, `worker-extension-cls` given as a bare class name (vLLM resolves them by
    qualified name: the seed's `AsyncScheduler` parsed, then killed the engine); preflight also imports them on
    the nodes."""
    for name in OBJECT_FLAGS:
        value = p.flags.value(name)
        if isinstance(value, str) and value not in ("", "auto") and "." not in value:
            yield p.recipe_problem(
                p.flag_path(name), f"--{name} {value!r} is not a dotted path: vLLM resolves it by "
                "qualified name and the engine dies at start-up",
                f"write the full path, e.g. vllm.v1.core.sched.async_scheduler.{value}"
                if name == "scheduler-cls" else "write the full dotted path")
