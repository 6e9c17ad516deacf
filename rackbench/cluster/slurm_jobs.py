"""A Slurm job as the controller knows it: its state, and what identifies it beyond its id.

Job ids are reused (a controller's counter wraps or is reset; a results folder is copied to another cluster), so an
id alone never says that a job is this suite's. At submission the suite records the job's name (which carries the
session's run id), user, submit time and Slurm cluster name (:func:`job_identity`); anything that later acts on the
job by id (``rackbench jobs --release``) first compares what the controller shows now with that record
(:func:`differences`) and touches the job only when every field agrees, and then cancels it with ``scancel``'s own
name and user filters, so that the controller refuses a job that changed hands in between.
"""

from __future__ import annotations

import subprocess

# Job states after which a job never runs again (squeue forgets them; sacct keeps them).
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE", "REVOKED", "SPECIAL_EXIT")
IDENTITY = ("name", "user", "submitted", "cluster")     # what must agree before a job is touched by its id


def _run(argv: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def job_state(job_id: str) -> tuple[str | None, str]:
    """(state, "reason|nodes") of a job: squeue while Slurm lists it, else the accounting record (sacct, or
    sacct -c where accounting storage is off). State None: no source knows the job (yet)."""
    q = _run(["squeue", "-h", "-j", job_id, "-o", "%T|%r|%N"])
    line = q.stdout.strip()
    if q.returncode == 0 and line:
        state, rest = line.split("|", 1)
        return state, rest
    for argv in (["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "State,NodeList"],
                 ["sacct", "-c", "-n", "-P", "-j", job_id, "-o", "State,NodeList"]):
        out = _run(argv)
        rows = [r for r in out.stdout.splitlines() if "|" in r]
        if out.returncode == 0 and rows:
            state, nodes = rows[-1].split("|", 1)
            return state, f"|{nodes}"
    return None, ""


def cluster_name() -> str | None:
    """The controller's ClusterName (``scontrol show config``); None where it does not say."""
    out = _run(["scontrol", "show", "config"], timeout=15).stdout
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "ClusterName":
            return value.strip() or None
    return None


def job_identity(job_id: str) -> dict | None:
    """What identifies a listed job beyond its id: {name, user, submitted, cluster} as the controller shows them
    now (squeue's %j, %u, %V and the ClusterName). None when squeue lists no such job (it ended, or never was)."""
    q = _run(["squeue", "-h", "-j", job_id, "-o", "%j|%u|%V"])
    line = q.stdout.strip().splitlines()
    if q.returncode != 0 or not line or line[0].count("|") != 2:
        return None
    name, user, submitted = line[0].split("|")
    return {"name": name, "user": user, "submitted": submitted, "cluster": cluster_name()}


def differences(recorded: dict | None, seen: dict | None) -> list[str]:
    """Why the job the controller lists under an id is not the one a manifest recorded under it: one phrase per
    field of :data:`IDENTITY` that is missing from the record or differs. Empty: the same job."""
    if not recorded:
        return ["the manifest records only its id (no name, user, submit time or cluster to check it by)"]
    if seen is None:
        return ["the controller lists no job under that id"]
    return [f"{key} {seen.get(key)!r} where the manifest recorded {recorded.get(key)!r}" if recorded.get(key)
            else f"the manifest records no {key}" for key in IDENTITY if not recorded.get(key)
            or recorded.get(key) != seen.get(key)]


def cancel(job_id: str, identity: dict) -> subprocess.CompletedProcess:
    """scancel the job only if the controller still holds it under the recorded name and user (scancel's own
    filters: a job id reused between the check and the call is refused by the controller, not cancelled)."""
    return _run(["scancel", f"--name={identity['name']}", f"--user={identity['user']}", job_id])
