"""Which step can see what another wrote, as pyxis has it: an unnamed container and everything written in it vanish
when its step ends, a named one lives on on that node (past the job, in pyxis's default scope), and the node's own
filesystem is shared by
every step that runs there without a container.

A plan in which a process needs what another step made (the setup script's output, an installed Dynamo) where it
cannot see it is refused before anything starts. rackbench's own plans run each process's preamble in that
process's step (rackbench.server.plan.preamble), so they pass by construction; this is the check that keeps it so.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from rackbench.server.plan import ServerPlan
from rackbench.tools.preamble import STARTING


def unmet_needs(plan: ServerPlan) -> list[str]:
    """One line per need of a process that nothing it can see provides, and per host path it cannot see."""
    return _needs(plan) + host_paths_inside(plan)


def _needs(plan: ServerPlan) -> list[str]:
    out = []
    for proc in plan.processes:
        for need in sorted(proc.needs - proc.makes):
            makers = [q for q in plan.processes if q is not proc and need in q.makes and q.rank == proc.rank]
            if any(q.container.shares_files_with(proc.container) for q in makers):
                continue
            where = ", ".join(f"{q.name} ({q.container.describe()})" for q in makers) or "no step on its node"
            out.append(f"{proc.name} on node {proc.rank} needs {need!r}, made by {where}; {proc.name} runs "
                       f"{proc.container.describe()}, where that is not visible: run it in {proc.name}'s own "
                       "preamble, or share one named container")
    return out


def _paths(value) -> list[str]:
    """Absolute paths in an environment value, an argument or a JSON flag's strings (``a:b`` lists split)."""
    if isinstance(value, dict):
        return [p for v in value.values() for p in _paths(v)]
    if isinstance(value, list):
        return [p for v in value for p in _paths(v)]
    if not isinstance(value, str):
        return []
    if value.startswith(("{", "[")):
        try:
            return _paths(json.loads(value))
        except ValueError:
            pass
    return [part for part in value.split(":") if part.startswith("/")]


def _under(path: str, root: str) -> bool:
    return PurePosixPath(path).is_relative_to(root)


# Folders every container has of its own (pyxis gives each one its /tmp; the image brings the rest): a path there is
# the container's, not a node path beside a mount source, unless a mount's source is under it.
CONTAINER_OWN = ("/tmp", "/var/tmp", "/dev/shm", "/run")


def host_paths_inside(plan: ServerPlan) -> list[str]:
    """Paths on the node that a containerized process is told to use, where it cannot see them: a container sees a
    mounted folder only at the mount's destination (the model at /model, not at its staging path). A host path is
    one under a mounted source or beside it (the staging folder: /mnt/.../models/X-Draft next to the model); beside
    a source in one of the container's own folders (a results folder under /tmp) is the container's own path."""
    out = []
    for proc in plan.processes:
        box = proc.container
        if box.image is None or not box.mounts:
            continue
        roots = {src for src, _ in box.mounts if src != "/"} | \
            {parent for src, _ in box.mounts if (parent := str(PurePosixPath(src).parent)) not in ("/", *CONTAINER_OWN)}
        inside = [dst for _, dst in box.mounts]
        values = [(f"environment {k}", v) for k, v in proc.env.items() if v] + \
                 [(f"argument {a!r}" if len(a) < 60 else "an argument", a) for a in proc.argv]
        for where, value in values:
            for path in _paths(value):
                if any(_under(path, d) for d in inside) or not any(_under(path, r) for r in roots):
                    continue
                out.append(f"{proc.name}: {where} names {path}, a path on the node; {proc.name} runs "
                           f"{box.describe()}, so it is not there: use its mount destination, or add "
                           f"{path}: <inside> to runtime.container_mounts of the cluster file")
    return list(dict.fromkeys(out))


def preamble_done(log: Path) -> bool:
    """Whether rackbench/tools/preamble.py has run every step and started the process (its STARTING line)."""
    try:
        with open(log, errors="replace") as fh:
            return any(line.startswith("rackbench: " + STARTING) for line in fh)
    except OSError:
        return False


def preamble_said(log: Path) -> tuple[list[str], str | None]:
    """What rackbench/tools/preamble.py wrote in a process's log: the steps it did not run (and why), and the
    step that failed (the process itself then never started)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return [], None
    said = [ln.removeprefix("rackbench: ") for ln in lines if ln.startswith("rackbench: ")]
    return ([ln for ln in said if " not run: " in ln],
            next((ln for ln in said if " failed with exit code " in ln), None))
