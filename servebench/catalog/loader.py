"""The recipe catalog: every cluster, model and profile under a recipes folder, loaded and validated.

A broken file never hides the others: every problem of the catalog is collected and raised together, one line
each (file, line, key path, fix).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from servebench.core import entry_points, yamlio
from servebench.core.errors import ConfigError, Problem
from servebench.recipe.layering import (Layer, Layered, Origins, is_profile, load_named, parse_file,
                                        parse_model_lenient, resolve_layers)
from servebench.recipe.placeholders import placeholders, who_expands
from servebench.recipe.profile import Profile
from servebench.catalog.rules import check_profile
from servebench.recipe.schema.compat import EXTENSIONS, CatalogSpec, extension_fields, out_of_scope
from servebench.recipe.schema.model import ModelSpec
from servebench.recipe.schema.srt import SrtRecipe
from servebench.recipe.schema.cluster import ClusterSpec
from servebench.recipe.schema.sweep import ProfileSection
from servebench.tools import PINS


CATALOG_FILE = "catalog.yaml"     # which srt-slurm release (and fork fields) the catalog's recipes follow


def load_cluster(path: Path) -> ClusterSpec:
    """One cluster description; its backend must be registered (servebench.core.entry_points), and no value it adds
    to a process's environment may hold a placeholder (nothing fills one in a cluster file). A schema error does not
    hide the placeholders: both are said in one pass."""
    data = yamlio.load(path)
    problems = []
    try:
        spec = parse_file(ClusterSpec, path, "cluster description")
    except ConfigError as err:
        if not isinstance(data, dict):
            raise
        spec, problems = None, list(err.problems)
    if spec is not None and spec.backend not in entry_points.names(entry_points.BACKENDS):
        problems.append(Problem(str(path), "backend", f"no cluster backend {spec.backend!r} is registered (known: "
                                f"{', '.join(entry_points.names(entry_points.BACKENDS))})",
                                "name a known backend, or install the package that registers this one (entry "
                                "point group servebench.backends)", yamlio.line_of(data, "backend")))
    elif spec is not None:
        problems += backend_option_problems(path, data, spec)
    runtime = data.get("runtime") if isinstance(data.get("runtime"), dict) else {}
    env = runtime.get("environment")
    envs = [("runtime.environment", env if isinstance(env, dict) else {})]
    envs += [(f"runtime.node_environment[{i}]", e) for i, e in enumerate(runtime.get("node_environment") or [])
             if isinstance(e, dict)]
    for where, env in envs:
        for key, value in env.items():
            found = placeholders(value) if isinstance(value, str) else []
            if found:
                problems.append(Problem(str(path), f"{where}.{key}", f"literal placeholder {', '.join(found)} in "
                                        f"{value!r}: "
                                        f"{who_expands(found)}; a cluster file's values reach every process as written",
                                        "write the value itself (an interface set to null is detected on each node)",
                                        yamlio.line_of(env, key)))
    problems += path_placeholder_problems(path, data)
    if spec is not None:
        problems += client_env_problems(path, data, spec)
    if problems:
        raise ConfigError(problems)
    assert spec is not None
    return spec


def client_env_problems(path: Path, data: dict, spec: ClusterSpec) -> list[Problem]:
    """runtime.client.install is made into one environment with every version pinned: it needs its pins file."""
    client = spec.runtime.client
    where = ((data.get("runtime") or {}).get("client") or {})
    pins = sorted(p.name for p in PINS.glob("*.txt"))
    if client.install and client.constraints is None:
        return [Problem(str(path), "runtime.client.install", "an install without pins resolves its dependencies "
                        "afresh (~50 of AIPerf's) wherever the environment is made",
                        f"add runtime.client.constraints: one of {pins} (servebench/tools/pins/)",
                        yamlio.line_of(where, "install"))]
    if client.constraints is not None and not (PINS / client.constraints).is_file():
        return [Problem(str(path), "runtime.client.constraints", f"no pins file {client.constraints!r} in "
                        "servebench/tools/pins/", f"use one of {pins}, or add the file (pip freeze of the "
                        "environment the generator ran with)", yamlio.line_of(where, "constraints"))]
    return []


# A cluster file's path-valued keys: each reaches a node as one literal argument (never through a shell), so a
# placeholder in one names a path that does not exist. slurm.node_local's values take {node} (the backend fills it).
PATH_KEYS = ("runtime.python", "runtime.vllm_serve", "runtime.model_paths", "runtime.container_model_dir",
             "runtime.container_mounts", "runtime.infra.image", "runtime.infra.etcd", "runtime.infra.nats_server",
             "runtime.client.python", "runtime.client.executable", "runtime.client.cache", "runtime.client.tmpdir",
             "runtime.client.image", "slurm.node_local", "slurm.images")
FILLED = {"slurm.node_local": ("{node}",)}


def path_placeholder_problems(path: Path, data: dict) -> list[Problem]:
    """A placeholder (``${SCRATCH}``, ``$HOME``, ``{user}``) in any path-valued key of a cluster file: nothing
    expands it, so a cache, mount, model or interpreter path would be taken literally on the nodes."""
    problems = []
    for dotted in PATH_KEYS:
        node: object = data
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or leaf not in node:
            continue
        value = node[leaf]
        items = [(f"{dotted}.{k}", t) for k, v in value.items() for t in (k, v)] if isinstance(value, dict) else \
            [(f"{dotted}[{i}]", v) for i, v in enumerate(value)] if isinstance(value, list) else [(dotted, value)]
        for where, text in items:
            found = [ph for ph in placeholders(text) if ph not in FILLED.get(dotted, ())] \
                if isinstance(text, str) else []
            if found:
                problems.append(Problem(str(path), where, f"literal placeholder {', '.join(found)} in {text!r}: "
                                        f"{who_expands(found)}; a cluster file's paths reach the nodes as written",
                                        "write the path itself", yamlio.line_of(node, leaf)))
    return problems


def backend_option_problems(path: Path, data: dict, spec: ClusterSpec) -> list[Problem]:
    """``backend_options`` checked against the backend's own model (``Backend.options``): a key it does not read
    (``partiton:``) is refused with the keys it does, never kept silently."""
    from pydantic import ValidationError

    model = getattr(entry_points.load(entry_points.BACKENDS, spec.backend), "options", None)
    given, written = spec.backend_options, data.get("backend_options") or {}
    known = list(model.model_fields) if model is not None else []
    if model is None:
        return [Problem(str(path), f"backend_options.{key}", f"backend {spec.backend!r} reads no backend_options",
                        "remove it (the cluster file's own keys set partition, account, runtime, ...)",
                        yamlio.line_of(written, key)) for key in given]
    try:
        model.model_validate(given)
    except ValidationError as err:
        out = []
        for e in err.errors():
            key = ".".join(str(part) for part in e["loc"])
            near = difflib.get_close_matches(str(e["loc"][0]), known, n=1)
            fix = f"did you mean {near[0]}?" if near and e["type"] == "extra_forbidden" else \
                f"backend {spec.backend!r} reads: {', '.join(known) or 'nothing'}"
            out.append(Problem(str(path), f"backend_options.{key}", e["msg"], fix,
                               yamlio.line_of(written, str(e["loc"][0]))))
        return out
    return []


def load_model(path: Path) -> ModelSpec:
    return parse_file(ModelSpec, path, "model description")


def load_models(root: Path) -> dict[str, ModelSpec]:
    """Every model description in ``<root>/models``; ConfigError with all problems."""
    problems: list[Problem] = []
    out = load_named(Path(root) / "models", load_model, problems)
    if problems:
        raise ConfigError(problems)
    return out


def load_clusters(root: Path, problems: list[Problem]) -> dict[str, ClusterSpec]:
    return load_named(Path(root) / "clusters", load_cluster, problems)


def srt_problems(recipe: dict, origins: Origins, declared: CatalogSpec) -> list[Problem]:
    """A recipe servebench does not run (one line), or fields of a fork the catalog does not declare."""
    scope = out_of_scope(recipe)
    if scope is not None:
        return [origins.problem(scope[0], scope[1], "extend a vLLM aggregated recipe instead")]
    return [origins.problem(dotted.split("."), f"{dotted} is not an srt-slurm {declared.srt_slurm} field (srtctl "
                            f"{declared.srt_slurm} refuses the recipe); it comes from {EXTENSIONS[dotted]}",
                            f"remove it, or declare `extensions: [{dotted}]` in the catalog's catalog.yaml")
            for dotted in extension_fields(recipe) if dotted not in declared.extensions]


def build_profile(layers: Layered, clusters: dict[str, ClusterSpec], models: dict | None = None,
                  skip_rules: Iterable[str] = (), declared: CatalogSpec = CatalogSpec(),
                  broken: frozenset[str] = frozenset()) -> Profile:
    """Parse and validate one resolved profile; ConfigError with every problem found, in one pass: the YAML
    problems of its files (duplicate keys), the schema's (the values at fault are left out so the rest still
    parses) and every rule's on what parsed."""
    scope = srt_problems(layers.recipe, layers.recipe_origins, declared)
    if scope and out_of_scope(layers.recipe):
        raise ConfigError(scope)
    problems: list[Problem] = [*layers.problems, *scope]
    spec, found = parse_model_lenient(ProfileSection, layers.profile, layers.profile_origins, "profile")
    problems += found
    recipe, found = parse_model_lenient(SrtRecipe, layers.recipe, layers.recipe_origins, "srt-slurm recipe")
    problems += found
    if spec is not None and spec.cluster in broken:
        pass                                   # the cluster file's own problems are listed; nothing more to say
    elif spec is not None and spec.cluster not in clusters:
        problems.append(layers.profile_origins.problem(
            ["cluster"], f"unknown cluster {spec.cluster!r}",
            f"use one of {sorted(clusters)} or add recipes/clusters/{spec.cluster}.yaml"))
    elif spec is not None and recipe is not None:
        profile = Profile(layers.file, spec, recipe, clusters[spec.cluster], layers, (models or {}).get(spec.model))
        problems += check_profile(profile, skip=skip_rules)
        if not problems:
            return profile
    raise ConfigError(list(dict.fromkeys(problems)))


