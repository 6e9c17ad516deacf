"""`rackbench jobs`: the cluster jobs the sessions of a results folder hold or left behind (from their manifests),
each with its state as Slurm tells it and how long ago its session last beat; --release ends those whose session
is gone, and only a job the controller still shows as the one the manifest recorded (rackbench.cluster.slurm_jobs:
name, user, submit time, cluster): a job id reused by another user's job is reported, never cancelled."""

from __future__ import annotations

import time
from pathlib import Path

from rackbench.cli.base import RESULTS_DIR, Command
from rackbench.core.results_folder import RUNS, ResultsFolder
from rackbench.results.manifest import unreleased

# A heartbeat this recent means its session is alive (it beats every orphan_after_s / 6 <= 30 s by default).
ALIVE_S = 60


def held(results_dir: Path) -> list[dict]:
    """Every Slurm allocation a manifest of this folder records as not released (newest run first, once per job),
    with how long ago its session last rewrote the heartbeat."""
    base = ResultsFolder.at(results_dir).shared
    runs = sorted((base / RUNS).glob("*"), reverse=True) if (base / RUNS).is_dir() else []
    found: dict[str, dict] = {}
    for folder in (ResultsFolder.at(root) for root in [*runs, base]):
        for a in unreleased(folder):
            if a.get("job_id") and a.get("backend") == "slurm" and a["job_id"] not in found:
                beat = folder.profile(a["profile"]).heartbeat(a["name"])
                found[a["job_id"]] = {**a, "heartbeat_age_s": time.time() - beat.stat().st_mtime
                                      if beat.exists() else None}
    return list(found.values())


class JobsCommand(Command):
    name = "jobs"
    help = ("the Slurm jobs this results folder's sessions hold or left (a session killed before it released): "
            "state and heartbeat; --release cancels those whose session is gone")
    options = (RESULTS_DIR,)

    def add_arguments(self, parser) -> None:
        parser.add_argument("--release", action="store_true",
                            help="scancel every listed job still running whose session stopped beating "
                                 f"({ALIVE_S} s or more ago)")
        parser.add_argument("--force", action="store_true", help="with --release: also jobs of live sessions")

    def run(self, args) -> int:
        from rackbench.cluster.slurm_jobs import ENDED, job_state
        if not Path(args.results_dir).is_dir():
            raise ValueError(f"--results-dir {args.results_dir}: no such folder (a session's --results-dir, default "
                             "results/)")
        jobs = held(Path(args.results_dir))
        if not jobs:
            print(f"{args.results_dir}: no unreleased allocation in any manifest")
            return 0
        for a in jobs:
            state, _ = job_state(a["job_id"])
            running = state is not None and state.split()[0] not in ENDED
            age = a["heartbeat_age_s"]
            beat = "no heartbeat file" if age is None else f"heartbeat {age:.0f} s ago"
            alive = age is not None and age < ALIVE_S
            line = (f"job {a['job_id']} {a['name']} ({a['profile']}, run {a['run_id']}): "
                    f"{state if running else 'ended' + (f' ({state})' if state else '')}; {beat}"
                    f"{'' if alive else ' (its session is gone)'}")
            if running:
                line += self._act(a, alive, args)
            print(line)
        return 0

    @staticmethod
    def _act(a: dict, alive: bool, args) -> str:
        """What --release does with a running job (or what to run without it): nothing unless the controller still
        shows the job the manifest recorded under its id."""
        from rackbench.cluster.slurm_jobs import cancel, differences, job_identity
        if not (args.release or not alive):
            return ""
        foreign = differences(a.get("job"), job_identity(a["job_id"]))
        if foreign:
            return (f"; NOT this suite's job, left alone: {'; '.join(foreign)} (job ids are reused; check "
                    f"`squeue -j {a['job_id']} -o '%j %u %V'` and end your own job by hand if it is one)")
        if not args.release:
            return f"; end it: rackbench jobs --release --results-dir {args.results_dir}"
        if alive and not args.force:
            return "; not released: its session is alive (--force to release anyway)"
        done = cancel(a["job_id"], a["job"])
        return "; released" if done.returncode == 0 else f"; scancel failed: {done.stderr.strip()}"


COMMANDS = (JobsCommand,)
