"""How a cluster backend says it failed: ClusterError, and ProcessDied for a launched process (a
rackbench.cluster.base.NodeProcess) that ended, in one line that names it, how it ended and, where a port it binds
was taken, the port and its holder."""

from __future__ import annotations

import re
import signal
from rackbench.core.listeners import holder


class ClusterError(RuntimeError):
    """Allocation or launch failed; the message says what and where."""


_IN_USE = re.compile(r"address already in use", re.I)
_BIND = re.compile(r"""bind(?:ing)? (?:on|to) (?:address )?\(['"]?[\w.:\[\]-]*['"]?,\s*(\d{2,5})\)"""  # uvicorn
                   r"""|(?:\*|\d+\.\d+\.\d+\.\d+|localhost|\]):(\d{2,5})\b""", re.I)             # host:port
_PORT_FLAGS = ("--port", "--http-port", "-p")


class ProcessDied(ClusterError):
    """A launched process ended. The message is its one line and its log's tail; a process that died because a
    port it binds was taken says that in one line instead, naming the port and, where the node is this machine,
    the holder (its whole log stays in the file)."""

    def __init__(self, proc, here: bool = False, cause: str | None = None):
        self.proc, self.cause = proc, cause
        tail = proc.tail()
        taken = port_taken(proc, tail, here)
        super().__init__(f"{self.line}: {taken}" if taken else f"{self.line}; last lines of {proc.log}:\n{tail}")

    @property
    def line(self) -> str:
        """Which process ended and how, in one line (no log tail)."""
        code = self.proc.popen.returncode if self.proc.popen is not None else None
        how = f"exited with code {code}"
        if isinstance(code, int) and (code < 0 or code > 128):     # killed here; srun reports a task's as 128 + N
            try:
                sig = signal.Signals(-code if code < 0 else code - 128)
            except ValueError:
                sig = None
            if sig is not None:
                how = f"killed by {sig.name}" if code < 0 else f"{how} (signal {sig.value}: {sig.name})"
        said = f"{self.proc.name} on node {self.proc.node} (rank {self.proc.rank}) {how}"
        return f"{said}: {self.cause}" if self.cause else said


def port_taken(proc, tail: str, here: bool) -> str | None:
    """'port N is taken (by ...)' when the log says a bind failed with EADDRINUSE, else None."""
    lines = [ln for ln in tail.splitlines() if _IN_USE.search(ln)]
    if not lines:
        return None
    found = next((m.group(1) or m.group(2) for ln in lines for m in [_BIND.search(ln)] if m), None)
    if found is None:
        found = next((proc.argv[i + 1] for i, a in enumerate(proc.argv[:-1]) if a in _PORT_FLAGS), None)
    port = int(found) if found and str(found).isdigit() else None
    if port is None:
        return f"a port it binds is taken (its log: {lines[-1].strip()[:160]}; the whole log: {proc.log})"
    who = holder(port) if here else None
    return (f"port {port} is taken on node {proc.node}" + (f" by {who}" if who else "") +
            f": a process outside rackbench's port leases bound it before the server did; stop it and run again "
            f"(where the recipe pins this port, removing the pin lets rackbench lease a free one) (the whole log: "
            f"{proc.log})")
