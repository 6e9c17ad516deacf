"""What a plan is made of, as data and nothing else: :class:`ProcSpec` (one process of a deployment: its node,
argv, environment, container and launch preamble), :class:`WorkerLaunch` (a frontend's part of a worker) and
:class:`PlanView` (what a frontend reads of a finished plan). A leaf:
the plan (rackbench.server.plan) and every frontend (rackbench.server.frontends) build them, and it imports
neither, so no import circle runs through the frontends' entry points."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from rackbench.server.steps import Container
from rackbench.tools import preamble_command


@dataclass(frozen=True)
class ProcSpec:
    rank: int                    # node rank the process runs on
    name: str                    # etcd | nats | frontend | worker<r>
    role: str                    # infra | frontend | worker | headless
    argv: tuple[str, ...]        # the process itself (what the real parsers judge)
    env: dict[str, str | None]
    image: str | None = None     # pyxis: run in this image instead of the allocation's (etcd/NATS images)
    preamble: tuple[dict, ...] = ()          # steps run first, in the same step and container (tools/preamble.py)
    container: Container = Container()
    needs: frozenset[str] = frozenset()      # what must exist before it runs: "setup" (the setup script ran), "dynamo"
    runner: tuple[str, ...] = ()             # (interpreter, rackbench/tools) as the node sees them

    @property
    def oneshot(self) -> bool:
        return False

    @property
    def makes(self) -> frozenset[str]:
        return frozenset(step["name"] for step in self.preamble)

    @property
    def command(self) -> tuple[str, ...]:
        """What the step runs: the preamble runner with its steps, then the process (or the process alone)."""
        return tuple(preamble_command(*self.runner, self.preamble, self.argv)) if self.preamble else self.argv


@dataclass(frozen=True)
class WorkerLaunch:
    """What a frontend adds to one worker process: its argv head (entrypoint, model, name, the frontend's own
    per-node arguments), environment, and the health and metrics URLs it answers on (None: none of its own)."""

    argv: tuple[str, ...]
    env: dict[str, str]
    health: str | None
    metrics: str


class PlanView(Protocol):
    """What a frontend reads of a finished plan (rackbench.server.plan.ServerPlan is one)."""

    api_url: str
    model_name: str
    health_urls: tuple[str, ...]
    expected_instances: int
    alias: str | None
