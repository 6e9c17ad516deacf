"""The local backend's guard for a session that dies holding servers (SIGKILL, an OOM kill, a lost CI runner):
the Slurm backend's counterpart is the holder job's heartbeat (heartbeat.py); here the kernel tells at once.

An allocation starts one watchdog in a session of its own and keeps the write end of a pipe to it. For each process
it launches it sends ``<pgid> <log path>``; on release it sends ``released``. When the pipe ends without that word
(only the session held its write end, so it ends when the session does, however it ended), the watchdog writes
one line into each guarded process's log saying why, then stops every group: TERM, and KILL what is left after the
grace. Nothing here runs a shell; the paths are the allocation's own log files.

    python -P rackbench/cluster/watchdog.py GRACE_S   (stdin: the pipe; rackbench importable)
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

from rackbench.core.processes import stop_groups

log = logging.getLogger(__name__)
RELEASED = "released"


class Guard:
    """The session's side: the watchdog process and the pipe to it."""

    def __init__(self, grace_s: float, log_path: Path):
        """``log_path``: where the watchdog's own errors go (the first guarded process's log)."""
        package = str(Path(__file__).resolve().parents[2])            # rackbench importable however it was
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package, os.environ.get("PYTHONPATH")) if p)}
        with open(log_path, "ab") as err:
            # run as a file (-P: its folder not on the path), so that only rackbench.core loads, not the backends and
            # the recipe schema that rackbench.cluster's __init__ imports (docs/measurements.md: its start's cost)
            self.popen = subprocess.Popen([sys.executable, "-P", __file__, str(grace_s)],
                                          stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, env=env,
                                          start_new_session=True, text=True)

    def _send(self, line: str) -> None:
        try:
            self.popen.stdin.write(line + "\n")
            self.popen.stdin.flush()
        except (OSError, ValueError) as err:      # the watchdog is gone: the session still releases by itself
            log.warning("the local watchdog (pid %d) is not listening: %s", self.popen.pid, err)

    def guard(self, pgid: int, log_path: Path) -> None:
        self._send(f"{pgid} {log_path}")

    def released(self, timeout: float = 10.0) -> None:
        self._send(RELEASED)
        try:
            self.popen.stdin.close()
        except OSError:
            pass
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def watch(lines, grace_s: float) -> list[int]:
    """Read the pipe to its end; the groups to stop (none when the allocation was released)."""
    groups: dict[int, str] = {}
    for line in lines:
        word, _, path = line.rstrip("\n").partition(" ")
        if word == RELEASED:
            return []
        if word.isdigit():
            groups[int(word)] = path
    for pgid, path in groups.items():
        try:
            with open(path, "a") as out:
                out.write(f"rackbench watchdog: the session ended at {time.strftime('%H:%M:%S')} without releasing "
                          f"its allocation; stopping process group {pgid} (TERM, KILL after {grace_s:.0f} s)\n")
        except OSError:
            pass
    return list(groups)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    grace = float(args[0]) if args else 10.0
    groups = watch(sys.stdin, grace)
    if groups:
        stop_groups(groups, grace=grace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
