"""``sitedir``: every node is this machine, and each node process starts through ``env SITE_NODE=<node>`` with the
node's own working directory (what a site's wrapper around its own launcher might do)."""

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from rackbench.cluster.base import Allocation, AllocationRequest, Backend


class NodeDirOptions(BaseModel):
    """What a cluster file's backend_options may say to this backend (strict: an unknown key is refused)."""

    model_config = ConfigDict(extra="forbid")
    launcher: str = "env"             # read by nothing yet: what a site's real options model looks like


class NodeDirAllocation(Allocation):
    backend = "sitedir"

    def _command(self, node, argv, env, name, image=None):
        workdir = Path(self.request.workdir) / "nodes" / node
        if not self.dry:
            workdir.mkdir(parents=True, exist_ok=True)
        return ["env", "-C", str(workdir), f"SITE_NODE={node}", *argv]

    def _give_back(self) -> None:
        pass

    def addresses(self) -> list[str]:
        return ["127.0.0.1"] * len(self.nodes)


class NodeDirBackend(Backend):
    name = "sitedir"
    options = NodeDirOptions
    scheduled = False

    def allocate(self, request: AllocationRequest, timeout: float = 0) -> Allocation:
        return NodeDirAllocation(request, [f"site{i}" for i in range(request.nodes)])

    def dry_run(self, request: AllocationRequest) -> Allocation:
        return NodeDirAllocation(request, [f"site{i}" for i in range(request.nodes)], dry=True)

    def unavailable(self) -> str | None:
        return None
