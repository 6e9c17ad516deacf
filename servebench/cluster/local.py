"""The local backend: the same per-node processes, all on this machine, no scheduler."""

from __future__ import annotations

import shutil
import subprocess

from .base import Allocation, AllocationRequest, Backend


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
