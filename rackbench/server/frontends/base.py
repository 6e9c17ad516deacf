"""The interface a frontend implements (rackbench.server.frontends). Planning and readiness are pure: they take the
profile, its :class:`~rackbench.server.placement.Placement` and the plan's port allocator, and return data; only
:meth:`Frontend.reported_versions` asks the running server."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from rackbench.server.spec import PlanView, ProcSpec, WorkerLaunch

if TYPE_CHECKING:           # only annotations: none of these imports the frontends
    from rackbench.recipe.profile import Profile
    from rackbench.recipe.topology import NodeRole
    from rackbench.server.placement import Placement
    from rackbench.server.ports import PortAllocator

Answers = dict[str, tuple[int, object]]                  # url -> (status code, parsed body)
Preamble = Callable[[dict[str, str]], tuple[tuple[dict, ...], frozenset[str]]]   # env -> (steps, needs)

__all__ = ["Frontend", "PlanView", "ProcSpec", "WorkerLaunch"]


class Frontend(ABC):
    """One frontend: its facts (what the catalog's flag rules and preflight read) and its share of a plan."""

    name: ClassVar[str]
    worker_entrypoint: ClassVar[str]            # the flag table's entrypoint that receives the engine flags
    entrypoints: ClassVar[dict[str, str]]       # every entrypoint its processes run -> the module preflight imports
    components: ClassVar[tuple[str, ...]]       # the frameworks its running processes report (identity.frameworks)
    titles: ClassVar[dict[str, str]]            # entrypoint -> how an error names it
    api_entrypoint: ClassVar[str | None] = None  # its own API process, which takes frontend.args (None: the worker's)
    many_workers: ClassVar[bool] = True         # can it route over agg_workers > 1 independent workers
    worker_is_vllm_serve: ClassVar[bool] = False  # its worker is the cluster's runtime.vllm_serve argv
    seed_framework: ClassVar[str | None] = None   # the seed system's FRAMEWORK label of a deployment it serves

    def installs(self, recipe: dict) -> dict[str, str]:
        """Versions the recipe's own install section pins for this frontend, as written (none by default)."""
        return {}

    # -- planning (pure) --
    def infra(self, profile: Profile, where: Placement, ports: PortAllocator) -> list[tuple[str, str, int]]:
        """(what, host, port) of the services the plan starts for it (etcd, NATS); none by default."""
        return []

    def environment(self, profile: Profile, where: Placement, infra: dict[str, int]) -> dict[str, str]:
        """What every process of the deployment gets in its environment from the frontend."""
        return {}

    @abstractmethod
    def worker(self, profile: Profile, where: Placement, role: NodeRole, host: str, api: int,
               ports: PortAllocator) -> WorkerLaunch:
        """The frontend's part of the worker process on ``role``'s node (``api``: the deployment's API port)."""

    def front(self, profile: Profile, where: Placement, api: int, common_env: dict[str, str], infra: dict[str, int],
              preamble: Preamble) -> list[ProcSpec]:
        """Processes that run before the workers (ProcSpecs): its own API process, infra; none by default.
        ``preamble(env)`` gives a process's launch preamble (steps, needs)."""
        return []

    def unbuilt(self, profile: Profile, cache: str, image: str | None) -> tuple[str, str, str] | None:
        """(what, where, what its build needs) of a build from source that the launch would run on a node and the
        shared ``cache`` does not hold yet: said before sbatch. None: nothing to build."""
        return None

    def install(self, profile: Profile, where: Placement) -> list[dict[str, Any]]:
        """Preamble steps that install the frontend into a process's environment (none by default)."""
        return []

    def alias(self, profile: Profile, where: Placement) -> str | None:
        """A second served-model name only this deployment answers to (what readiness then asks /v1/models for,
        so a client never takes another deployment's server for its own); None: the frontend has none."""
        return None

    def expected_instances(self, profile: Profile) -> int:
        """How many serving instances readiness waits for."""
        return 1

    def router_metrics_url(self, profile: Profile, plan: PlanView) -> str | None:
        """Where the deployment's KV-aware router reports the KV events it applied (None: it has no such router)."""
        return None

    # -- readiness (pure) --
    def readiness_urls(self, plan: PlanView) -> list[str]:
        return [*plan.health_urls, f"{plan.api_url}/v1/models"]

    def ready_workers(self, plan: PlanView, answers: Answers) -> int:
        """How many serving instances answer as ready (``answers`` as for ``interpret``): each worker's own health
        URL answering 200."""
        return sum(1 for url in plan.health_urls if answers[url][0] == 200)

    @abstractmethod
    def interpret(self, plan: PlanView, answers: Answers) -> str | None:
        """None when the deployment serves, else what it still waits for (``answers``: url -> (code, body))."""

    # -- the running server (I/O) --
    @abstractmethod
    def reported_versions(self, plan: PlanView, get: Callable[[str], tuple[int, object]]) -> dict[str, str]:
        """Versions the running processes report; ``get(url)`` returns (status code, parsed body)."""
