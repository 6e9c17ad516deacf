"""The local backend: the same per-node processes, all on this machine, no scheduler."""

from __future__ import annotations

from .base import Allocation, AllocationRequest, Backend


class LocalAllocation(Allocation):
    backend = "local"

    def _command(self, node, argv, env, name, image=None):
        return argv

    def _give_back(self) -> None:
        pass

    def addresses(self) -> list[str]:
        return ["127.0.0.1"] * len(self.nodes)


class LocalBackend(Backend):
    name = "local"

    def allocate(self, request: AllocationRequest, timeout: float = 0) -> Allocation:
        return LocalAllocation(request, [f"local{i}" for i in range(request.nodes)])

    def unavailable(self) -> str | None:
        return None
