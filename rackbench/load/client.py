"""Where a point's load generator runs, and how it is started and stopped there (cluster ``runtime.client``).

``head`` (the default, as the seed and srt-slurm run their clients): a step on the head compute node, launched
through the allocation like a server process (an srun step on Slurm), so the model directory, the staged corpus
and the servers' ports are as that node sees them; its output goes to the point's log on this host as it runs.
``login``: a process of the session's own host. Either way the generator's preparation (its install, the tokenizer
cache) runs first in the same step, through rackbench/tools/preamble.py.

After the run, what the generator wrote must be readable here: a client on a node writes into the results folder as
the node sees it, and a results folder on storage the login host does not share comes back empty. That is a failed
point that says so (:class:`FilesNotBack`), not a point with no requests.
"""

from __future__ import annotations

import re
from pathlib import Path

from rackbench.cluster import Allocation
from rackbench.load.generator import Handle, Invocation, LocalProcess, Start
from rackbench.server.containers import preamble_said
from rackbench.server.steps import ClientSpec
from rackbench.tools import preamble_command


class ClientSetupFailed(RuntimeError):
    """A step of the client's preamble failed (install, tokenizer): the generator never started."""


class FilesNotBack(RuntimeError):
    """The generator ran on a node, and nothing it wrote is visible on this host."""


# What pyxis (and the pyxis model) write when a step's container does not start: the program never ran.
_NO_CONTAINER = re.compile(r"pyxis: .*(fail|couldn't|could not|not started)", re.I)


class _Step:
    def __init__(self, allocation: Allocation, proc):
        self.allocation, self.proc = allocation, proc

    def poll(self) -> int | None:
        return self.proc.popen.poll()

    def interrupt(self) -> None:
        self.allocation.interrupt(self.proc)

    def stop(self) -> None:
        self.allocation.stop(self.proc)


def command(client: ClientSpec, inv: Invocation) -> list[str]:
    """What the client's step runs: its own install, the generator's preparation, then the generator."""
    return preamble_command(client.python, client.tools, (*client.preamble, *inv.steps), inv.argv)


def has_setup(client: ClientSpec, inv: Invocation) -> bool:
    """Whether the client's step runs a preamble before the generator (its command is then the preamble's)."""
    return bool(client.preamble or inv.steps)


def environment(client: ClientSpec, env: dict[str, str]) -> dict[str, str]:
    """The client step's environment: the generator's, with the client's own environment (made once) on its path."""
    return {**env, **client.env}


def starter(client: ClientSpec, allocation: Allocation | None, inv: Invocation) -> Start:
    """How this invocation starts where the client runs."""
    argv = command(client, inv)
    if client.on == "login" or allocation is None:
        return lambda env, log: LocalProcess(argv, environment(client, env), log)

    def on_head(env: dict[str, str], log: Path) -> Handle:
        proc = allocation.launch(client.rank, "client", argv, environment(client, env), log, role="client",
                                 oneshot=True, image=client.image)
        return _Step(allocation, proc)
    return on_head


def check_after(client: ClientSpec, inv: Invocation, code: int | None, wrote: bool) -> None:
    """Why a finished run did not measure (a preamble step failed; the files did not come back), or nothing."""
    if code not in (0, None):
        _, failed = preamble_said(inv.log)
        lines = inv.log.read_text(errors="replace").splitlines() if inv.log.exists() else []
        tail = "\n".join(lines[-15:])
        if failed:
            raise ClientSetupFailed(f"{failed} (the client on {client.node}); last lines of {inv.log}:\n{tail}")
        start = next((ln for ln in lines if _NO_CONTAINER.search(ln)), None)
        if start is not None:                   # not "nothing came back": nothing ran
            raise ClientSetupFailed(f"the client's container did not start on {client.node}, so the load generator "
                                    f"never ran: {start.strip()}; last lines of {inv.log}:\n{tail}")
    if client.on == "head" and not wrote:
        raise FilesNotBack(
            f"the load generator ran on {client.node} and wrote into {inv.out_dir} as that node sees it; nothing of "
            f"it is on this host (its log {inv.log} came back through the step): put the results folder on storage "
            "the nodes and this host share (--results-dir), or run the client on this host (runtime.client.placement: "
            "login) where it can see the model and the corpus")

