"""Frontends: what serves a deployment's API in front of its vLLM engines, one class each, found by name through
the ``rackbench.frontends`` entry-point group (rackbench's own ``vllm`` and ``dynamo`` are registered the same
way), as srt-slurm keeps one module per frontend. A recipe's ``frontend.type`` names one.

A frontend owns everything that differs between them: the processes of a plan beside the workers (Dynamo's
frontend, etcd and NATS), the worker's entrypoint and its per-node arguments, the preamble steps (the Dynamo
install), the environment (Dynamo's discovery), readiness and the version its running processes report, and the
entrypoints and components the flag tables and preflight check. :class:`~rackbench.server.frontends.base.Frontend`
is the interface.
"""

from __future__ import annotations

from rackbench.core import entry_points
from rackbench.server.frontends.base import Frontend


def of(name: str) -> Frontend:
    """The frontend registered as ``name``; LookupError (one line, the known names) if none is."""
    return entry_points.load(entry_points.FRONTENDS, name)()


def every_component() -> set[str]:
    """The frameworks any registered frontend's processes report (a pin of one is a server version)."""
    return {c for name in entry_points.names(entry_points.FRONTENDS) for c in of(name).components}


__all__ = ["Frontend", "every_component", "of"]
