"""Load profiles: overlays merged onto a shared srt-slurm base, validated, with errors that point
at the file and key where the offending value was written."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, ValidationError

from . import yamlio
from .errors import ConfigError, Problem
from .profile import ClusterSpec, ProfileSection
from .srt_schema import SrtRecipe

PROFILE_KEYS = ("extends", "profile", "recipe")


def deep_merge(base: Any, overlay: Any) -> Any:
    """Mappings merge key by key; anything else (lists, scalars, null) in the overlay replaces."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        out = dict(base)
        for key, value in overlay.items():
            out[key] = deep_merge(base.get(key), value) if key in base else value
        return out
    return overlay


@dataclass(frozen=True)
class Layer:
    """One file's contribution: its mapping, and the key prefix under which it holds the section."""

    file: str
    data: dict
    prefix: tuple[str, ...] = ()


@dataclass
class Origins:
    """Answers "which file, key and line wrote this value?" for a merged section."""

    layers: list[Layer] = field(default_factory=list)
    fallback: str = ""

    def locate(self, path: Iterable[Any]) -> tuple[str, str, int | None]:
        path = [str(p) for p in path]
        for layer in reversed(self.layers):
            node: Any = layer.data
            line = None
            for i, key in enumerate(path):
                if not isinstance(node, dict) or key not in node:
                    break
                line = yamlio.line_of(node, key)
                node = node[key]
            else:
                return layer.file, ".".join((*layer.prefix, *path)), line
        # Not written anywhere (a missing key): blame the deepest layer that has the parent.
        for depth in range(len(path) - 1, -1, -1):
            for layer in reversed(self.layers):
                node = layer.data
                ok = True
                for key in path[:depth]:
                    if not isinstance(node, dict) or key not in node:
                        ok = False
                        break
                    node = node[key]
                if ok and isinstance(node, dict):
                    return layer.file, ".".join((*layer.prefix, *path)), None
        return self.fallback, ".".join(path), None

    def problem(self, path: Iterable[Any], message: str, fix: str = "") -> Problem:
        file, key, line = self.locate(path)
        return Problem(file, key, message, fix, line)


def _validation_problems(err: ValidationError, origins: Origins, section: str) -> list[Problem]:
    problems = []
    for e in err.errors():
        loc = list(e["loc"])
        kind = e["type"]
        if kind == "extra_forbidden":
            msg, fix = f"unknown key in {section}", "remove it or correct its spelling"
        elif kind == "missing":
            msg, fix = "required key is missing", f"add it to the {section} section"
        elif kind == "literal_error" and loc[-1:] == ["type"] and loc[:1] == ["backend"]:
            msg, fix = f"{e['msg']}: servebench drives vLLM backends", "use backend.type: vllm"
        else:
            msg, fix = e["msg"], "give a value of the expected type and range"
        problems.append(origins.problem(loc, msg, fix))
    return problems


def parse_model(model: type[BaseModel], data: Any, origins: Origins, section: str):
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_validation_problems(err, origins, section)) from None


def load_cluster(path: Path) -> ClusterSpec:
    data = yamlio.load(path)
    return parse_model(ClusterSpec, data, Origins([Layer(str(path), data)], str(path)), "cluster description")


def load_named(folder: Path, loader, problems: list[Problem]) -> dict:
    """Every ``<name>.yaml`` in ``folder`` parsed by ``loader``; problems (incl. a name that differs from the
    file name) are appended to ``problems``."""
    out = {}
    for path in sorted(Path(folder).glob("*.yaml")):
        try:
            spec = loader(path)
        except ConfigError as err:
            problems += err.problems
            continue
        if spec.name != path.stem:
            problems.append(Problem(str(path), "name", f"{spec.name!r} differs from the file name",
                                    f"name it {path.stem!r} or rename the file"))
        out[spec.name] = spec
    return out


@dataclass
class Layered:
    """A profile file resolved through its ``extends`` chain."""

    file: str
    profile: dict
    recipe: dict
    profile_origins: Origins
    recipe_origins: Origins