@dataclass
class Catalog:
    """Every cluster and profile under a recipes directory."""

    root: Path
    clusters: dict[str, ClusterSpec]
    profiles: list[Profile]
    base_recipes: list[str]
    models: dict = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)      # recipe file -> why servebench does not run it
    declared: CatalogSpec = CatalogSpec()

    @classmethod
    def load(cls, root: Path | str, skip_rules: Iterable[str] = ()) -> "Catalog":
        """Every cluster, model and profile under ``root``; ``skip_rules`` names rules not to apply."""
        root = Path(root)
        if not root.is_dir():
            raise ConfigError(Problem(str(root), "", "recipes directory not found",
                                      "run from the repo root or pass --recipes DIR"))
        problems: list[Problem] = []
        declared = CatalogSpec()
        if (root / CATALOG_FILE).is_file():
            try:
                declared = parse_file(CatalogSpec, root / CATALOG_FILE, "catalog declaration")
            except ConfigError as err:
                problems += err.problems
        clusters = load_clusters(root, problems)
        broken = frozenset(p.stem for p in (root / "clusters").glob("*.yaml")) - set(clusters)
        models = load_named(root / "models", load_model, problems)
        profiles: list[Profile] = []
        bases: list[str] = []
        skipped: dict[str, str] = {}
        docs: dict = {}        # every file parsed once: a base many profiles extend is read a single time
        ids: dict = {}         # and resolved to its one name once
        file_problems: dict[str, list[Problem]] = {}
        for path in sorted(root.rglob("*.yaml")):
            rel = path.relative_to(root).parts
            if rel[0] in ("clusters", "models", "presets") or path.name.startswith("_") or rel == (CATALOG_FILE,):
                continue  # cluster/model descriptions; presets and "_" files are partial layers used via extends
            try:
                if str(path) not in docs:
                    docs[str(path)], file_problems[str(path)] = yamlio.load_lenient(path)
                doc = docs[str(path)]
                if not is_profile(doc):
                    # A shared base: on its own it must still be a valid srt-slurm recipe (of a kind servebench
                    # runs; another kind is set aside with one line, unless a profile extends it).
                    scope = out_of_scope(doc)
                    if scope is not None:
                        skipped[str(path)] = scope[1]
                        continue
                    origins = Origins([Layer(str(path), doc)], str(path))
                    problems += file_problems.get(str(path), []) + srt_problems(doc, origins, declared)
                    problems += parse_model_lenient(SrtRecipe, doc, origins, "srt-slurm recipe")[1]
                    bases.append(str(path))
                    continue
                layered = resolve_layers(path, docs, root=root, file_problems=file_problems, ids=ids)
                profiles.append(build_profile(layered, clusters, models, skip_rules, declared, broken))
            except ConfigError as err:
                problems += err.problems
        seen: dict[str, str] = {}
        for prof in profiles:
            if prof.id in seen:
                problems.append(Problem(prof.file, "profile.name", f"profile id {prof.id} also defined in "
                                        f"{seen[prof.id]}", "give each profile a unique name"))
            seen[prof.id] = prof.file
        if not profiles and not skipped and not problems:
            problems.append(Problem(str(root), "", "no profile in this recipes folder (no recipe file outside "
                                    "clusters/, models/, presets/ and _-prefixed layers)",
                                    "give --recipes the folder with your recipes (default: recipes/ of the "
                                    "checkout), or add a recipe with a profile: section"))
        if problems:
            # A broken shared base breaks every profile on it: say it once.
            raise ConfigError(list(dict.fromkeys(problems)))
        return cls(root, clusters, profiles, bases, models, skipped, declared)

    def notes(self) -> list[str]:
        """What the catalog holds but servebench does not run, and flags judged by another version's table."""
        from servebench.catalog.flag_rules import table_for, unknown_flags
        from servebench.catalog.load_rules import harness_notes
        from servebench.recipe.schema.compat import unsupported_features

        out = [f"{file}: not run: {why}" for file, why in sorted(self.skipped.items())]
        for prof in self.profiles:
            out += [f"{prof.id}: {note}" for note in unsupported_features(prof.layers.recipe)]
            note = table_for(prof)[1]
            if note:
                out.append(f"{prof.id}: {note}")
            out += [f"{prof.id}: not checked: {msg}" for msg in unknown_flags(prof)]
            out += [f"{prof.id}: rule {rule} waived: {why}" for rule, why in prof.spec.waive.items()]
            out += [f"{prof.id}: {note}" for note in harness_notes(prof)]
        return out

    def find(self, key: str) -> list[Profile]:
        """Profiles matching a profile id, a profile name, a case id, or a file path."""
        out = [p for p in self.profiles if key in (p.id, p.name, p.file) or Path(p.file).resolve() == Path(key).resolve()]
        if not out:
            out = [p for p in self.profiles if any(key == p.case_id(c) for c in p.spec.concurrency)]
        return out


