"""Are the containers' mount sources on the nodes? enroot refuses to start a container whose mount source is missing
(pyxis fails the step before its program runs), so a node without a staged folder starts none of etcd, NATS, the
frontend, a worker or the client, and each of them says only that its container did not start. This looks first, on
each node itself (a step without a container), so that preflight can name the folder and the fix.
"""

from __future__ import annotations

from rackbench.core.timeouts import MOUNTS_TIMEOUT_S
from rackbench.cluster.base import ON_THE_NODE, Allocation
from rackbench.core.poll import Done, PollTimeout, poll
from rackbench.core.results_folder import ProfileFolder

# A fixed script: the sources follow as arguments, so no path is spliced into shell text.
CHECK = ("sh", "-c", 'echo rackbench-mounts-start; for p; do [ -e "$p" ] || printf "rackbench-missing %s\\n" "$p"; '
         "done; echo rackbench-mounts-checked", "rackbench-mounts")
START, MISSING, CHECKED = "rackbench-mounts-start", "rackbench-missing ", "rackbench-mounts-checked"


def sources(allocation: Allocation) -> list[str]:
    """The host folders every container of the allocation mounts (none where its steps run in no container)."""
    req = allocation.request
    return sorted(req.container_mounts) if req.container_image and req.container_image != ON_THE_NODE else []


def on_the_host(path: str, mounts: dict[str, str]) -> str | None:
    """The host path of ``path`` as a container sees it, when it lies in one of the mounts (None otherwise: the
    image's own file)."""
    for src, dst in sorted(mounts.items(), key=lambda m: -len(m[1])):
        if path == dst or path.startswith(dst.rstrip("/") + "/"):
            return src.rstrip("/") + path[len(dst.rstrip("/")):]
    return None


def missing(allocation: Allocation, folder: ProfileFolder, also: tuple[str, ...] = (),
            timeout: float = MOUNTS_TIMEOUT_S) -> dict[str, list[str] | None]:
    """Per node: the mount sources it does not have, and of ``also`` (host paths of files the steps run from a
    mount: etcd's and NATS's binaries on shared storage) those missing (None: the look itself did not answer; its
    log says why)."""
    wanted = sources(allocation)
    wanted += [p for p in also if p not in wanted] if wanted else []
    if not wanted:
        return {}
    procs = [allocation.launch(rank, f"mounts{rank}", [*CHECK, *wanted], {}, folder.log(f"mounts{rank}"),
                               role="preflight", oneshot=True, image=ON_THE_NODE)
             for rank in range(len(allocation.nodes))]
    try:
        poll(lambda: Done(True) if not any(p.alive() for p in procs) else "running", timeout=timeout, interval=0.2,
             backoff=1.5, max_interval=2, what="the look at the containers' mount sources")
    except PollTimeout:
        allocation.stop_all(procs)
    out: dict[str, list[str] | None] = {}
    for proc in procs:
        try:
            lines = proc.log.read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        if START in lines:              # a log kept from an earlier look in this folder: this look's lines only
            lines = lines[len(lines) - lines[::-1].index(START):]
        out[proc.node] = [ln[len(MISSING):] for ln in lines if ln.startswith(MISSING)] if CHECKED in lines else None
    return out
