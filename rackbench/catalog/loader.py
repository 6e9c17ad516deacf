"""The recipe catalog: every cluster, model and profile under a recipes folder, loaded and validated.

A broken file never hides the others: every problem of the catalog is collected and raised together, one line
each (file, line, key path, fix).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from rackbench.catalog.clusters import load_clusters
from rackbench.catalog.rankings import FOLDER as RANKINGS, Ranking, load_rankings
from rackbench.core import yamlio
from rackbench.core.errors import ConfigError, Problem
from rackbench.recipe.layering import (Layer, Layered, Origins, is_profile, load_named, parse_file,
                                        parse_model_lenient, resolve_layers)
from rackbench.recipe.profile import Profile
from rackbench.catalog.rules import check_profile
from rackbench.recipe.schema.compat import EXTENSIONS, CatalogSpec, extension_fields, out_of_scope
from rackbench.recipe.schema.model import ModelSpec
from rackbench.recipe.schema.srt import SrtRecipe
from rackbench.recipe.schema.cluster import ClusterSpec
from rackbench.recipe.schema.sweep import ProfileSection


CATALOG_FILE = "catalog.yaml"     # which srt-slurm release (and fork fields) the catalog's recipes follow


def load_model(path: Path) -> ModelSpec:
    return parse_file(ModelSpec, path, "model description")


def load_models(root: Path) -> dict[str, ModelSpec]:
    """Every model description in ``<root>/models``; ConfigError with all problems."""
    problems: list[Problem] = []
    out = load_named(Path(root) / "models", load_model, problems)
    if problems:
        raise ConfigError(problems)
    return out


def srt_problems(recipe: dict, origins: Origins, declared: CatalogSpec) -> list[Problem]:
    """A recipe rackbench does not run (one line), or fields of a fork the catalog does not declare."""
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
    skipped: dict[str, str] = field(default_factory=dict)      # recipe file -> why rackbench does not run it
    declared: CatalogSpec = CatalogSpec()
    rankings: list[Ranking] = field(default_factory=list)

    @classmethod
    def load(cls, root: Path | str, skip_rules: Iterable[str] = ()) -> "Catalog":
        """Every cluster, model and profile under ``root``; ``skip_rules`` names rules not to apply. ConfigError
        with every problem of the catalog if it has any."""
        cat, problems = cls.read(root, skip_rules)
        if problems:
            raise ConfigError(problems)
        return cat

    @classmethod
    def read(cls, root: Path | str, skip_rules: Iterable[str] = ()) -> tuple["Catalog", list[Problem]]:
        """What loads under ``root`` and every problem of the rest, in one pass: the profiles that are valid are
        there, so what is checked after loading (the launch plans) is checked for them in the same pass."""
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
        partial: dict[str, ClusterSpec] = {}
        clusters = load_clusters(root, problems, partial)
        broken = frozenset(p.stem for p in (root / "clusters").glob("*.yaml")) - set(clusters) - set(partial)
        models = load_named(root / "models", load_model, problems)
        profiles: list[Profile] = []
        bases: list[str] = []
        skipped: dict[str, str] = {}
        docs: dict = {}        # every file parsed once: a base many profiles extend is read a single time
        ids: dict = {}         # and resolved to its one name once
        file_problems: dict[str, list[Problem]] = {}
        for path in sorted(root.rglob("*.yaml")):
            rel = path.relative_to(root).parts
            if rel[0] in ("clusters", "models", "presets", RANKINGS) or path.name.startswith("_") or rel == (CATALOG_FILE,):
                continue  # cluster/model descriptions; presets and "_" files are partial layers used via extends
            try:
                if str(path) not in docs:
                    docs[str(path)], file_problems[str(path)] = yamlio.load_lenient(path)
                doc = docs[str(path)]
                if not is_profile(doc):
                    # A shared base: on its own it must still be a valid srt-slurm recipe (of a kind rackbench
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
                profiles.append(build_profile(layered, {**partial, **clusters}, models, skip_rules, declared, broken))
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
                                    "clusters/, models/, presets/, rankings/ and _-prefixed layers)",
                                    "give --recipes the folder with your recipes (default: recipes/ of the "
                                    "checkout), or add a recipe with a profile: section"))
        # A broken shared base breaks every profile on it: said once. A profile on a cluster whose file is broken
        # is left out (it was checked against what of that file parsed).
        valid = [p for p in profiles if p.cluster.name in clusters]
        rankings = load_rankings(root, valid, problems)
        return (cls(root, clusters, valid, bases, models, skipped, declared, rankings),
                list(dict.fromkeys(problems)))

    def notes(self) -> list[str]:
        """What the catalog holds but rackbench does not run, and flags judged by another version's table."""
        from rackbench.catalog.flag_rules import table_for, unknown_flags
        from rackbench.catalog.load_rules import harness_notes
        from rackbench.recipe.schema.compat import unsupported_features

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

    def ranking(self, name: str) -> Ranking | None:
        return next((r for r in self.rankings if r.name == name), None)

    def find(self, key: str) -> list[Profile]:
        """Profiles matching a profile id, a profile name, a case id, or a file path."""
        out = [p for p in self.profiles if key in (p.id, p.name, p.file) or Path(p.file).resolve() == Path(key).resolve()]
        if not out:
            out = [p for p in self.profiles if any(key == p.case_id(c) for c in p.spec.concurrency)]
        return out


# What the loader refuses before any rule runs (a profile that fails these is never built): name -> (what it
# catches, where the check lives). The docs' rule table lists these, then catalog.rules.RULES (`rackbench docs`).
LOAD_CHECKS: dict[str, tuple[str, str]] = {
    'strict YAML': (
        'duplicate keys anywhere (PyYAML would silently keep the last: a dropped flag)',
        'rackbench.core.yamlio'),
    'schema': (
        'unknown keys and wrong types in every srt-slurm section and in `profile:`',
        'rackbench.recipe.schema'),
    'bounds': (
        'numbers outside sane bounds: health-check attempts (≤ 100,000) and interval, durations (≤ 7 days), '
        'sessions, turns, words, nodes and GPUs, concurrency (≤ 65,536), NaN/inf anywhere in a model '
        'description',
        'rackbench.recipe.schema'),
    'YAML limits': (
        'aliases that expand a document past 100,000 values (an alias bomb), keys that are lists or mappings, '
        'nesting too deep; merge keys (`<<: *defaults` then an override) are accepted',
        'rackbench.core.yamlio'),
    'extends': (
        'an absolute path, a path leaving the recipes folder, a cycle however it is spelled '
        '(`../gb200/tp.yaml`); the error names the `extends:` line',
        'rackbench.recipe.layering'),
    'cluster placeholders': (
        'a `${VAR}`, `$VAR` or `{name}` in a cluster file\'s environment values or its path-valued keys (interpreters, '
        'model paths, mounts, the client\'s cache and folders): nothing expands them, so the nodes would get them '
        'verbatim',
        'rackbench.catalog.clusters.path_placeholder_problems'),
}