# What the loader refuses before any rule runs (a profile that fails these is never built): name -> (what it
# catches, where the check lives). The docs' rule table lists these, then catalog.rules.RULES (`servebench docs`).
LOAD_CHECKS: dict[str, tuple[str, str]] = {
    'strict YAML': (
        'duplicate keys anywhere (PyYAML would silently keep the last: a dropped flag)',
        'servebench.core.yamlio'),
    'schema': (
        'unknown keys and wrong types in every srt-slurm section and in `profile:`',
        'servebench.recipe.schema'),
    'bounds': (
        'numbers outside sane bounds: health-check attempts (≤ 100,000) and interval, durations (≤ 7 days), '
        'sessions, turns, words, nodes and GPUs, concurrency (≤ 65,536), NaN/inf anywhere in a model '
        'description',
        'servebench.recipe.schema'),
    'YAML limits': (
        'aliases that expand a document past 100,000 values (an alias bomb), keys that are lists or mappings, '
        'nesting too deep; merge keys (`<<: *defaults` then an override) are accepted',
        'servebench.core.yamlio'),
    'extends': (
        'an absolute path, a path leaving the recipes folder, a cycle however it is spelled '
        '(`../gb200/tp.yaml`); the error names the `extends:` line',
        'servebench.recipe.layering'),
    'cluster placeholders': (
        'a `${VAR}`, `$VAR` or `{name}` in a cluster file\'s environment values or its path-valued keys (interpreters, '
        'model paths, mounts, the client\'s cache and folders): nothing expands them, so the nodes would get them '
        'verbatim',
        'servebench.catalog.loader.path_placeholder_problems'),
}
