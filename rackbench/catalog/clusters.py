"""Cluster files: each parsed against ClusterSpec, its backend and options checked, no placeholder in a value that
reaches a process or names a path, the client's install pinned. A file with problems still gives what of it parsed
(BrokenCluster.spec), so that its profiles' rules are checked in the same pass."""

from __future__ import annotations

import difflib
from pathlib import Path

from rackbench.core import entry_points, yamlio
from rackbench.core.errors import ConfigError, Problem
from rackbench.recipe.layering import Layer, Origins, load_named, parse_file, parse_model_lenient
from rackbench.recipe.placeholders import placeholders, who_expands
from rackbench.recipe.schema.cluster import ClusterSpec
from rackbench.tools import PINS


class BrokenCluster(ConfigError):
    """A cluster file's problems, with what of it still parsed (``spec``: the values at fault left out, None when
    even that fails): its profiles' own rules are still checked against it, in the same pass."""

    def __init__(self, problems: list[Problem], spec: ClusterSpec | None):
        super().__init__(problems)
        self.spec = spec


def load_cluster(path: Path) -> ClusterSpec:
    """One cluster description; its backend must be registered (rackbench.core.entry_points), and no value it adds
    to a process's environment may hold a placeholder (nothing fills one in a cluster file). A schema error does not
    hide the placeholders: both are said in one pass (BrokenCluster)."""
    data = yamlio.load(path)
    problems = []
    lenient = None
    try:
        spec = parse_file(ClusterSpec, path, "cluster description")
    except ConfigError as err:
        if not isinstance(data, dict):
            raise
        spec, problems = None, list(err.problems)
        lenient = parse_model_lenient(ClusterSpec, data, Origins([Layer(str(path), data)], str(path)),
                                      "cluster description")[0]
    if spec is not None and spec.backend not in entry_points.names(entry_points.BACKENDS):
        problems.append(Problem(str(path), "backend", f"no cluster backend {spec.backend!r} is registered (known: "
                                f"{', '.join(entry_points.names(entry_points.BACKENDS))})",
                                "name a known backend, or install the package that registers this one (entry "
                                "point group rackbench.backends)", yamlio.line_of(data, "backend")))
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
        raise BrokenCluster(problems, spec or lenient)
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
                        f"add runtime.client.constraints: one of {pins} (rackbench/tools/pins/)",
                        yamlio.line_of(where, "install"))]
    if client.constraints is not None and not (PINS / client.constraints).is_file():
        return [Problem(str(path), "runtime.client.constraints", f"no pins file {client.constraints!r} in "
                        "rackbench/tools/pins/", f"use one of {pins}, or add the file (pip freeze of the "
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


def load_clusters(root: Path, problems: list[Problem], partial: dict[str, ClusterSpec] | None = None
                  ) -> dict[str, ClusterSpec]:
    """The clusters whose files load; ``partial`` gets what still parsed of those that do not (their problems go
    in ``problems``), so that their profiles' rules are checked in the same pass."""
    def loader(path: Path) -> ClusterSpec:
        try:
            return load_cluster(path)
        except BrokenCluster as err:
            if partial is not None and err.spec is not None and err.spec.name == path.stem:
                partial[path.stem] = err.spec
            raise
    return load_named(Path(root) / "clusters", loader, problems)
