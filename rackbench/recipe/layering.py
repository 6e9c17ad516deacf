"""Reading recipe files: ``extends:`` chains merged overlay onto base, parsed into the strict schemas of
:mod:`rackbench.recipe.schema` with errors that point at the file, line and key where the offending value was written.

Nothing here knows what a flag means; :mod:`rackbench.recipe.profile` builds the typed views from what this returns.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, ValidationError

from rackbench.core import yamlio
from rackbench.core.errors import ConfigError, Problem

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
            msg, fix = f"{e['msg']}: rackbench drives vLLM backends", "use backend.type: vllm"
        else:
            msg, fix = e["msg"], "give a value of the expected type and range"
        problems.append(origins.problem(loc, msg, fix))
    return problems


def parse_model(model: type[BaseModel], data: Any, origins: Origins, section: str):
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_validation_problems(err, origins, section)) from None


def parse_model_lenient(model: type[BaseModel], data: Any, origins: Origins, section: str
                        ) -> tuple[BaseModel | None, list[Problem]]:
    """The model and every schema problem of ``data``; where it does not validate, the values at fault are left
    out (their defaults stand in) so what did parse can still be judged by the rules. None when even that fails
    (a required key missing)."""
    try:
        return model.model_validate(data), []
    except ValidationError as err:
        problems, errors = _validation_problems(err, origins, section), err.errors()
    pruned = yamlio.plain(data)
    for _ in range(3):
        if not any(_prune(pruned, list(e["loc"])) for e in errors):
            return None, problems
        try:
            return model.model_validate(pruned), problems
        except ValidationError as again:
            errors = again.errors()
    return None, problems


def _prune(data: Any, loc: list) -> bool:
    """Remove the deepest existing value along ``loc``; whether anything was removed."""
    node, parents = data, []
    for key in loc:
        if isinstance(node, dict) and key in node:
            parents.append((node, key))
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            parents.append((node, key))
            node = node[key]
        else:
            break
    if not parents:
        return False
    container, key = parents[-1]
    del container[key]
    return True


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
    problems: list[Problem] = field(default_factory=list)     # the chain's files' own (duplicate keys)


def is_profile(doc: Any) -> bool:
    return isinstance(doc, dict) and "profile" in doc


def _identity(p: Path) -> str:
    """One name per file however it is spelled (``a/../b.yaml``, links): cycles are found by this."""
    try:
        return str(p.resolve()) if p.exists() else os.path.normpath(p)
    except (OSError, ValueError):         # a name too long, a NUL byte: not a file, compared as written
        return os.path.normpath(p)


def _is_file(p: Path) -> bool:
    try:
        return p.is_file()
    except (OSError, ValueError):
        return False


def resolve_layers(path: Path, docs: dict[str, Any] | None = None, _seen: tuple[str, ...] = (),
                   root: Path | None = None, file_problems: dict[str, list[Problem]] | None = None,
                   ids: dict[str, str] | None = None) -> Layered:
    """Merge a profile file onto what it extends. ``docs`` maps file names to parsed documents (tests pass
    in-memory recipes; a catalog passes one dict for all its profiles, so a shared base is read once); otherwise
    files are read from disk. ``extends:`` is a relative path that stays inside ``root`` (the catalog's recipes
    folder). Parsed documents are never modified. ``ids`` keeps each file's one name (:func:`_identity`) for the
    whole load, as ``docs`` keeps its document: resolving a path is a fifth of a catalog's load otherwise."""
    docs = {} if docs is None else docs
    file_problems = {} if file_problems is None else file_problems
    ids = {} if ids is None else ids

    def identity(p: Path) -> str:
        if str(p) not in ids:
            ids[str(p)] = _identity(p)
        return ids[str(p)]

    def read(p: Path) -> Any:
        if str(p) not in docs:
            docs[str(p)], file_problems[str(p)] = yamlio.load_lenient(p)
        return docs[str(p)]

    name = str(path)
    doc = read(path)
    if not isinstance(doc, dict):
        raise ConfigError(Problem(name, "", "a profile file must be a mapping", "see docs/recipes.md#recipes"))
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
        ext, line = doc["extends"], yamlio.line_of(doc, "extends")
        targets = ext if isinstance(ext, list) and ext else [ext]
        for target in targets:            # a list composes layers in order: each later one overlays the earlier
            base = _stack(base, _extend(path, target, line, docs, read, (*_seen, identity(path)), root,
                                        file_problems, identity, ids))
    return _stack(base, Layered(name, own_profile, own_recipe,
                                Origins([Layer(name, own_profile, ("profile",))], name),
                                Origins([Layer(name, own_recipe, ("recipe",))], name),
                                list(file_problems.get(name, []))))


def _stack(base: Layered, over: Layered) -> Layered:
    """``over`` merged onto ``base``; origins keep every layer, the later ones first to answer."""
    return Layered(over.file, deep_merge(base.profile, over.profile), deep_merge(base.recipe, over.recipe),
                   Origins([*base.profile_origins.layers, *over.profile_origins.layers], over.file),
                   Origins([*base.recipe_origins.layers, *over.recipe_origins.layers], over.file),
                   [*base.problems, *over.problems])


def _extend(path: Path, ext: Any, line: int | None, docs: dict, read, chain: tuple[str, ...], root: Path | None,
            file_problems: dict, identity, ids: dict) -> Layered:
    """One ``extends:`` target of ``path``, resolved (a profile file through its own chain, or a recipe)."""
    name = str(path)
    if not isinstance(ext, str) or not ext.strip():
        raise ConfigError(Problem(name, "extends", "must be a file name or a list of them",
                                  "give paths relative to this file", line))
    if Path(ext).is_absolute():
        raise ConfigError(Problem(name, "extends", f"{ext!r} is an absolute path: a recipe may only extend "
                                  "recipes of its own catalog", "give a path relative to this file", line))
    target = Path(os.path.normpath(path.parent / ext))
    if root is not None and not os.path.normpath(identity(target)).startswith(
            os.path.join(identity(Path(root)), "")):
        raise ConfigError(Problem(name, "extends", f"{ext!r} leaves the recipes folder {root}",
                                  "extend a recipe inside the catalog (copy the file in if needed)", line))
    if identity(target) in chain:
        names = [*chain, identity(target)]
        raise ConfigError(Problem(name, "extends", f"extends itself: {' -> '.join(Path(n).name for n in names)}",
                                  "break the cycle", line))
    if str(target) not in docs and not _is_file(target):
        raise ConfigError(Problem(name, "extends", f"{target} does not exist",
                                  "name an existing recipe next to this file", line))
    target_doc = read(target)
    if is_profile(target_doc):
        return resolve_layers(target, docs, chain, root, file_problems, ids)
    if not isinstance(target_doc, dict):
        raise ConfigError(Problem(str(target), "", "an srt-slurm recipe must be a mapping", ""))
    return Layered(str(target), {}, target_doc, Origins(fallback=name), Origins([Layer(str(target), target_doc)], name),
                   list(file_problems.get(str(target), [])))


def canonical_json(data: Any) -> str:
    return json.dumps(yamlio.plain(data), sort_keys=True, separators=(",", ":"), default=str)


def parse_file(model: type[BaseModel], path: Path, section: str):
    """One YAML file parsed into ``model``; problems name the file and line."""
    data = yamlio.load(path)
    return parse_model(model, data, Origins([Layer(str(path), data)], str(path)), section)
