"""Seams a site extends without a fork: cluster backends, load generators and frontends are found by name through Python
entry points (as submitit finds its executors), so a package that declares

.. code-block:: toml

    [project.entry-points."rackbench.backends"]
    kubernetes = "mysite.k8s:KubernetesBackend"

    [project.entry-points."rackbench.load_generators"]
    guidellm = "mysite.guidellm:GuideLLMGenerator"

is used by a cluster file's ``backend: kubernetes`` or a profile's ``load.generator: guidellm`` (and a
``rackbench.frontends`` entry by a recipe's ``frontend.type``). rackbench's own
backends and generator are entry points too (pyproject.toml); they are also known here by name, so a copied tree
that was never pip-installed still finds them.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from importlib import metadata

BACKENDS = "rackbench.backends"
LOAD_GENERATORS = "rackbench.load_generators"
FRONTENDS = "rackbench.frontends"
BUILTIN = {
    BACKENDS: {"slurm": "rackbench.cluster.slurm:SlurmBackend", "local": "rackbench.cluster.local:LocalBackend"},
    LOAD_GENERATORS: {"aiperf": "rackbench.load.aiperf:AiperfGenerator"},
    FRONTENDS: {"vllm": "rackbench.server.frontends.vllm:VllmFrontend",
                "dynamo": "rackbench.server.frontends.dynamo:DynamoFrontend"},
}
WHAT = {BACKENDS: "cluster backend", LOAD_GENERATORS: "load generator", FRONTENDS: "frontend"}


@lru_cache(maxsize=None)
def _declared(group: str) -> dict[str, str]:
    """name -> "module:attribute" of every installed entry point of ``group``, rackbench's own first."""
    found = dict(BUILTIN[group])
    for ep in metadata.entry_points(group=group):
        found[ep.name] = ep.value
    return found


def names(group: str) -> list[str]:
    return sorted(_declared(group))


def load(group: str, name: str):
    """The class registered as ``name`` in ``group``; LookupError (one line, with the known names) if none is."""
    target = _declared(group).get(name)
    if target is None:
        raise LookupError(f"no {WHAT[group]} {name!r} (known: {', '.join(names(group))}); a site adds one with an "
                          f"entry point in the {group!r} group")
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def refresh() -> None:
    """Forget what was found (a test that installs a package of entry points calls this)."""
    _declared.cache_clear()