def _is_profile(doc: Any) -> bool:
    return isinstance(doc, dict) and "profile" in doc


def resolve_layers(path: Path, docs: dict[str, Any] | None = None, _seen: tuple[str, ...] = ()) -> Layered:
    """Merge a profile file onto what it extends. ``docs`` maps file names to parsed documents
    (tests pass in-memory recipes); otherwise files are read from disk."""
    docs = dict(docs or {})

    def read(p: Path) -> Any:
        if str(p) not in docs:
            docs[str(p)] = yamlio.load(p)
        return docs[str(p)]

    name = str(path)
    if name in _seen:
        raise ConfigError(Problem(name, "extends", f"extends itself through {' -> '.join(_seen)}",
                                  "break the cycle"))
    doc = read(path)
    if not isinstance(doc, dict):
        raise ConfigError(Problem(name, "", "a profile file must be a mapping", "see README: Recipes"))
    unknown = [k for k in doc if k not in PROFILE_KEYS]
    if unknown:
        raise ConfigError([Problem(name, k, "unknown top-level key in a profile file",
                                   f"use only {', '.join(PROFILE_KEYS)}; srt-slurm keys go under 'recipe:'",
                                   yamlio.line_of(doc, k)) for k in unknown])
    for key in ("profile", "recipe"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise ConfigError(Problem(name, key, "must be a mapping", "indent its keys under it",
                                      yamlio.line_of(doc, key)))
    own_profile, own_recipe = doc.get("profile") or {}, doc.get("recipe") or {}
    base = Layered(name, {}, {}, Origins(fallback=name), Origins(fallback=name))
    if doc.get("extends") is not None:
        ext = doc["extends"]
        if not isinstance(ext, str):
            raise ConfigError(Problem(name, "extends", "must be a file name", "give a path relative to this file"))
        target = path.parent / ext
        if str(target) not in docs and not target.is_file():
            raise ConfigError(Problem(name, "extends", f"{target} does not exist",
                                      "name an existing recipe next to this file", yamlio.line_of(doc, "extends")))
        target_doc = read(target)
        if _is_profile(target_doc):
            base = resolve_layers(target, docs, (*_seen, name))
        else:
            if not isinstance(target_doc, dict):
                raise ConfigError(Problem(str(target), "", "an srt-slurm recipe must be a mapping", ""))
            base = Layered(str(target), {}, target_doc, Origins(fallback=name),
                           Origins([Layer(str(target), target_doc)], name))
    return Layered(
        file=name,
        profile=deep_merge(base.profile, own_profile),
        recipe=deep_merge(base.recipe, own_recipe),
        profile_origins=Origins([*base.profile_origins.layers, Layer(name, own_profile, ("profile",))], name),
        recipe_origins=Origins([*base.recipe_origins.layers, Layer(name, own_recipe, ("recipe",))], name),
    )


def canonical_json(data: Any) -> str:
    return json.dumps(yamlio.plain(data), sort_keys=True, separators=(",", ":"), default=str)


@dataclass
class Profile:
    """One validated sweep profile: its effective srt-slurm recipe, its sweep section and cluster."""

    file: str
    spec: ProfileSection
    recipe: SrtRecipe
    cluster: ClusterSpec
    raw_profile: dict
    raw_recipe: dict
    layers: Layered
    model_spec: Any = None        # servebench.capacity.ModelSpec from recipes/models/<model>.yaml, if any

    @property
    def id(self) -> str:
        return f"{self.spec.model}-{self.cluster.gpu_type}-{self.spec.name}"

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def offload(self) -> bool:
        return self.spec.labels.kv_offloading != "none"

    @property
    def fingerprint(self) -> str:
        """sha256 over everything that defines the deployment and the load, except the concurrency.
        Computed on the parsed models, so spelling out a default does not change it."""
        prof = self.spec.model_dump(mode="json", by_alias=True, exclude={"concurrency", "description"})
        body = canonical_json({"profile": prof, "recipe": self.recipe.model_dump(mode="json"),
                               "cluster": self.cluster.model_dump(mode="json")})
        return hashlib.sha256(body.encode()).hexdigest()

    def case_id(self, concurrency: int) -> str:
        return f"{self.id}-c{concurrency}"

    def effective(self) -> dict:
        """What ``servebench recipe`` prints: the sweep section and the srt-slurm recipe."""
        return {"profile": self.spec.model_dump(mode="json", by_alias=True),
                "recipe": yamlio.plain(self.raw_recipe)}


def build_profile(layers: Layered, clusters: dict[str, ClusterSpec], models: dict | None = None,
                  skip_rules: Iterable[str] = ()) -> Profile:
    """Parse and validate one resolved profile; raises ConfigError with every problem found."""
    from .rules import check_profile  # rules need Profile; import here to keep the module order simple

    problems: list[Problem] = []
    spec = recipe = None
    try:
        spec = parse_model(ProfileSection, layers.profile, layers.profile_origins, "profile")
    except ConfigError as err:
        problems += err.problems
    try:
        recipe = parse_model(SrtRecipe, layers.recipe, layers.recipe_origins, "srt-slurm recipe")
    except ConfigError as err:
        problems += err.problems
    if spec is not None and spec.cluster not in clusters:
        problems.append(layers.profile_origins.problem(
            ["cluster"], f"unknown cluster {spec.cluster!r}",
            f"use one of {sorted(clusters)} or add recipes/clusters/{spec.cluster}.yaml"))
    if problems:
        raise ConfigError(problems)
    profile = Profile(layers.file, spec, recipe, clusters[spec.cluster], layers.profile, layers.recipe, layers,
                      (models or {}).get(spec.model))
    problems = list(check_profile(profile, skip=skip_rules))
    if problems:
        raise ConfigError(problems)
    return profile


@dataclass
class Catalog:
    """Every cluster and profile under a recipes directory."""

    root: Path
    clusters: dict[str, ClusterSpec]
    profiles: list[Profile]
    base_recipes: list[str]
    models: dict = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path | str, skip_rules: Iterable[str] = ()) -> "Catalog":
        """Every cluster, model and profile under ``root``; ``skip_rules`` names rules not to apply."""
        from .capacity import load_model

        root = Path(root)
        if not root.is_dir():
            raise ConfigError(Problem(str(root), "", "recipes directory not found",
                                      "run from the repo root or pass --recipes DIR"))
        problems: list[Problem] = []
        clusters = load_named(root / "clusters", load_cluster, problems)
        models = load_named(root / "models", load_model, problems)
        profiles: list[Profile] = []
        bases: list[str] = []
        for path in sorted(root.rglob("*.yaml")):
            rel = path.relative_to(root).parts
            if rel[0] in ("clusters", "models") or path.name.startswith("_"):
                continue  # cluster/model descriptions; "_" files are partial layers used via extends
            try:
                doc = yamlio.load(path)
                if not _is_profile(doc):
                    # A shared base: on its own it must still be a valid srt-slurm recipe.
                    parse_model(SrtRecipe, doc, Origins([Layer(str(path), doc)], str(path)), "srt-slurm recipe")
                    bases.append(str(path))
                    continue
                profiles.append(build_profile(resolve_layers(path), clusters, models, skip_rules))
            except ConfigError as err:
                problems += err.problems
        seen: dict[str, str] = {}
        for prof in profiles:
            if prof.id in seen:
                problems.append(Problem(prof.file, "profile.name", f"profile id {prof.id} also defined in "
                                        f"{seen[prof.id]}", "give each profile a unique name"))
            seen[prof.id] = prof.file
        if problems:
            # A broken shared base breaks every profile on it: say it once.
            raise ConfigError(list(dict.fromkeys(problems)))
        return cls(root, clusters, profiles, bases, models)

    def find(self, key: str) -> list[Profile]:
        """Profiles matching a profile id, a profile name, a case id, or a file path."""
        out = [p for p in self.profiles if key in (p.id, p.name, p.file) or Path(p.file).resolve() == Path(key).resolve()]
        if not out:
            out = [p for p in self.profiles if any(key == p.case_id(c) for c in p.spec.concurrency)]
        return out
