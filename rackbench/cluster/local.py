"""The local backend: the same per-node processes, all on this machine, no scheduler. A watchdog stops them if the
session dies without releasing them (rackbench.cluster.watchdog)."""

from __future__ import annotations

import shutil
import subprocess

from rackbench.cluster.base import Allocation, AllocationRequest, Backend, NodeProcess
from rackbench.cluster.watchdog import Guard


def visible_gpus() -> int:
    """GPUs this machine shows (``nvidia-smi -L``; 0 without the tool or a driver)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU ")) if out.returncode == 0 else 0


class LocalAllocation(Allocation):
    backend = "local"

    _guard: Guard | None = None

    def _command(self, node, argv, env, name, image=None):
        return argv

    def _started(self, proc: NodeProcess) -> None:
        if self._guard is None:
            self._guard = Guard(self.request.stop_grace_s, proc.log)
        self._guard.guard(proc.popen.pid, proc.log)

    def _give_back(self) -> None:
        if self._guard is not None:
            self._guard.released()

    def addresses(self) -> list[str]:
        return ["127.0.0.1"] * len(self.nodes)

    @property
    def shares_host(self) -> bool:
        return True


class LocalBackend(Backend):
    name = "local"
    scheduled = False

    def allocate(self, request: AllocationRequest, timeout: float = 0) -> Allocation:
        return LocalAllocation(request, [f"local{i}" for i in range(request.nodes)])

    def dry_run(self, request: AllocationRequest) -> Allocation:
        return LocalAllocation(request, [f"local{i}" for i in range(request.nodes)], dry=True)

    def unavailable(self) -> str | None:
        """A GPU cluster of this machine needs its GPUs here."""
        cl = self.cluster
        if cl is not None and cl.kind == "gpu":
            have, need = visible_gpus(), cl.nodes * cl.gpus_per_node
            if have < need:
                return f"this machine shows {have} GPU(s) (nvidia-smi -L), {need} needed"
        return None
